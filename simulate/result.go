package simulate

import (
	"time"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/manifest"
)

// Verdict is what happens to one object under one GitOps tool.
type Verdict string

// Verdicts, from best to worst for a reader deciding what to look at.
const (
	// Synced: the tool applies the object and then sees no drift.
	Synced Verdict = "Synced"
	// OutOfSync: drift stays and the tool does not correct it (no
	// self-heal): a false difference that hides real drift.
	OutOfSync Verdict = "OutOfSync"
	// Loop: the tool and another writer keep writing the same field.
	Loop Verdict = "Loop"
	// Pruned: an object the tool does not have in Git, but believes it
	// owns, is deleted by its prune.
	Pruned Verdict = "Pruned"
	// Rejected: admission denies the tool's write.
	Rejected Verdict = "Rejected"
	// Unpredictable: a webhook in the write path could not be called
	// offline, so what is stored is not known.
	Unpredictable Verdict = "Unpredictable"
)

// Problem reports whether the verdict needs a fix.
func (v Verdict) Problem() bool { return v != Synced }

// Failed reports whether the verdict fails a check (exit status 1):
// something loops, is rejected, pruned or stays OutOfSync. Unpredictable
// does not: nothing is known to be wrong.
func (v Verdict) Failed() bool {
	switch v {
	case Loop, Rejected, OutOfSync, Pruned:
		return true
	}
	return false
}

// Verdicts lists every verdict, problems first, in the order summaries
// show them.
func Verdicts() []Verdict {
	return []Verdict{Loop, OutOfSync, Rejected, Pruned, Unpredictable, Synced}
}

// Result is one run of one tool.
type Result struct {
	// Tool is "argocd" or "flux"; Unit names the Application or
	// Kustomization whose settings were used ("" for the defaults).
	Tool string `json:"tool"`
	Unit string `json:"unit,omitempty"`
	// Settings describes the tool's behaviour in one line (diff strategy,
	// self-heal, interval...).
	Settings string `json:"settings"`
	// Window is the stretch of time the verdicts cover; Simulated is how
	// much of it was run write by write (the rest is extrapolated from the
	// repeating cycle).
	Window    time.Duration `json:"window"`
	Simulated time.Duration `json:"simulated"`
	Objects   []*Object     `json:"objects"`
	Rounds    []Round       `json:"rounds"`
	Writes    []Write       `json:"writes"`
}

// Object is the verdict for one object.
type Object struct {
	Ref cluster.Ref `json:"ref"`
	// Source is the manifest's file and line; zero for objects not in Git.
	Source manifest.Source `json:"source"`
	// InGit is false for objects other writers created (generated copies).
	InGit   bool    `json:"inGit"`
	Verdict Verdict `json:"verdict"`
	// Reason says why, in a sentence.
	Reason string `json:"reason"`
	// Loop is set for Loop verdicts.
	Loop *LoopInfo `json:"loop,omitempty"`
	// Drift is the tool's last comparison of the object (nil when it was
	// never compared, e.g. a pruned copy).
	Drift *drift.Object `json:"drift,omitempty"`
	// Writes counts the writes to the object in the window, the tool's and
	// everyone else's (extrapolated beyond Simulated).
	Writes int `json:"writes"`
	// Rejection is the API error of a rejected write.
	Rejection string `json:"rejection,omitempty"`
	// Unpredictable names the webhooks that could not be called.
	Unpredictable []string `json:"unpredictable,omitempty"`
}

// LoopInfo is a write loop: the fields, the two writers and how fast.
type LoopInfo struct {
	Fields []string `json:"fields"`
	// Tool is the GitOps tool's field manager; Other is the other writer: a
	// field manager, or the admission step that changes the tool's own
	// request ("MutatingAdmissionPolicy/mirror (binding mirror)").
	Tool  string `json:"tool"`
	Other string `json:"other"`
	// OtherStep is Other as data when the other writer is an admission
	// step.
	OtherStep *admission.Step `json:"-"`
	// OtherKind is "admission" when the other writer changes the tool's
	// request in flight, "controller" when it writes on its own.
	OtherKind string `json:"otherKind"`
	// Period is the steady-state time between two writes of the tool;
	// WritesPerHour counts the writes of both sides at that pace.
	Period        time.Duration `json:"period"`
	WritesPerHour float64       `json:"writesPerHour"`
}

// Round is one reconciliation of the tool.
type Round struct {
	At time.Duration `json:"at"`
	// Trigger says why it ran: "initial sync", "self-heal (attempt 3)",
	// "interval".
	Trigger string `json:"trigger"`
	// OutOfSync are the objects the tool found drifted before it acted.
	OutOfSync []cluster.Ref `json:"outOfSync,omitempty"`
	// Applied and Pruned are what it wrote.
	Applied []cluster.Ref `json:"applied,omitempty"`
	Pruned  []cluster.Ref `json:"pruned,omitempty"`
	// Failed holds the errors that failed the reconciliation.
	Failed []string `json:"failed,omitempty"`
}

// Write is one write request, by the tool or by another writer.
type Write struct {
	At     time.Duration `json:"at"`
	Writer string        `json:"writer"`
	// ByTool is true for the GitOps tool's own writes: in a world of
	// several units, those of the result's own unit.
	ByTool bool `json:"byTool"`
	// member is the index of the world's member that wrote, -1 for other
	// writers.
	member int
	Verb   string      `json:"verb"`
	Ref    cluster.Ref `json:"ref"`
	// Changed is false when the server stored nothing (a no-op).
	Changed bool `json:"changed"`
	// Fields are the stored fields the write changed, with old and new
	// values (Desired holds the old value, Live the new one). A create's
	// are the object's top-level fields, without values.
	Fields []drift.Field `json:"fields,omitempty"`
	// Admission lists the admission steps that changed the request and
	// the fields each changed (API defaulting left out).
	Admission []StepChange `json:"admission,omitempty"`
	// Unpredictable names webhooks in the write path that could not be
	// called offline.
	Unpredictable []string `json:"unpredictable,omitempty"`
	// Error is the API error of a failed write.
	Error string `json:"error,omitempty"`
}

// StepChange is what one admission step changed in a request.
type StepChange struct {
	By string `json:"by"`
	// Step is By as data, for fixes that edit the step's policy.
	Step   admission.Step `json:"-"`
	Fields []string       `json:"fields"`
}
