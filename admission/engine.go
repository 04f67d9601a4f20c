package admission

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
)

// PolicyEngine is a policy engine truce runs itself (Kyverno, Gatekeeper),
// configured by objects of the cluster as the real engine is by its
// informers. The chain installs it when it is built: the engine's own
// objects (its CRDs, the webhook configurations it generates for the
// policies it read) join the cluster, and its webhooks are served in
// process, so kube-apiserver's webhook plugin calls the engine exactly where
// the real one sits. Engines are siblings of this package, behind this one
// seam.
type PolicyEngine interface {
	// Name names the engine in errors ("Kyverno").
	Name() string
	// Configures reports whether objects of gk configure the engine:
	// writing or deleting one rebuilds the chain, as a built-in policy
	// does.
	Configures(gk k8sschema.GroupKind) bool
	// Install returns what the engine, configured by the cluster's
	// objects, adds to the cluster and serves.
	Install(ctx context.Context, objs []*unstructured.Unstructured) (*Installation, error)
}

// Noter is a PolicyEngine with notes for the user beyond any one request:
// a policy its installation left out or could only partly place, and why
// the engine did not do what a policy asked. Notes accumulate over every
// chain the engine was installed into, each kept once.
type Noter interface {
	Notes() []string
}

// Refuser is a PolicyEngine whose own webhook refuses some of its
// configuration (Kyverno's validate-policy.kyverno.svc, failing closed):
// such an object never reaches the cluster, so it must not be taken as
// installed before a sync, where the sync would be refused it.
type Refuser interface {
	// Refusals returns, by index into objs, why the engine's webhook
	// refuses to create each object of objs it refuses in a cluster
	// holding cluster.
	Refusals(ctx context.Context, cluster, objs []*unstructured.Unstructured) (map[int]string, error)
}

// Installation is what an engine adds to a cluster.
type Installation struct {
	// Objects are created by the engine, as the real engine creates them:
	// its CRDs (so its policies are known even when the repository does
	// not carry them) and webhook configurations. They are stored as
	// system objects: trusted, not validated, never reported as the
	// repository's.
	Objects []*unstructured.Unstructured
	// Webhooks serve the configurations' services in process.
	Webhooks InProcessWebhooks
	// Watches are kinds of objects the installed engine reads from the
	// cluster besides its configuration (Gatekeeper's synced data): a
	// write or delete of one rebuilds the chain, as one of its
	// configuration does, so the engine reads them as they are.
	Watches []k8sschema.GroupKind
}

// installEngines installs every engine into state and returns the webhooks
// they serve, with hooks (the chain's own in-process webhooks) among them,
// and the kinds the engines watch.
func installEngines(ctx context.Context, engines []PolicyEngine, state *State, hooks InProcessWebhooks) (InProcessWebhooks, map[k8sschema.GroupKind]bool, error) {
	if len(engines) == 0 {
		return hooks, nil, nil
	}
	watches := map[k8sschema.GroupKind]bool{}
	all := InProcessWebhooks{}
	for k, v := range hooks {
		all[k] = v
	}
	objs := state.Objects()
	for _, e := range engines {
		inst, err := e.Install(ctx, objs)
		if err != nil {
			return nil, nil, fmt.Errorf("installing %s: %w", e.Name(), err)
		}
		if inst == nil {
			continue
		}
		for _, o := range inst.Objects {
			if err := state.putSystem(o); err != nil {
				return nil, nil, fmt.Errorf("installing %s: %s %s: %w", e.Name(), o.GetKind(), o.GetName(), err)
			}
		}
		for svc, h := range inst.Webhooks {
			if _, dup := all[svc]; dup {
				return nil, nil, fmt.Errorf("installing %s: service %s is already served in process", e.Name(), svc)
			}
			all[svc] = h
		}
		for _, gk := range inst.Watches {
			watches[gk] = true
		}
	}
	return all, watches, nil
}

// configuresEngine reports whether objects of gk configure one of the
// chain's engines, or are read by one as installed.
func (c *Chain) configuresEngine(gk k8sschema.GroupKind) bool {
	if c.engineWatches[gk] {
		return true
	}
	for _, e := range c.opts.Engines {
		if e.Configures(gk) {
			return true
		}
	}
	return false
}

// UnpredictableAnnotation is the audit annotation key an engine's webhook
// answers with when it could not decide part of a request offline (a
// policy its library cannot evaluate here); the value says what. The
// upstream plugin records it as "WEBHOOK/KEY"; the chain moves it into
// Result.Unpredictable, since no real engine sends it.
const UnpredictableAnnotation = "truce.dev-unpredictable"

// engineUnpredictable takes the engines' unpredictable annotations out of
// annotations and returns them as "webhook NAME: WHAT".
func engineUnpredictable(annotations map[string]string) []string {
	var out []string
	for k, v := range annotations {
		webhook, key, ok := strings.Cut(k, "/")
		if ok && key == UnpredictableAnnotation {
			out = append(out, fmt.Sprintf("webhook %s: %s", webhook, v))
			delete(annotations, k)
		}
	}
	sort.Strings(out)
	return out
}
