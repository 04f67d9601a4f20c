package check

import (
	"context"
	"sync"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/internal/parallel"
	"github.com/truce-dev/truce/progress"
	"github.com/truce-dev/truce/simulate"
)

// problem is an object a simulation found a problem with.
type problem struct {
	setup  *simulate.Setup
	object *simulate.Object
}

// verifyAll finds and verifies the fixes of every problem, in the order
// given. Each candidate is verified on a cluster of its own, so problems
// are independent: opts.Workers of them are verified at a time, and the
// outcome is the same as one after another (TestWorkersAgree).
func (r *Repository) verifyAll(ctx context.Context, problems []problem, opts Options, load Loader, files *fix.Files) []*ProblemFixes {
	out := make([]*ProblemFixes, len(problems))
	var (
		mu       sync.Mutex
		verified int
	)
	started := func(p problem) {
		if load == nil {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		progress.Report(opts.Progress, progress.Event{Stage: progress.Verifying, Done: verified, Total: len(problems), Unit: p.object.Ref.String()})
		verified++
	}
	parallel.Each(len(problems), opts.Workers, func(i int) {
		started(problems[i])
		out[i] = r.fixes(ctx, problems[i].setup, problems[i].object, opts, load, files)
	})
	return out
}

// Scopes remembers which kinds are namespaced, for the repositories a
// check prepares again with each fix; safe for concurrent use.
type Scopes struct {
	mu         sync.Mutex
	namespaced map[k8sschema.GroupKind]bool
}

func (s *Scopes) get(gk k8sschema.GroupKind) (namespaced, known bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	namespaced, known = s.namespaced[gk]
	return namespaced, known
}

func (s *Scopes) set(gk k8sschema.GroupKind, namespaced bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.namespaced == nil {
		s.namespaced = map[k8sschema.GroupKind]bool{}
	}
	s.namespaced[gk] = namespaced
}
