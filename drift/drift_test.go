package drift

import (
	"context"
	"testing"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
)

func object(t testing.TB, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func newMemory(t testing.TB, objs ...*unstructured.Unstructured) *memory.Cluster {
	t.Helper()
	state, err := admission.NewState(objs...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := memory.New(context.Background(), state, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

const web = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`

// mirror rewrites every image to the internal registry: the image-mirror loop.
var mirror = []string{`
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: mirror}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        object.spec.template.spec.containers.filter(c, !c.image.startsWith("registry.internal/")).map(c,
          JSONPatch{op: "replace", path: "/spec/template/spec/containers/" + string(object.spec.template.spec.containers.indexOf(c)) + "/image",
          value: "registry.internal/" + c.image})
`, `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: mirror}
spec:
  policyName: mirror
`}

func pointers(fields []Field, ignored bool) []string {
	var out []string
	for _, f := range fields {
		if (f.IgnoredBy != "") == ignored {
			out = append(out, f.Pointer)
		}
	}
	return out
}

func TestFlux(t *testing.T) {
	ctx := context.Background()
	type step struct {
		manager string
		mutate  func(u *unstructured.Unstructured)
	}
	setReplicas := func(n int64) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) { _ = unstructured.SetNestedField(u.Object, n, "spec", "replicas") }
	}
	replicasRule := FluxRule{Name: "spec.ignore[0]", IgnoreRule: jsondiff.IgnoreRule{
		Paths: []string{"/spec/replicas"}, Selector: &jsondiff.Selector{Kind: "Deployment"}}}
	otherKind := FluxRule{Name: "spec.ignore[1]", IgnoreRule: jsondiff.IgnoreRule{
		Paths: []string{"/spec/replicas"}, Selector: &jsondiff.Selector{Kind: "Deploy"}}}
	for _, tc := range []struct {
		name      string
		policies  []string
		applied   bool
		after     []step
		rules     []FluxRule
		want      Status
		drifted   []string
		ignored   []string
		originSub string
	}{
		{name: "not applied yet", want: Missing},
		{name: "applied, untouched", applied: true, want: InSync},
		{name: "hpa took replicas", applied: true, after: []step{{"hpa", setReplicas(5)}},
			want: Drifted, drifted: []string{"/spec/replicas"}, originSub: "manager hpa (Update)"},
		{name: "hpa took replicas, ignored", applied: true, after: []step{{"hpa", setReplicas(5)}},
			rules: []FluxRule{replicasRule}, want: InSync, ignored: []string{"/spec/replicas"}},
		{name: "kind regex is anchored", applied: true, after: []step{{"hpa", setReplicas(5)}},
			rules: []FluxRule{otherKind}, want: Drifted, drifted: []string{"/spec/replicas"}},
		// Apply leaves fields other managers own alone, so the dry run
		// keeps the label too.
		{name: "label added by someone else", applied: true, after: []step{{"kubectl-label", func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"app": "web", "team": "a"})
		}}}, want: InSync},
		{name: "label Flux owns changed by someone else", applied: true, after: []step{{"kubectl-label", func(u *unstructured.Unstructured) {
			u.SetLabels(map[string]string{"app": "api"})
		}}}, want: Drifted, drifted: []string{"/metadata/labels/app"}, originSub: "manager kubectl-label (Update)"},
		// Flux's dry run includes admission: the mutation is in the
		// desired side too, so nothing drifts.
		{name: "admission mutation", policies: mirror, applied: true, want: InSync},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var objs []*unstructured.Unstructured
			for _, p := range tc.policies {
				objs = append(objs, object(t, p))
			}
			c := newMemory(t, objs...)
			if tc.applied {
				if _, err := c.Apply(ctx, object(t, web), cluster.ApplyOptions{FieldManager: FluxFieldManager, Force: true}); err != nil {
					t.Fatal(err)
				}
			}
			for _, s := range tc.after {
				live, err := c.Get(ctx, cluster.RefOf(object(t, web)))
				if err != nil {
					t.Fatal(err)
				}
				s.mutate(live)
				if _, err := c.Update(ctx, live, cluster.WriteOptions{FieldManager: s.manager}); err != nil {
					t.Fatal(err)
				}
			}
			calls := c.Calls()
			got, err := (&Flux{Cluster: c, Rules: tc.rules}).Diff(ctx, object(t, web))
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.want {
				t.Fatalf("status = %s, want %s (fields %+v)", got.Status, tc.want, got.Fields)
			}
			if g := pointers(got.Fields, false); !equal(g, tc.drifted) {
				t.Errorf("drifted fields = %v, want %v", g, tc.drifted)
			}
			if g := pointers(got.Fields, true); !equal(g, tc.ignored) {
				t.Errorf("ignored fields = %v, want %v", g, tc.ignored)
			}
			if tc.originSub != "" && (len(got.Fields) == 0 || got.Fields[0].Origin != tc.originSub) {
				t.Errorf("origin = %+v, want %q", got.Fields, tc.originSub)
			}
			live, err := c.Get(ctx, cluster.RefOf(object(t, web)))
			if tc.applied && (err != nil || live.GetResourceVersion() == "") {
				t.Fatalf("live object after diff: %v", err)
			}
			if c.Calls() == calls {
				t.Errorf("the flux strategy made no request")
			}
		})
	}
}

func TestPredicted(t *testing.T) {
	ctx := context.Background()
	c := newMemory(t, object(t, mirror[0]), object(t, mirror[1]))
	calls := c.Calls()
	got, err := (&Predicted{Admitter: c}).Diff(ctx, object(t, web))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != Drifted {
		t.Fatalf("status = %s, want Drifted", got.Status)
	}
	want := []string{"/spec/template/spec/containers/0/image"}
	if g := pointers(got.Fields, false); !equal(g, want) {
		t.Fatalf("fields = %v, want %v", g, want)
	}
	f := got.Fields[0]
	if f.Desired != "nginx:1.27" || f.Live != "registry.internal/nginx:1.27" {
		t.Errorf("values = %v -> %v", f.Desired, f.Live)
	}
	if f.Origin != "MutatingAdmissionPolicy/mirror (binding mirror)" {
		t.Errorf("origin = %q", f.Origin)
	}
	if c.Calls() != calls {
		t.Errorf("predicted made %d requests, want none", c.Calls()-calls)
	}

	// Defaults the server adds are not drift; neither are labels Git does
	// not set.
	plain := newMemory(t)
	got, err = (&Predicted{Admitter: plain}).Diff(ctx, object(t, web))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != InSync {
		t.Fatalf("without policies: status = %s, fields %+v", got.Status, got.Fields)
	}
}

func TestSecretsAreMasked(t *testing.T) {
	ctx := context.Background()
	c := newMemory(t)
	secret := `{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: default}, stringData: {password: hunter2}}`
	if _, err := c.Apply(ctx, object(t, secret), cluster.ApplyOptions{FieldManager: FluxFieldManager}); err != nil {
		t.Fatal(err)
	}
	changed := `{apiVersion: v1, kind: Secret, metadata: {name: s, namespace: default}, stringData: {password: swordfish}}`
	got, err := (&Flux{Cluster: c}).Diff(ctx, object(t, changed))
	if err != nil {
		t.Fatal(err)
	}
	if got.Status != Drifted {
		t.Fatalf("status = %s", got.Status)
	}
	for _, f := range got.Fields {
		for _, v := range []any{f.Desired, f.Live} {
			if s, ok := v.(string); ok && (s == "hunter2" || s == "swordfish" || s == "aHVudGVyMg==" || s == "c3dvcmRmaXNo") {
				t.Errorf("secret value shown: %+v", f)
			}
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
