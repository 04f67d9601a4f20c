package kyverno_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/engine/kyverno"
	"github.com/truce-dev/truce/simulate"
)

const generateCluster = `
apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {env: prod}}
---
apiVersion: v1
kind: Secret
metadata:
  name: registry-creds
  namespace: shop
  labels: {app.kubernetes.io/instance: shop}
type: Opaque
data: {username: cm9ib3Q=}
`

// cloneRule clones shop/registry-creds into each Namespace named team-a.
func cloneRule(synchronize bool) string {
	s := "false"
	if synchronize {
		s = "true"
	}
	return `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: copy-creds}
spec:
  rules:
  - name: clone
    match:
      any:
      - resources: {kinds: [Namespace], names: [team-a]}
    generate:
      apiVersion: v1
      kind: Secret
      name: registry-creds
      namespace: "{{request.object.metadata.name}}"
      synchronize: ` + s + `
      clone: {namespace: shop, name: registry-creds}
`
}

const dataRule = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: default-deny}
spec:
  rules:
  - name: netpol
    match:
      any:
      - resources:
          kinds: [Namespace]
          selector: {matchLabels: {env: prod}}
    generate:
      apiVersion: networking.k8s.io/v1
      kind: NetworkPolicy
      name: default-deny
      namespace: "{{request.object.metadata.name}}"
      synchronize: true
      data:
        spec:
          podSelector: {}
          policyTypes: [Ingress]
`

const generatingPolicy = `
apiVersion: policies.kyverno.io/v1
kind: GeneratingPolicy
metadata: {name: copy-creds-cel}
spec:
  evaluation:
    synchronize: {enabled: true}
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [namespaces]
  matchConditions:
  - name: team-a
    expression: object.metadata.name == 'team-a'
  variables:
  - name: nsName
    expression: object.metadata.name
  - name: source
    expression: resource.get("v1", "secrets", "shop", "registry-creds")
  generate:
  - expression: generator.apply(variables.nsName, [variables.source])
`

const apiCallRule = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: from-service}
spec:
  rules:
  - name: lookup
    match:
      any:
      - resources: {kinds: [Namespace]}
    context:
    - name: owner
      apiCall:
        service: {url: "https://owners.example.com/lookup"}
    generate:
      apiVersion: v1
      kind: ConfigMap
      name: owner
      namespace: "{{request.object.metadata.name}}"
      data:
        data: {owner: "{{owner}}"}
`

