package check

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/progress"
	"github.com/truce-dev/truce/simulate"
)

// cancelAt cancels a run when it reports the event stop says, as a
// time limit running out at that moment would.
type cancelAt struct {
	mu     sync.Mutex
	stop   func(progress.Event) bool
	cancel context.CancelFunc
	events []progress.Event
}

func (c *cancelAt) Progress(e progress.Event) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.events = append(c.events, e)
	if c.stop(e) {
		c.cancel()
	}
}

// TestRunCutShort checks what a check reports when its context ends
// part-way: the units simulated before keep their verdicts, the rest are
// Unpredictable (never Synced), and fixes not verified say why.
func TestRunCutShort(t *testing.T) {
	load := func(t *testing.T) Input {
		var in Input
		for _, p := range []string{"../examples/image-mirror/app", "../examples/image-mirror/argocd", "../examples/image-mirror/batch"} {
			objs, err := manifest.LoadPaths(context.Background(), []string{p}, manifest.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			in.Repository = append(in.Repository, objs...)
		}
		cl, err := manifest.LoadPaths(context.Background(), []string{"../examples/image-mirror/cluster"}, manifest.DefaultOptions())
		if err != nil {
			t.Fatal(err)
		}
		in.Cluster = cl
		return in
	}
	tests := []struct {
		name string
		stop func(progress.Event) bool
		// wantNotSimulated: some unit is reported not simulated;
		// wantUnverified: some fix note says it was not verified.
		wantNotSimulated, wantUnverified bool
	}{
		{name: "before the second unit", stop: func(e progress.Event) bool { return e.Stage == progress.Simulating && e.Done == 1 && e.Rounds == 0 },
			wantNotSimulated: true, wantUnverified: true},
		{name: "while verifying fixes", stop: func(e progress.Event) bool { return e.Stage == progress.Verifying },
			wantUnverified: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := load(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			sink := &cancelAt{stop: tt.stop, cancel: cancel}
			// One unit at a time, so that "before the second unit" is a
			// moment of the run.
			opts := Options{Progress: sink, Workers: 1}
			out, err := Check(ctx, in, opts, NewLoader(Sources{Repository: []string{"../examples/image-mirror"}}, in), nil)
			if err != nil {
				t.Fatal(err)
			}
			notSimulated, unverified, judged := false, false, 0
			for _, run := range out.Report.Runs {
				for _, o := range run.Objects {
					if strings.Contains(o.Reason, "not simulated: "+outOfTime) {
						notSimulated = true
						if o.Verdict != simulate.Unpredictable {
							t.Errorf("%s %s: verdict %s, want Unpredictable", run.Unit, o.Object, o.Verdict)
						}
						continue
					}
					judged++
					for _, n := range o.Notes {
						if strings.Contains(n, "not verified: "+outOfTime) {
							unverified = true
						}
					}
				}
			}
			if notSimulated != tt.wantNotSimulated || unverified != tt.wantUnverified {
				t.Errorf("not simulated %v (want %v), fixes unverified %v (want %v)", notSimulated, tt.wantNotSimulated, unverified, tt.wantUnverified)
			}
			if judged == 0 {
				t.Error("nothing was judged before the run was cut short")
			}
			if len(sink.events) == 0 || sink.events[0].Stage != progress.Simulating || sink.events[0].Total < 2 {
				t.Errorf("first event %+v, want simulating with the number of units", sink.events)
			}
		})
	}
}
