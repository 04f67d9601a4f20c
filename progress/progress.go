// Package progress carries what a long run is doing — units simulated,
// rounds, fixes being verified — from the packages doing it to whoever
// shows it. A run reports through a Sink; the command line shows it on a
// terminal (Line), and nothing else ever sees it: progress is never part
// of a report.
package progress

// Stage is the part of a run an Event belongs to.
type Stage string

// The stages of check, fix, diff and lint.
const (
	Reading    Stage = "reading"
	Simulating Stage = "simulating"
	Verifying  Stage = "verifying fixes"
	Diffing    Stage = "comparing"
	Linting    Stage = "linting"
)

// Event is one step of a run.
type Event struct {
	Stage Stage
	// Done and Total count the stage's items (units, fixes, objects);
	// Total 0 when unknown.
	Done, Total int
	// Unit is the unit, object or file at hand, as reports name it.
	Unit string
	// Objects and Rounds say how big the step is: the objects it holds,
	// the reconciliations simulated so far.
	Objects, Rounds int
}

// Sink receives a run's events. Implementations are safe for concurrent
// use and return quickly: they are called from the run's own goroutines.
type Sink interface {
	Progress(Event)
}

// Report sends e to s; a nil Sink reports nowhere, so that callers need
// not check.
func Report(s Sink, e Event) {
	if s != nil {
		s.Progress(e)
	}
}