func generateEnv(t *testing.T, policies ...string) (context.Context, *memory.Cluster, simulate.Background) {
	t.Helper()
	ctx := testContext(t)
	state, err := admission.NewState(objs(t, generateCluster)...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := memory.New(ctx, state, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	eng := kyverno.New(kyverno.Options{HelperPath: helperPath})
	t.Cleanup(eng.Close)
	bg, err := eng.Background(ctx, append(objs(t, policies...), objs(t, generateCluster)...))
	if err != nil {
		t.Fatal(err)
	}
	return ctx, c, bg
}

func ref(kind, group, version, ns, name string) cluster.Ref {
	return cluster.Ref{GroupVersionKind: k8sschema.GroupVersionKind{Group: group, Version: version, Kind: kind}, Namespace: ns, Name: name}
}

var copyRef = ref("Secret", "", "v1", "team-a", "registry-creds")

func get(t *testing.T, ctx context.Context, c cluster.Cluster, r cluster.Ref) *unstructured.Unstructured {
	t.Helper()
	o, err := c.Get(ctx, r)
	if err != nil {
		return nil
	}
	return o
}

// The writers derived from generate rules: what they watch and create,
// and the objects Kyverno's generate controller makes, with the labels it
// puts on them (label tracking sees the copied app.kubernetes.io/instance).
func TestGenerateWriters(t *testing.T) {
	tests := []struct {
		name     string
		policy   string
		watches  []cluster.Ref
		ignores  []cluster.Ref
		creates  string
		want     cluster.Ref
		labels   map[string]string
		describe string
	}{{
		name:   "clone with synchronize",
		policy: cloneRule(true),
		watches: []cluster.Ref{ref("Namespace", "", "v1", "", "anything"),
			ref("Secret", "", "v1", "shop", "registry-creds")},
		ignores: []cluster.Ref{ref("Secret", "", "v1", "shop", "other"), ref("ConfigMap", "", "v1", "shop", "registry-creds")},
		creates: "/v1, Kind=Secret",
		want:    copyRef,
		labels: map[string]string{
			"app.kubernetes.io/instance":           "shop",
			"app.kubernetes.io/managed-by":         "kyverno",
			"generate.kyverno.io/policy-name":      "copy-creds",
			"generate.kyverno.io/rule-name":        "clone",
			"generate.kyverno.io/source-namespace": "shop",
		},
		describe: "Kyverno generate rule clone of policy copy-creds clones Secret shop/registry-creds for each Namespace (with synchronize)",
	}, {
		name:     "data",
		policy:   dataRule,
		watches:  []cluster.Ref{ref("Namespace", "", "v1", "", "team-a")},
		ignores:  []cluster.Ref{ref("Secret", "", "v1", "shop", "registry-creds")},
		creates:  "networking.k8s.io/v1, Kind=NetworkPolicy",
		want:     ref("NetworkPolicy", "networking.k8s.io", "v1", "team-a", "default-deny"),
		labels:   map[string]string{"app.kubernetes.io/managed-by": "kyverno", "generate.kyverno.io/policy-name": "default-deny"},
		describe: "Kyverno generate rule netpol of policy default-deny generates NetworkPolicy default-deny for each Namespace (with synchronize)",
	}, {
		name:    "GeneratingPolicy",
		policy:  generatingPolicy,
		watches: []cluster.Ref{ref("Namespace", "", "v1", "", "team-a")},
		// Not the Secret it copies: Kyverno 1.19.1's GeneratingPolicy
		// controller watches what it generated (pkg/background/gpol's
		// WatchManager), never the objects its CEL read.
		ignores:  []cluster.Ref{ref("ConfigMap", "", "v1", "shop", "registry-creds"), ref("Secret", "", "v1", "shop", "registry-creds")},
		want:     copyRef,
		labels:   map[string]string{"app.kubernetes.io/instance": "shop", "app.kubernetes.io/managed-by": "kyverno"},
		describe: "Kyverno GeneratingPolicy copy-creds-cel generates what its CEL generator applies for each v1/Namespace (with synchronize)",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, c, bg := generateEnv(t, tt.policy)
			if u := bg.Unpredictable(); len(u) != 0 {
				t.Fatalf("unpredictable: %v", u)
			}
			ws := bg.Writers()
			if len(ws) != 1 {
				t.Fatalf("%d writers, want 1", len(ws))
			}
			w := ws[0]
			if w.Describe() != tt.describe {
				t.Errorf("describe %q\nwant     %q", w.Describe(), tt.describe)
			}
			if w.Name() != kyverno.BackgroundManager {
				t.Errorf("manager %q", w.Name())
			}
			for _, r := range tt.watches {
				if !w.Watches(r) {
					t.Errorf("does not watch %s", r)
				}
			}
			for _, r := range tt.ignores {
				if w.Watches(r) {
					t.Errorf("watches %s", r)
				}
			}
			cr, ok := w.(interface {
				Creates() []k8sschema.GroupVersionKind
			})
			if !ok {
				t.Fatal("the writer creates nothing")
			}
			if tt.creates != "" && (len(cr.Creates()) != 1 || cr.Creates()[0].String() != tt.creates) {
				t.Errorf("creates %v, want %s", cr.Creates(), tt.creates)
			}
			if err := w.Act(ctx, c); err != nil {
				t.Fatal(err)
			}
			got := get(t, ctx, c, tt.want)
			if got == nil {
				t.Fatalf("%s was not generated", tt.want)
			}
			for k, v := range tt.labels {
				if got.GetLabels()[k] != v {
					t.Errorf("label %s=%q, want %q (labels %v)", k, got.GetLabels()[k], v, got.GetLabels())
				}
			}
			if !w.Watches(tt.want) {
				t.Errorf("does not watch what it generated")
			}
			if c := cr.Creates(); len(c) != 1 || c[0] != tt.want.GroupVersionKind {
				t.Errorf("creates %v after generating %s", c, tt.want)
			}
			for _, m := range got.GetManagedFields() {
				if m.Manager != kyverno.BackgroundManager {
					t.Errorf("written by %q", m.Manager)
				}
			}
		})
	}
}

// When Kyverno's background controller acts again: with synchronize it
// recreates a deleted copy and carries a source's change into it; without,
// a deleted copy stays deleted until the trigger is written again.
func TestGenerateSynchronize(t *testing.T) {
	tests := []struct {
		name        string
		synchronize bool
		// after deleting the copy and acting again (the trigger not written)
		recreated bool
		// after changing the source and acting again
		followsSource bool
	}{
		{name: "with synchronize", synchronize: true, recreated: true, followsSource: true},
		{name: "without synchronize", synchronize: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, c, bg := generateEnv(t, cloneRule(tt.synchronize))
			w := bg.Writers()[0]
			if err := w.Act(ctx, c); err != nil {
				t.Fatal(err)
			}
			if get(t, ctx, c, copyRef) == nil {
				t.Fatal("no copy after the trigger's admission")
			}
			if err := c.Delete(ctx, copyRef, cluster.DeleteOptions{}); err != nil {
				t.Fatal(err)
			}
			if err := w.Act(ctx, c); err != nil {
				t.Fatal(err)
			}
			if got := get(t, ctx, c, copyRef) != nil; got != tt.recreated {
				t.Fatalf("copy recreated: %v, want %v", got, tt.recreated)
			}
			if !tt.recreated {
				// Writing the trigger is an UPDATE admission: Kyverno
				// generates the missing copy, synchronize or not.
				ns := get(t, ctx, c, ref("Namespace", "", "v1", "", "team-a"))
				ns.SetAnnotations(map[string]string{"touched": "yes"})
				if _, err := c.Update(ctx, ns, cluster.WriteOptions{FieldManager: "test"}); err != nil {
					t.Fatal(err)
				}
				if err := w.Act(ctx, c); err != nil {
					t.Fatal(err)
				}
				if get(t, ctx, c, copyRef) == nil {
					t.Fatal("no copy after the trigger was written")
				}
			}
			src := get(t, ctx, c, ref("Secret", "", "v1", "shop", "registry-creds"))
			if _, ok := src.GetLabels()["generate.kyverno.io/clone-source"]; !ok {
				t.Errorf("Kyverno did not label its clone source: %v", src.GetLabels())
			}
			if err := unstructured.SetNestedField(src.Object, "bmV3", "data", "username"); err != nil {
				t.Fatal(err)
			}
			if _, err := c.Update(ctx, src, cluster.WriteOptions{FieldManager: "test"}); err != nil {
				t.Fatal(err)
			}
			if err := w.Act(ctx, c); err != nil {
				t.Fatal(err)
			}
			user, _, _ := unstructured.NestedString(get(t, ctx, c, copyRef).Object, "data", "username")
			if got := user == "bmV3"; got != tt.followsSource {
				t.Errorf("copy follows the source: %v (username %q), want %v", got, user, tt.followsSource)
			}
		})
	}
}

