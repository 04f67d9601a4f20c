package loadgen

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
)

// loadPolicies writes the policies with Policies and loads them back the
// way truce loads a directory, after the corpus's cluster.
func loadPolicies(t *testing.T, prefixes ...string) []*unstructured.Unstructured {
	t.Helper()
	dir := t.TempDir()
	if err := Policies(dir); err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.LoadPaths(context.Background(), []string{dir}, manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	out, err := clusterObjects()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		if hasAnyPrefix(filepath.Base(o.Source.File), prefixes) {
			out = append(out, o.Object)
		}
	}
	return out
}

func TestPolicies(t *testing.T) {
	dir := t.TempDir()
	if err := Policies(dir); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 20 {
		t.Errorf("%d files, want 20", len(entries))
	}
	kinds := map[string]int{}
	for _, o := range loadPolicies(t, "mutating-", "validating-") {
		kinds[o.GetKind()]++
		if o.GetAPIVersion() != "admissionregistration.k8s.io/v1" && o.GetAPIVersion() != "v1" {
			t.Errorf("%s %s: apiVersion %s", o.GetKind(), o.GetName(), o.GetAPIVersion())
		}
	}
	for kind, want := range map[string]int{
		"MutatingAdmissionPolicy": 10, "MutatingAdmissionPolicyBinding": 10,
		"ValidatingAdmissionPolicy": 10, "ValidatingAdmissionPolicyBinding": 10,
		"Namespace": 1, "ServiceAccount": 1,
	} {
		if kinds[kind] != want {
			t.Errorf("%d %s, want %d", kinds[kind], kind, want)
		}
	}
}

func TestRequestsShape(t *testing.T) {
	reqs, err := Requests(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(reqs) != 20 {
		t.Fatalf("%d requests, want 20", len(reqs))
	}
	var mutate, denials int
	seen := map[string]bool{}
	for _, r := range reqs {
		if bytes.Count(r.Body, []byte(UIDPlaceholder)) != 1 {
			t.Errorf("%s: the uid placeholder is not there exactly once", r.Name)
		}
		var review admissionv1.AdmissionReview
		if err := json.Unmarshal(r.Body, &review); err != nil {
			t.Fatalf("%s: %v", r.Name, err)
		}
		req := review.Request
		if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" || req == nil {
			t.Fatalf("%s: not an admission.k8s.io/v1 AdmissionReview request", r.Name)
		}
		if req.UID != UIDPlaceholder || req.DryRun == nil || *req.DryRun || req.RequestKind == nil || req.RequestResource == nil ||
			req.UserInfo.Username == "" || len(req.Options.Raw) == 0 {
			t.Errorf("%s: incomplete request: %+v", r.Name, req)
		}
		obj := &unstructured.Unstructured{}
		if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
			t.Fatalf("%s: object: %v", r.Name, err)
		}
		seen[req.Namespace] = true
		seen[req.Kind.Kind+" "+string(req.Operation)] = true
		if req.Operation == admissionv1.Update && len(req.OldObject.Raw) == 0 {
			t.Errorf("%s: UPDATE without oldObject", r.Name)
		}
		switch r.Path {
		case MutatePath:
			mutate++
			if !r.Mutating || r.ExpectAllowed == nil || !*r.ExpectAllowed {
				t.Errorf("%s: a mutating request must expect allowed", r.Name)
			}
			// Mutating webhooks run before the registry fills these in.
			if created := obj.GetCreationTimestamp(); req.Operation == admissionv1.Create && (obj.GetUID() != "" || !created.IsZero()) {
				t.Errorf("%s: a CREATE to a mutating webhook has uid %q and creationTimestamp %v", r.Name, obj.GetUID(), created)
			}
			if req.Operation == admissionv1.Create && obj.GetGenerateName() != "" && (obj.GetName() != "" || req.Name != "") {
				t.Errorf("%s: a generated name before the registry generates it", r.Name)
			}
		case ValidatePath:
			if r.Mutating || r.ExpectAllowed == nil {
				t.Errorf("%s: a validating request must say what it expects", r.Name)
			} else if !*r.ExpectAllowed {
				denials++
			}
			if obj.GetUID() == "" || obj.GetName() == "" {
				t.Errorf("%s: a validating webhook sees the object as stored, with uid and name", r.Name)
			}
		default:
			t.Errorf("%s: path %q", r.Name, r.Path)
		}
	}
	if mutate != 10 || denials != 3 {
		t.Errorf("%d to /mutate (want 10), %d expected denials (want 3)", mutate, denials)
	}
	for _, want := range []string{"default", "team-a", "Pod CREATE", "Pod UPDATE", "Deployment CREATE", "Deployment UPDATE"} {
		if !seen[want] {
			t.Errorf("no request has %s", want)
		}
	}
}

