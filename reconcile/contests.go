package reconcile

import (
	"context"
	"encoding/json"
	"fmt"

	"github.com/truce-dev/truce/cluster"
)

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// GitSyncGVK is the kind whose status shows a sync (see package gitsync).
var GitSyncGVK = cluster.Ref{}.GroupVersionKind

func init() {
	GitSyncGVK.Group, GitSyncGVK.Version, GitSyncGVK.Kind = "truce.dev", "v1alpha1", "GitSync"
}

func unversioned(ref cluster.Ref) cluster.Ref {
	ref.Version = ""
	return ref
}

// contestsOf returns the contests in force on ref.
func (p *pass) contestsOf(ref cluster.Ref) []Contest {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Contest(nil), p.contested[unversioned(ref)]...)
}

func (p *pass) addContest(c Contest) {
	p.mu.Lock()
	defer p.mu.Unlock()
	k := unversioned(c.Ref)
	p.contested[k] = append(p.contested[k], c)
}

// admissionDigest is computed once per pass, when needed.
func (p *pass) admissionDigest(ctx context.Context, a AdmissionView) (string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.digest != "" {
		return p.digest, nil
	}
	d, err := a.Digest(ctx)
	if err != nil {
		return "", err
	}
	p.digest = d
	return d, nil
}

// liftContests keeps the saved contests that still hold and lifts the
// others: Git moved to another revision, or the admission configuration
// changed what it does to the field. A lifted field is written again, and
// the loop breaker counts from zero.
func (r *Reconciler) liftContests(ctx context.Context, p *pass, saved []Contest, objs []*desired) {
	if len(saved) == 0 {
		return
	}
	byRef := map[cluster.Ref]*desired{}
	for _, d := range objs {
		byRef[unversioned(d.ref)] = d
	}
	for _, c := range saved {
		why := ""
		switch {
		case c.Writer.Admission == "" && r.opts.Loop.IsHuman(c.Writer.Manager):
			// Saved before people's edits were reverted, or before
			// --human-field-manager named this manager.
			why = fmt.Sprintf("field manager %s is a person's: people's edits are reverted, never contested", c.Writer.Manager)
		case c.Revision != p.revision:
			why = fmt.Sprintf("Git moved from %s to %s", c.Revision, p.revision)
		case c.Admission != "" && r.admission != nil:
			d, err := p.admissionDigest(ctx, r.admission)
			if err != nil {
				// Keep the contest: not knowing is no reason to fight again.
				r.log.Warn("reading the admission configuration", "error", err)
				break
			}
			if d == c.Admission {
				break
			}
			if c.Effect != "" && r.sameEffect(ctx, c, byRef[unversioned(c.Ref)]) {
				// Changed elsewhere: the contest holds under the new digest.
				c.Admission = d
				break
			}
			why = "the admission configuration changed"
		}
		if why == "" {
			p.contested[unversioned(c.Ref)] = append(p.contested[unversioned(c.Ref)], c)
			continue
		}
		r.forget(c.Ref, c.Pointer)
		r.recorder.Event(c.Ref, "Normal", "ContestLifted", fmt.Sprintf("truce writes %s again: %s", c.Pointer, why))
	}
}

// sameEffect replays truce's write of d over the live object with the
// admission configuration as it is now and reports whether it does to the
// contested field what it did when the contest started. Not knowing (the
// object gone from Git or the cluster, a failed read) counts as changed.
func (r *Reconciler) sameEffect(ctx context.Context, c Contest, d *desired) bool {
	if d == nil {
		return false
	}
	live, err := r.get(ctx, d.ref)
	if err != nil || live == nil {
		return false
	}
	return r.replay(ctx, live, d.obj.DeepCopy()).effect(c.Pointer) == c.Effect
}
