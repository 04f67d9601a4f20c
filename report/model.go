// Package report is what `truce check` found, and its output formats:
// text for a terminal, JSON for programs, SARIF for code scanning, JUnit
// for CI test views, and one self-contained HTML page for people.
package report

import (
	"time"

	"github.com/truce-dev/truce/simulate"
)

// Report is the result of one `truce check`.
type Report struct {
	// Repository is what was checked (a directory or a Git URL).
	Repository string `json:"repository"`
	// Runs are the simulations, one per GitOps tool and unit (Application,
	// Kustomization, or the tool's defaults).
	Runs []Run `json:"runs"`
	// Findings are problems in the settings themselves: ignore rules that
	// do nothing, options that have no effect.
	Findings []Finding `json:"findings,omitempty"`
}

// Run is one simulation.
type Run struct {
	// World is the entry point the unit was reached from (a Flux cluster
	// directory, the paths checked), when the repository was read
	// through its entry points; several clusters in one repository are
	// told apart by it.
	World     string        `json:"world,omitempty"`
	Tool      string        `json:"tool"`
	Unit      string        `json:"unit,omitempty"`
	Settings  string        `json:"settings"`
	Window    time.Duration `json:"window"`
	Simulated time.Duration `json:"simulated"`
	Objects   []Object      `json:"objects"`
}

// Object is the verdict for one object under one run.
type Object struct {
	// Object names it: Kind[.group] namespace/name.
	Object string `json:"object"`
	// Source is the manifest's file:line ("" for objects not in Git).
	Source  string           `json:"source,omitempty"`
	Verdict simulate.Verdict `json:"verdict"`
	Reason  string           `json:"reason"`
	Loop    *Loop            `json:"loop,omitempty"`
	// Fields are the fields that differ in the tool's last comparison.
	Fields []Field `json:"fields,omitempty"`
	// Writes counts writes to the object in the window.
	Writes int `json:"writes"`
	// Timeline is the evidence: every write to the object, in order.
	Timeline []Event `json:"timeline,omitempty"`
	// Desired and Live are the two sides of the last comparison, as YAML,
	// for a side-by-side view (Secret values masked).
	Desired string `json:"desired,omitempty"`
	Live    string `json:"live,omitempty"`
	// Fix is the narrowest fix that was verified to resolve the problem;
	// Alternatives are the other candidates, verified or not, in order of
	// preference (put the mutation in Git, switch mutate to validate,
	// server-side diff, narrow ignore rules).
	Fix          *Fix  `json:"fix,omitempty"`
	Alternatives []Fix `json:"alternatives,omitempty"`
	// Notes say why fixes were left out or could not be verified.
	Notes []string `json:"notes,omitempty"`
}

// Problem reports whether the verdict needs attention.
func (o *Object) Problem() bool { return o.Verdict.Problem() }

// Loop is a write loop.
type Loop struct {
	Fields        []string      `json:"fields"`
	Tool          string        `json:"tool"`
	Other         string        `json:"other"`
	OtherKind     string        `json:"otherKind"`
	Period        time.Duration `json:"period"`
	WritesPerHour float64       `json:"writesPerHour"`
}

// Field is one difference in the tool's comparison.
type Field struct {
	Pointer   string `json:"pointer"`
	Desired   string `json:"desired,omitempty"`
	Live      string `json:"live,omitempty"`
	Origin    string `json:"origin,omitempty"`
	IgnoredBy string `json:"ignoredBy,omitempty"`
}

// Event is one write in the timeline.
type Event struct {
	At     time.Duration `json:"at"`
	Writer string        `json:"writer"`
	ByTool bool          `json:"byTool"`
	Verb   string        `json:"verb"`
	// Changes are "pointer: old → new" lines of the stored object; empty
	// for a write the server stored unchanged.
	Changes []string `json:"changes,omitempty"`
	// Admission names admission steps that changed the request.
	Admission []string `json:"admission,omitempty"`
	Error     string   `json:"error,omitempty"`
}

// Fix is one way to resolve a problem.
type Fix struct {
	// Kind is git-value, validating-policy, argocd-server-side-diff,
	// give-to-controller, ignore-rule or tracking-annotation.
	Kind  string `json:"kind"`
	Title string `json:"title"`
	// Description says what changes and why; Warning what the user gives
	// up (an ignore rule hides real drift in its fields).
	Description string `json:"description"`
	Warning     string `json:"warning,omitempty"`
	// Verified is true when re-running the simulation with the fix applied
	// gave Verdict (Synced, or the given verdict).
	Verified bool             `json:"verified"`
	Verdict  simulate.Verdict `json:"verdict,omitempty"`
	// Edits are the file changes the fix makes, as unified diffs.
	Edits []Edit `json:"edits"`
}

// Edit is one file the fix writes.
type Edit struct {
	Path string `json:"path"`
	// New is true for a file the fix creates.
	New  bool   `json:"new,omitempty"`
	Diff string `json:"diff"`
}

// Finding is a problem in the settings.
type Finding struct {
	Source  string `json:"source,omitempty"`
	Message string `json:"message"`
	// Pointer is the ignore rule's jsonPointers (or Flux paths) entry the
	// finding is about, when it is about one.
	Pointer string `json:"pointer,omitempty"`
}

// Counts returns how many objects have each verdict, over all runs.
func (r *Report) Counts() map[simulate.Verdict]int {
	out := map[simulate.Verdict]int{}
	for _, run := range r.Runs {
		for _, o := range run.Objects {
			out[o.Verdict]++
		}
	}
	return out
}

// Failed reports whether something loops, is rejected or stays OutOfSync
// (exit status 1).
func (r *Report) Failed() bool {
	for _, run := range r.Runs {
		for _, o := range run.Objects {
			if o.Verdict.Failed() {
				return true
			}
		}
	}
	return false
}

// UnitLabel names the run's unit with its world: "clusters/staging:
// apps", or the unit alone.
func (r *Run) UnitLabel() string {
	if r.World == "" {
		return r.Unit
	}
	if r.Unit == "" {
		return r.World + ": (defaults)"
	}
	return r.World + ": " + r.Unit
}