// A rule that reads external data gets no writer: it is named as
// Unpredictable instead of guessed.
func TestGenerateUnpredictable(t *testing.T) {
	_, _, bg := generateEnv(t, apiCallRule, cloneRule(true))
	if n := len(bg.Writers()); n != 1 {
		t.Errorf("%d writers, want 1 (the clone rule)", n)
	}
	u := bg.Unpredictable()
	if len(u) != 1 || !strings.Contains(u[0], "lookup of policy from-service") || !strings.Contains(u[0], "https://owners.example.com/lookup") {
		t.Errorf("unpredictable %q, want the rule and the service named", u)
	}
}

// Policies without generate rules never start the helper.
func TestBackgroundWithoutGenerate(t *testing.T) {
	eng := kyverno.New(kyverno.Options{HelperPath: "/nonexistent/truce-kyverno"})
	bg, err := eng.Background(testContext(t), objs(t, addLabel, requireApp))
	if err != nil {
		t.Fatal(err)
	}
	if len(bg.Writers()) != 0 || len(bg.Unpredictable()) != 0 {
		t.Error("writers from policies without generate rules")
	}
}

// Kyverno's resource filters keep kube-system's objects from its webhooks:
// a rule for every Namespace generates nothing there.
func TestGenerateResourceFilters(t *testing.T) {
	policy := strings.Replace(cloneRule(false), "{kinds: [Namespace], names: [team-a]}", "{kinds: [Namespace]}", 1)
	ctx, c, bg := generateEnv(t, policy)
	w := bg.Writers()[0]
	if err := w.Act(ctx, c); err != nil {
		t.Fatal(err)
	}
	if get(t, ctx, c, copyRef) == nil {
		t.Error("no copy in team-a")
	}
	if get(t, ctx, c, ref("Namespace", "", "v1", "", "kube-system")) == nil {
		t.Fatal("the cluster has no kube-system")
	}
	if got := get(t, ctx, c, ref("Secret", "", "v1", "kube-system", "registry-creds")); got != nil {
		t.Error("a copy in kube-system, which Kyverno's resource filters exclude")
	}
}
