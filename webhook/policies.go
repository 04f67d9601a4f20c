package webhook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
)

// policySet is one compiled generation of the served policies.
type policySet struct {
	chain *admission.Chain
	// digest identifies the files it was compiled from.
	digest   string
	mutating []string
	// validating names the ValidatingAdmissionPolicies.
	validating []string
	loaded     time.Time

	// mu is held for reading by every evaluation; retire takes it for
	// writing, so a set is closed only when no evaluation uses it.
	mu     sync.RWMutex
	closed bool
	// namespaces records, per namespace made known to the chain, where
	// its labels came from: "cluster", "assumed" or "live@RV";
	// namespaceMu serialises the writes.
	namespaces  sync.Map
	namespaceMu sync.Mutex
}

// retire closes the set once the evaluations using it have finished.
func (p *policySet) retire() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	p.chain.Close()
}

// loadPolicies reads the policy and cluster paths, compiles them into an
// admission chain that runs only the policy plugins, and refuses a set
// that cannot be served: no policies, an object the API server would
// reject (a CEL expression that does not compile, a binding without
// policyName), or a mutation that is not idempotent.
func loadPolicies(ctx context.Context, policyPaths, clusterPaths []string, digest string) (*policySet, error) {
	lopts := manifest.DefaultOptions()
	policyObjs, err := manifest.LoadPaths(ctx, policyPaths, lopts)
	if err != nil {
		return nil, err
	}
	clusterObjs, err := manifest.LoadPaths(ctx, clusterPaths, lopts)
	if err != nil {
		return nil, err
	}
	all := append(append([]manifest.Object{}, clusterObjs...), policyObjs...)
	set := &policySet{digest: digest, loaded: time.Now()}
	objs := make([]*unstructured.Unstructured, 0, len(all))
	for _, o := range all {
		switch o.Object.GetKind() {
		case "MutatingAdmissionPolicy":
			set.mutating = append(set.mutating, o.Object.GetName())
		case "ValidatingAdmissionPolicy":
			set.validating = append(set.validating, o.Object.GetName())
		}
		objs = append(objs, o.Object)
	}
	if len(set.mutating)+len(set.validating) == 0 {
		return nil, fmt.Errorf("no MutatingAdmissionPolicy or ValidatingAdmissionPolicy in %s", strings.Join(policyPaths, ", "))
	}
	sort.Strings(set.mutating)
	sort.Strings(set.validating)
	state, err := admission.NewState(objs...)
	if err != nil {
		return nil, admission.WithSource(err, all)
	}
	if set.chain, err = admission.NewChain(ctx, state, admission.WebhookOptions()); err != nil {
		return nil, admission.WithSource(err, all)
	}
	if len(set.mutating) > 0 {
		if err := checkIdempotent(ctx, set.chain, clusterObjs); err != nil {
			set.chain.Close()
			return nil, err
		}
	}
	return set, nil
}

// digestPaths hashes the names, modes and contents of the regular files
// under paths, following symlinks the way a ConfigMap volume uses them
// (its files are links into a directory swapped atomically on update).
func digestPaths(paths []string) (string, error) {
	h := sha256.New()
	for _, root := range paths {
		err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			name := d.Name()
			if d.IsDir() {
				// ConfigMap volumes keep their data in ..data and
				// ..TIMESTAMP directories; the top-level links are enough.
				if p != root && strings.HasPrefix(name, "..") {
					return filepath.SkipDir
				}
				return nil
			}
			info, err := os.Stat(p)
			if err != nil {
				if errors.Is(err, fs.ErrNotExist) {
					return nil // a dangling link during a swap
				}
				return err
			}
			if !info.Mode().IsRegular() {
				return nil
			}
			data, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			fmt.Fprintf(h, "%s\x00%d\x00", p, len(data))
			h.Write(data)
			return nil
		})
		if err != nil {
			return "", fmt.Errorf("reading %s: %w", root, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
