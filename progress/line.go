package progress

import (
	"fmt"
	"io"
	"strings"
	"sync"
	"time"
)

// Line shows the latest event as one line rewritten in place on a
// terminal, with the time since the run started. It draws at most every
// Interval, except when the stage changes, so that a fast run does not
// spend its time writing to the terminal.
type Line struct {
	w     io.Writer
	now   func() time.Time
	start time.Time
	// Interval is the least time between two redraws of one stage.
	Interval time.Duration
	// Width cuts the line to the terminal's width (0: no limit), so
	// that it never wraps and leaves a trail.
	Width int

	mu    sync.Mutex
	last  Event
	drawn time.Time
	shown bool
}

// NewLine returns a Line writing to w; now is the clock (time.Now).
func NewLine(w io.Writer, now func() time.Time) *Line {
	return &Line{w: w, now: now, start: now(), Interval: 100 * time.Millisecond}
}

// Progress draws e unless the line was drawn less than Interval ago for
// the same stage.
func (l *Line) Progress(e Event) {
	l.mu.Lock()
	defer l.mu.Unlock()
	t := l.now()
	if l.shown && e.Stage == l.last.Stage && t.Sub(l.drawn) < l.Interval {
		l.last = e
		return
	}
	l.last, l.drawn, l.shown = e, t, true
	text := Format(e, t.Sub(l.start))
	if l.Width > 0 && len([]rune(text)) >= l.Width {
		text = string([]rune(text)[:l.Width-1])
	}
	// Carriage return and erase-line: the line is redrawn in place.
	fmt.Fprintf(l.w, "\r\x1b[K%s", text)
}

// Close erases the line, so that what the run prints next starts on a
// clean line.
func (l *Line) Close() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.shown {
		fmt.Fprint(l.w, "\r\x1b[K")
		l.shown = false
	}
}

// Format is the text of an event after elapsed: "simulating 3/12 ·
// Kustomization apps · 240 objects · round 4 · 12s".
func Format(e Event, elapsed time.Duration) string {
	parts := []string{string(e.Stage)}
	switch {
	case e.Total > 0:
		parts[0] += fmt.Sprintf(" %d/%d", e.Done, e.Total)
	case e.Done > 0:
		parts[0] += fmt.Sprintf(" %d", e.Done)
	}
	if e.Unit != "" {
		parts = append(parts, e.Unit)
	}
	if e.Objects > 0 {
		parts = append(parts, plural(e.Objects, "object"))
	}
	if e.Rounds > 0 {
		parts = append(parts, fmt.Sprintf("round %d", e.Rounds))
	}
	parts = append(parts, elapsed.Round(time.Second).String())
	return "truce: " + strings.Join(parts, " · ")
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}
