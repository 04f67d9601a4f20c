package gatekeeper

import "sync"

// notes are what Gatekeeper did with its objects beyond any one request:
// a template it cannot ingest (it creates no CRD for its constraints), a
// constraint it cannot add. The chain is rebuilt many times in one run; a
// note is kept once.
type notes struct {
	mu   sync.Mutex
	seen map[string]bool
	list []string
}

func (n *notes) add(list ...string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, note := range list {
		if n.seen[note] {
			continue
		}
		if n.seen == nil {
			n.seen = map[string]bool{}
		}
		n.seen[note] = true
		n.list = append(n.list, note)
	}
}

// Notes implements admission.Noter.
func (e *Engine) Notes() []string {
	e.notes.mu.Lock()
	defer e.notes.mu.Unlock()
	return append([]string(nil), e.notes.list...)
}