// TestCorpusVerdicts holds the corpus's expectations to kube-apiserver's
// admission chain (truce's, which the e2e suites hold to the real one)
// with the 20 policies as Policies writes them: the writes expected to be
// denied are denied by the policy named, the others are allowed.
func TestCorpusVerdicts(t *testing.T) {
	ctx := context.Background()
	scenarios, err := buildCorpus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	policies := loadPolicies(t, "mutating-", "validating-")
	for _, s := range scenarios {
		t.Run(s.validate.Name, func(t *testing.T) {
			chain := verdictChain(t, policies)
			if s.old != nil {
				if err := chain.State().Put(s.old.DeepCopy()); err != nil {
					t.Fatal(err)
				}
			}
			res := admit(t, chain, s.client, s.writer)
			if want := len(s.deniedBy) == 0; res.Allowed != want {
				t.Fatalf("allowed %t, want %t: %s", res.Allowed, want, res.Message)
			}
			if len(s.deniedBy) > 0 && !slices.ContainsFunc(s.deniedBy, func(p string) bool {
				return strings.Contains(res.Message, "ValidatingAdmissionPolicy '"+p+"'")
			}) {
				t.Errorf("denied, but not by %s: %s", strings.Join(s.deniedBy, " or "), res.Message)
			}
		})
	}
}

// TestMutationsIdempotent runs every write's stored object through the
// mutating policies again: they must change nothing more, or they would
// fight each other under reinvocation and patch objects on every UPDATE.
func TestMutationsIdempotent(t *testing.T) {
	ctx := context.Background()
	scenarios, err := buildCorpus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	policies := loadPolicies(t, "mutating-")
	for _, s := range scenarios {
		t.Run(s.validate.Name, func(t *testing.T) {
			chain := verdictChain(t, policies)
			if s.old != nil {
				if err := chain.State().Put(s.old.DeepCopy()); err != nil {
					t.Fatal(err)
				}
			}
			first := admit(t, chain, s.client, s.writer)
			if !first.Allowed {
				t.Fatalf("the mutating policies deny: %s", first.Message)
			}
			again := &unstructured.Unstructured{Object: first.Object}
			if s.old == nil {
				// A second CREATE of what was stored.
				for _, f := range []string{"uid", "creationTimestamp", "generation", "resourceVersion"} {
					unstructured.RemoveNestedField(again.Object, "metadata", f)
				}
				delete(again.Object, "status")
			}
			second := admit(t, chain, again, s.writer)
			if !second.Allowed {
				t.Fatalf("the second run denies: %s", second.Message)
			}
			for _, c := range second.Changes {
				if strings.HasPrefix(c.By, "MutatingAdmissionPolicy") {
					t.Errorf("the second run changes %s (%s)", c.Path, c.By)
				}
			}
		})
	}
}

func verdictChain(t *testing.T, objs []*unstructured.Unstructured) *admission.Chain {
	t.Helper()
	copies := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		copies[i] = o.DeepCopy()
	}
	chain, err := newChain(context.Background(), copies)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	return chain
}

func admit(t *testing.T, chain *admission.Chain, obj *unstructured.Unstructured, w writer) *admission.Result {
	t.Helper()
	res, err := chain.Admit(context.Background(), admission.Request{
		Object:       obj.DeepCopy(),
		User:         w.user.Username,
		Groups:       append(append([]string{}, w.user.Groups...), "system:masters"),
		FieldManager: w.manager,
		Persist:      true,
	})
	if err != nil {
		t.Fatal(err)
	}
	return res
}
