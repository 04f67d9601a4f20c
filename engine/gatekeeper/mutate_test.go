package gatekeeper_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/gatekeeper"
)

func objects(t testing.TB, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("decoding %q: %v", doc, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

var testEngine = func() *gatekeeper.Engine {
	e, err := gatekeeper.New()
	if err != nil {
		panic(err)
	}
	return e
}()

func newChain(t testing.TB, cluster string) *admission.Chain {
	t.Helper()
	state, err := admission.NewState(objects(t, cluster)...)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := admission.NewChain(context.Background(), state, admission.Options{Engines: []admission.PolicyEngine{testEngine}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	return chain
}

const namespaces = `
apiVersion: v1
kind: Namespace
metadata: {name: apps, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: ignored, labels: {admission.gatekeeper.sh/ignore: "yes"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: excluded}
---
apiVersion: v1
kind: Namespace
metadata: {name: gatekeeper-system}
`

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: %s}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      securityContext: {supplementalGroups: [1]}
      containers:
      - name: web
        image: nginx:1.27
        args: ["--a"]
`

func TestMutation(t *testing.T) {
	assignReplicas := `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: replicas}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  match: {scope: Namespaced, kinds: [{apiGroups: ["*"], kinds: ["*"]}]}
  location: spec.replicas
  parameters: {assign: {value: 3}}
`
	tests := []struct {
		name      string
		policies  string
		namespace string
		// want are fields of the stored object (JSON pointers); nil
		// means absent.
		want map[string]any
	}{{
		name:      "Assign sets a field",
		policies:  assignReplicas,
		namespace: "apps",
		want:      map[string]any{"/spec/replicas": int64(3)},
	}, {
		name:      "a namespace labelled admission.gatekeeper.sh/ignore is not mutated",
		policies:  assignReplicas,
		namespace: "ignored",
		want:      map[string]any{"/spec/replicas": int64(1)}, // the API default
	}, {
		name:      "gatekeeper-system is not mutated",
		policies:  assignReplicas,
		namespace: "gatekeeper-system",
		want:      map[string]any{"/spec/replicas": int64(1)},
	}, {
		name: "Config excludes a namespace from mutation",
		policies: assignReplicas + `
---
apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata: {name: config, namespace: gatekeeper-system}
spec:
  match:
  - processes: [mutation-webhook]
    excludedNamespaces: ["exclu*"]
`,
		namespace: "excluded",
		want:      map[string]any{"/spec/replicas": int64(1)},
	}, {
		name: "Config excluding only audit does not stop mutation",
		policies: assignReplicas + `
---
apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata: {name: config, namespace: gatekeeper-system}
spec:
  match:
  - processes: [audit]
    excludedNamespaces: [excluded]
`,
		namespace: "excluded",
		want:      map[string]any{"/spec/replicas": int64(3)},
	}, {
		name: "AssignMetadata adds a label; a namespaceSelector matches",
		policies: `
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: owner}
spec:
  match:
    scope: Namespaced
    namespaceSelector: {matchLabels: {team: a}}
  location: metadata.labels.owner
  parameters: {assign: {value: team-a}}
`,
		namespace: "apps",
		want:      map[string]any{"/metadata/labels/owner": "team-a"},
	}, {
		name: "a namespaceSelector that does not match",
		policies: `
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: owner}
spec:
  match:
    namespaceSelector: {matchLabels: {team: b}}
  location: metadata.labels.owner
  parameters: {assign: {value: team-b}}
`,
		namespace: "apps",
		want:      map[string]any{"/metadata/labels/owner": nil},
	}, {
		name: "ModifySet merges into a list",
		policies: `
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: args}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: "spec.template.spec.containers[name: *].args"
  parameters:
    operation: merge
    values: {fromList: ["--b"]}
`,
		namespace: "apps",
		want:      map[string]any{"/spec/template/spec/containers/0/args": []any{"--a", "--b"}},
	}, {
		// The API server stores a ModifySet with its CRD's default
		// operation, merge, and Gatekeeper's controller reads that.
		name: "ModifySet without operation merges",
		policies: `
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: args}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: "spec.template.spec.containers[name: *].args"
  parameters:
    values: {fromList: ["--b"]}
`,
		namespace: "apps",
		want:      map[string]any{"/spec/template/spec/containers/0/args": []any{"--a", "--b"}},
	}, {
		// Numbers of a mutator read from YAML are compared with the
		// object's as Kubernetes decodes both: 1 is already there.
		name: "ModifySet merges a number the list holds once",
		policies: `
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: groups}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: spec.template.spec.securityContext.supplementalGroups
  parameters:
    operation: merge
    values: {fromList: [1, 1000]}
`,
		namespace: "apps",
		want:      map[string]any{"/spec/template/spec/securityContext/supplementalGroups": []any{int64(1), int64(1000)}},
	}, {
		name: "AssignImage changes the domain",
		policies: `
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: mirror}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: "spec.template.spec.containers[name: *].image"
  parameters: {assignDomain: mirror.example.com}
