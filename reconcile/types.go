package reconcile

import (
	"time"

	"github.com/truce-dev/truce/cluster"
)

// Action is what a pass did with one object.
type Action string

const (
	Created    Action = "Created"
	Configured Action = "Configured"
	Unchanged  Action = "Unchanged"
	Pruned     Action = "Pruned"
	// Skipped: not applied because the stage before it failed, or the
	// object is not allowed (another sync's tracking id).
	Skipped Action = "Skipped"
	Failed  Action = "Failed"
)

// ObjectResult is one object's outcome in a pass.
type ObjectResult struct {
	Ref    cluster.Ref `json:"ref"`
	Source string      `json:"source,omitempty"`
	Action Action      `json:"action"`
	// Drifted are the fields (JSON pointers) whose live value differed from
	// what the apply stores; empty when Unchanged.
	Drifted []string `json:"drifted,omitempty"`
	// Ignored are the ignored fields that differed and how the payload
	// treated them.
	Ignored []IgnoredField `json:"ignored,omitempty"`
	// Contested are the fields truce no longer writes on this object.
	Contested []Contest `json:"contested,omitempty"`
	// Reverted are the fields people edited outside Git that the pass
	// wrote back (in a dry run: would write back).
	Reverted []ManualEdit `json:"reverted,omitempty"`
	Error    string       `json:"error,omitempty"`
	// Note explains a Skipped object (e.g. a copy that is not pruned).
	Note string `json:"note,omitempty"`
}

// IgnoredField is an ignored path whose live value differed from Git.
type IgnoredField struct {
	Pointer string `json:"pointer"`
	// Treatment is "strip" (another Apply manager owns it: left out of
	// the payload) or "adopt" (the live value is applied).
	Treatment string `json:"treatment"`
	Rule      string `json:"rule"`
}

// Treatments of ignored and contested fields.
const (
	Strip = "strip"
	Adopt = "adopt"
)

// Writer is the other side of a contested field.
type Writer struct {
	// Manager and Operation are the field manager owning the field now
	// (Operation Apply or Update); empty when the change was made inside
	// truce's own write, by admission.
	Manager   string `json:"manager,omitempty"`
	Operation string `json:"operation,omitempty"`
	// Admission names the policy or webhook that changed the field inside
	// truce's write, found by replaying the admission chain offline.
	Admission string `json:"admission,omitempty"`
}

func (w Writer) String() string {
	switch {
	case w.Admission != "":
		return w.Admission + " (admission)"
	case w.Manager != "":
		return "field manager " + w.Manager + " (" + w.Operation + ")"
	}
	return "an unknown writer"
}

// ManualEdit is a field a person changed outside Git (a field manager
// LoopOptions.IsHuman tells): truce writes Git's value back on every
// pass and never contests it.
type ManualEdit struct {
	Ref     cluster.Ref `json:"ref"`
	Pointer string      `json:"pointer"`
	// Writer is the person's field manager and operation.
	Writer Writer `json:"writer"`
	// Git is the value written back; Live the person's.
	Git  any `json:"git,omitempty"`
	Live any `json:"live,omitempty"`
}

// Contest is a field truce stopped writing because another writer keeps
// changing it.
type Contest struct {
	Ref     cluster.Ref `json:"ref"`
	Source  string      `json:"source,omitempty"`
	Pointer string      `json:"pointer"`
	Writer  Writer      `json:"writer"`
	// Git is the value truce would write; Live the value the other writer
	// keeps.
	Git  any `json:"git,omitempty"`
	Live any `json:"live,omitempty"`
	// Changes is how many times truce found its value changed again.
	Changes int       `json:"changes"`
	Since   time.Time `json:"since"`
	// Fix is the recommended fix, in truce check's terms.
	Fix Fix `json:"fix"`
	// Revision and Admission are the Git revision and the digest of the
	// admission configuration when the contest started: another revision
	// lifts it; another configuration lifts it when it changes Effect.
	Revision  string `json:"revision"`
	Admission string `json:"admission,omitempty"`
	// Effect digests what replaying the admission configuration over
	// truce's write does to the field (the value stored and the steps that
	// changed it). When the configuration changes, the contest is lifted
	// only if its effect on the field changed too: rotating a webhook's CA
	// or adding a policy for other kinds leaves it in force. Empty: any
	// configuration change lifts it.
	Effect string `json:"effect,omitempty"`
}

// Fix is a recommended change, one of truce fix's kinds.
type Fix struct {
	Kind        string `json:"kind"`
	Description string `json:"description"`
}

// Result is the outcome of one pass.
type Result struct {
	Revision string         `json:"revision"`
	Objects  []ObjectResult `json:"objects"`
	// Pruned lists deleted objects in deletion order.
	Pruned []cluster.Ref `json:"pruned,omitempty"`
	// Contested lists every contested field, also those of earlier passes
	// still in force.
	Contested []Contest `json:"contested,omitempty"`
	// Reverted lists the people's edits the pass wrote back.
	Reverted []ManualEdit `json:"reverted,omitempty"`
	// Errors are the problems that stopped part of the pass; the pass is
	// not synced while there are any.
	Errors   []string      `json:"errors,omitempty"`
	Duration time.Duration `json:"duration"`
	// Writes counts the create, apply and delete requests made.
	Writes int  `json:"writes"`
	DryRun bool `json:"dryRun,omitempty"`
}

// Count returns how many objects had action a.
func (r *Result) Count(a Action) int {
	n := 0
	for _, o := range r.Objects {
		if o.Action == a {
			n++
		}
	}
	return n
}

// Drifted reports whether the pass found drift (in a dry run: would write).
func (r *Result) Drifted() bool {
	return r.Count(Created)+r.Count(Configured) > 0 || len(r.Pruned) > 0
}

// Synced reports whether Git and the cluster agree after the pass: no
// errors and nothing contested.
func (r *Result) Synced() bool { return len(r.Errors) == 0 && len(r.Contested) == 0 }
