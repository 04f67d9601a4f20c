package kyverno_test

import (
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/engine/kyverno"
	"github.com/truce-dev/truce/manifest"
)

// policyLibraryEnv names a checkout of github.com/kyverno/policies; the
// library is not copied here (hundreds of policies), so the test runs only
// when it is given: git clone https://github.com/kyverno/policies and
// check out libraryCommit.
const policyLibraryEnv = "TRUCE_KYVERNO_POLICIES"

// libraryCommit is the kyverno/policies commit libraryRefusals is for.
const libraryCommit = "b9c4317ce02256dc66118e08bb3e9345e7bfce5c"

// libraryRefusals are the library's policies Kyverno's webhooks refuse in
// a cluster with no CRDs but Kyverno's, by file (relative to the library)
// and the text of the refusal, with why that is right.
var libraryRefusals = map[string]struct{ has, why string }{
	"cost-optimization/schedule-based-quotas/schedule-based-quotas.yaml": {"cannot unmarshal string into Go struct field ContextEntry.spec.rules.context.variable",
		"the policy's context gives variable a string where Kyverno's API has an object; the API server refuses it before Kyverno (strict decoding)"},
	"istio/create-authorizationpolicy/create-authorizationpolicy.yaml": {"failed to get GVR for kind security.istio.io/v1beta1/AuthorizationPolicy",
		"it generates an Istio kind, and the cluster has no Istio CRDs (the library's own chainsaw test installs them first)"},
	"kasten/kasten-generate-example-backup-policy/kasten-generate-example-backup-policy.yaml": {"failed to get GVR for kind config.kio.kasten.io/v1alpha1/Policy",
		"it generates a Kasten kind, and the cluster has no Kasten CRDs"},
	"kasten/kasten-generate-policy-by-preset-label/kasten-generate-policy-by-preset-label.yaml": {"failed to get GVR for kind config.kio.kasten.io/v1alpha1/Policy",
		"as kasten-generate-example-backup-policy"},
	"other/expiration-for-policyexceptions/expiration-for-policyexceptions.yaml": {"target namespace must be set for a namespaced resource",
		"it generates a kyverno.io/v2beta1 ClusterCleanupPolicy; discovery's preferred version of that resource is v2, so Kyverno's list of cluster-scoped kinds (GeneratePattern.Validate) does not hold v2beta1 and takes it for namespaced (the library has no chainsaw test for this policy)"},
}

// TestPolicyLibrary asks Kyverno's webhooks about every policy and
// PolicyException of Kyverno's public policy library: written by the
// Kyverno project and tested by it, they must be accepted, except those
// libraryRefusals names.
func TestPolicyLibrary(t *testing.T) {
	dir := os.Getenv(policyLibraryEnv)
	if dir == "" {
		t.Skipf("$%s names no checkout of github.com/kyverno/policies", policyLibraryEnv)
	}
	var objs []*unstructured.Unstructured
	var files []string
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") && p != dir {
			return filepath.SkipDir // .git, the chainsaw and CLI tests
		}
		if d.IsDir() || filepath.Ext(p) != ".yaml" || d.Name() == "artifacthub-pkg.yml" {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		ms, err := manifest.Decode(p, f, manifest.DefaultOptions())
		if err != nil {
			return nil // not a manifest (kustomize, Helm values)
		}
		rel, _ := filepath.Rel(dir, p)
		for _, m := range ms {
			if m.Object == nil || !kyverno.IsKyvernoKind(m.Object.GroupVersionKind().GroupKind()) {
				continue
			}
			if ns := m.Object.GetNamespace(); ns == "" && !strings.HasPrefix(m.Object.GetKind(), "Cluster") &&
				(m.Object.GetKind() == "Policy" || strings.HasPrefix(m.Object.GetKind(), "Namespaced") || m.Object.GetKind() == "PolicyException") {
				m.Object.SetNamespace("default")
			}
			objs = append(objs, m.Object)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) < 500 {
		t.Fatalf("%d policies in %s, want the library's 600 and more", len(objs), dir)
	}
	eng := kyverno.New(kyverno.Options{HelperPath: helperPath})
	t.Cleanup(eng.Close)
	refused, err := eng.Refusals(testContext(t), nil, objs)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for i, msg := range refused {
		want, ok := libraryRefusals[files[i]]
		switch {
		case !ok:
			t.Errorf("%s %s/%s: refused (libraryRefusals is for kyverno/policies %s): %s", files[i], objs[i].GetKind(), objs[i].GetName(), libraryCommit, msg)
		case !strings.Contains(msg, want.has):
			t.Errorf("%s: refused with %q, want %q", files[i], msg, want.has)
		}
		seen[files[i]] = true
	}
	var missing []string
	for f := range libraryRefusals {
		if !seen[f] {
			missing = append(missing, f)
		}
	}
	sort.Strings(missing)
	for _, f := range missing {
		t.Errorf("%s: accepted, want refused (%s)", f, libraryRefusals[f].why)
	}
	t.Logf("%d policies and PolicyExceptions, %d refused (the refusals listed are for kyverno/policies %s)", len(objs), len(refused), libraryCommit)
}
