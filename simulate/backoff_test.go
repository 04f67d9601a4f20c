package simulate

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	b := DefaultBackoff()
	want := []time.Duration{0, 2 * time.Second, 6 * time.Second, 18 * time.Second, 54 * time.Second, 162 * time.Second, 300 * time.Second, 300 * time.Second}
	for attempts, w := range want {
		if got := b.delay(attempts); got != w {
			t.Errorf("delay(%d) = %s, want %s", attempts, got, w)
		}
	}
}

func TestQueueKeepsTheEarlierEvent(t *testing.T) {
	q := &queue{}
	q.schedule(event{at: 10 * time.Second, kind: writerEvent, writer: 1})
	q.schedule(event{at: 5 * time.Second, kind: writerEvent, writer: 1})
	q.schedule(event{at: 7 * time.Second, kind: writerEvent, writer: 1})
	q.schedule(event{at: 6 * time.Second, kind: reconcileEvent, trigger: "a"})
	q.schedule(event{at: 6 * time.Second, kind: writerEvent, writer: 2})
	var got []string
	for q.Len() > 0 {
		e := popEvent(q)
		got = append(got, e.at.String())
	}
	want := []string{"5s", "6s", "6s"}
	if len(got) != len(want) {
		t.Fatalf("events %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("events %v, want %v", got, want)
		}
	}
}