`,
		namespace: "apps",
		want:      map[string]any{"/spec/template/spec/containers/0/image": "mirror.example.com/nginx:1.27"},
	}, {
		name: "mutators apply in (group, kind, namespace, name) order, not the order they were read",
		policies: `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: b-second}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: spec.minReadySeconds
  parameters: {assign: {value: 2}}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: a-first}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: spec.minReadySeconds
  parameters: {assign: {value: 1}}
`,
		namespace: "apps",
		want:      map[string]any{"/spec/minReadySeconds": int64(2)},
	}, {
		name: "mutators whose implied schemas conflict are not applied; others are",
		policies: `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: as-list}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: "spec.template.spec.containers[name: *].image"
  parameters: {assign: {value: "busybox"}}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: as-object}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: "spec.template.spec.containers.image"
  parameters: {assign: {value: "busybox"}}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: unrelated}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: spec.minReadySeconds
  parameters: {assign: {value: 7}}
`,
		namespace: "apps",
		want: map[string]any{
			"/spec/template/spec/containers/0/image": "nginx:1.27",
			"/spec/minReadySeconds":                  int64(7),
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			admitDeployment(t, tc.policies, tc.namespace, tc.want)
		})
	}
}

// admitDeployment admits the test Deployment in namespace through a chain
// of the test namespaces and policies, and checks the fields want of what
// it stores (JSON pointers; nil: absent). The write must be allowed.
func admitDeployment(t *testing.T, policies, namespace string, want map[string]any) *admission.Result {
	t.Helper()
	chain := newChain(t, namespaces+"\n---\n"+policies)
	obj := objects(t, strings.ReplaceAll(deployment, "%s", namespace))[0]
	res, err := chain.Admit(context.Background(), admission.Request{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Allowed {
		t.Fatalf("denied: %s", res.Message)
	}
	for ptr, w := range want {
		got, ok := pointer(res.Object, ptr)
		if w == nil {
			if ok {
				t.Errorf("%s = %v, want it absent", ptr, got)
			}
			continue
		}
		if diff := cmp.Diff(w, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", ptr, diff)
		}
	}
	return res
}

func TestInstall(t *testing.T) {
	chain := newChain(t, namespaces)
	mwc, ok := chain.State().Get(k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}, "", "gatekeeper-mutating-webhook-configuration")
	if !ok {
		t.Fatal("Gatekeeper's mutating webhook configuration is not installed")
	}
	hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks")
	if len(hooks) != 1 {
		t.Fatalf("webhooks = %v", hooks)
	}
	hook := hooks[0].(map[string]any)
	for path, want := range map[string]any{
		"/name":                                     "mutation.gatekeeper.sh",
		"/failurePolicy":                            "Ignore",
		"/reinvocationPolicy":                       "Never",
		"/timeoutSeconds":                           int64(1),
		"/clientConfig/service/path":                "/v1/mutate",
		"/clientConfig/service/name":                "gatekeeper-webhook-service",
		"/namespaceSelector/matchExpressions/0/key": "admission.gatekeeper.sh/ignore",
	} {
		got, _ := pointer(hook, path)
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", path, diff)
		}
	}
	for _, crd := range []string{"assign.mutations.gatekeeper.sh", "assignmetadata.mutations.gatekeeper.sh", "modifyset.mutations.gatekeeper.sh", "assignimage.mutations.gatekeeper.sh", "configs.config.gatekeeper.sh", "constrainttemplates.templates.gatekeeper.sh"} {
		if _, ok := chain.State().Get(k8sschema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, "", crd); !ok {
			t.Errorf("CRD %s is not installed", crd)
		}
	}
}

// TestBadMutator: a mutator Gatekeeper cannot build is named, with the
// constructor's reason.
func TestBadMutator(t *testing.T) {
	state, err := admission.NewState(objects(t, namespaces+`
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: bad}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: metadata.labels.x
  parameters: {assign: {value: y}}
`)...)
	if err != nil {
		t.Fatal(err)
	}
	_, err = admission.NewChain(context.Background(), state, admission.Options{Engines: []admission.PolicyEngine{testEngine}})
	if err == nil || !strings.Contains(err.Error(), "Assign bad") {
		t.Fatalf("err = %v, want one naming Assign bad", err)
	}
}

// pointer resolves a JSON pointer in an object.
func pointer(obj map[string]any, ptr string) (any, bool) {
	var cur any = obj
	for _, tok := range strings.Split(strings.TrimPrefix(ptr, "/"), "/") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[tok]
			if !ok {
				return nil, false
			}
			cur = v
		case []any:
			i := 0
			for _, r := range tok {
				i = i*10 + int(r-'0')
			}
			if i >= len(c) {
				return nil, false
			}
			cur = c[i]
		default:
			return nil, false
		}
	}
	return cur, true
}
