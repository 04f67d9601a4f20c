package progress

import (
	"strings"
	"testing"
	"time"
)

func TestFormat(t *testing.T) {
	tests := []struct {
		name    string
		e       Event
		elapsed time.Duration
		want    string
	}{
		{"stage only", Event{Stage: Reading}, 0, "truce: reading · 0s"},
		{"counted", Event{Stage: Simulating, Done: 3, Total: 12, Unit: "Kustomization apps", Objects: 240, Rounds: 4}, 12400 * time.Millisecond,
			"truce: simulating 3/12 · Kustomization apps · 240 objects · round 4 · 12s"},
		{"count without total", Event{Stage: Diffing, Done: 7}, time.Minute, "truce: comparing 7 · 1m0s"},
		{"one object", Event{Stage: Verifying, Done: 1, Total: 2, Objects: 1}, 0, "truce: verifying fixes 1/2 · 1 object · 0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Format(tt.e, tt.elapsed); got != tt.want {
				t.Errorf("Format = %q, want %q", got, tt.want)
			}
		})
	}
}

// clock is a settable clock for Line.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func TestLineDrawsAtMostEveryIntervalPerStage(t *testing.T) {
	c := &clock{t: time.Unix(0, 0)}
	var b strings.Builder
	l := NewLine(&b, c.now)
	l.Progress(Event{Stage: Simulating, Done: 1, Total: 3})
	c.t = c.t.Add(10 * time.Millisecond)
	l.Progress(Event{Stage: Simulating, Done: 2, Total: 3}) // too soon: not drawn
	c.t = c.t.Add(10 * time.Millisecond)
	l.Progress(Event{Stage: Verifying, Done: 1, Total: 1}) // a new stage: drawn
	c.t = c.t.Add(time.Second)
	l.Progress(Event{Stage: Verifying, Done: 1, Total: 1, Rounds: 2})
	l.Close()
	l.Close() // a second Close writes nothing
	want := "\r\x1b[Ktruce: simulating 1/3 · 0s" +
		"\r\x1b[Ktruce: verifying fixes 1/1 · 0s" +
		"\r\x1b[Ktruce: verifying fixes 1/1 · round 2 · 1s" +
		"\r\x1b[K"
	if got := b.String(); got != want {
		t.Errorf("wrote %q\nwant  %q", got, want)
	}
}

func TestLineCutsToWidth(t *testing.T) {
	var b strings.Builder
	l := NewLine(&b, time.Now)
	l.Width = 20
	l.Progress(Event{Stage: Simulating, Unit: "Kustomization a-very-long-name-indeed"})
	got := strings.TrimPrefix(b.String(), "\r\x1b[K")
	if n := len([]rune(got)); n != 19 {
		t.Errorf("line %q has %d characters, want 19 (width 20 less one, so it never wraps)", got, n)
	}
}

func TestReportToNilSink(t *testing.T) {
	Report(nil, Event{Stage: Reading}) // must not panic
}
