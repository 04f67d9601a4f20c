package kyverno_test

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
)

// mpolAddLabel is a MutatingPolicy on ConfigMaps (no pod controller
// autogen) that asks Kyverno for a MutatingAdmissionPolicy when generate
// is "true".
func mpolAddLabel(name, generate string) string {
	return `
apiVersion: policies.kyverno.io/v1
kind: MutatingPolicy
metadata: {name: ` + name + `}
spec:
  autogen: {mutatingAdmissionPolicy: {enabled: ` + generate + `}}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"` + name + `": "yes"}}}
`
}

// vpolRequireTeam is a ValidatingPolicy on resources (of group) that asks
// Kyverno for a ValidatingAdmissionPolicy when generate is "true".
func vpolRequireTeam(name, group, version, resources, generate string) string {
	return `
apiVersion: policies.kyverno.io/v1
kind: ValidatingPolicy
metadata: {name: ` + name + `}
spec:
  validationActions: [Deny]
  autogen: {validatingAdmissionPolicy: {enabled: ` + generate + `}}
  matchConstraints:
    resourceRules:
    - {apiGroups: ["` + group + `"], apiVersions: [` + version + `], operations: [CREATE, UPDATE], resources: [` + resources + `]}
  validations:
  - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
    message: ` + name + ` wants a team label
`
}

// cpolCEL is a ClusterPolicy with one validate.cel rule on Secrets and
// validate.cel.generate.
const cpolCEL = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: secret-owner}
spec:
  rules:
  - name: owner
    match:
      any:
      - resources: {kinds: [Secret]}
    validate:
      failureAction: Enforce
      cel:
        generate: true
        expressions:
        - expression: "has(object.metadata.labels) && 'owner' in object.metadata.labels"
          message: secrets need an owner
`

// exceptionWithConditions makes Kyverno refuse to generate a
// ValidatingAdmissionPolicy for secret-owner ("Conditions in
// PolicyException is not applicable").
const exceptionWithConditions = `
apiVersion: kyverno.io/v2
kind: PolicyException
metadata: {name: break-glass, namespace: apps}
spec:
  exceptions:
  - {policyName: secret-owner, ruleNames: [owner]}
  match:
    any:
    - resources: {kinds: [Secret], names: [break-glass]}
  conditions:
    any:
    - {key: "{{ request.object.metadata.name }}", operator: Equals, value: break-glass}
`

// kyvernoDeployment is Kyverno's admission controller Deployment passing
// args.
func kyvernoDeployment(args string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: kyverno-admission-controller, namespace: kyverno}
spec:
  selector: {matchLabels: {app: kyverno}}
  template:
    metadata: {labels: {app: kyverno}}
    spec:
      containers:
      - name: kyverno
        image: reg.kyverno.io/kyverno/kyverno:v1.19.1
        args: [` + args + `]
`
}

func secret(name, labels string) string {
	return `{apiVersion: v1, kind: Secret, metadata: {name: ` + name + `, namespace: apps, labels: {` + labels + `}}}`
}

func cm(name, labels string) string {
	return `{apiVersion: v1, kind: ConfigMap, metadata: {name: ` + name + `, namespace: apps, labels: {` + labels + `}}}`
}

var (
	gkVAP  = k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicy"}
	gkVAPB = k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingAdmissionPolicyBinding"}
	gkMAP  = k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicy"}
	gkMAPB = k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingAdmissionPolicyBinding"}
)

// TestAdmissionPolicyGeneration: the policies Kyverno turns into the API
// server's own admission policies are installed as those (Kyverno's
// names, labels and owners) and answered by the API server's plugins, not
// by Kyverno's webhook; the ones Kyverno refuses to turn stay with its
// webhook.
func TestAdmissionPolicyGeneration(t *testing.T) {
	type admit struct {
		object  string
		allowed bool
		// message the answer contains; by the change a change's By
		// contains, label the label it sets.
		message, by, label string
	}
	tests := []struct {
		name    string
		cluster []string
		// generated are "Kind/name" of the admission policies and
		// bindings the state must hold; absent those it must not.
		generated, absent []string
		// webhookFor names the policies Kyverno's webhooks must still
		// route (a fine path segment), notWebhookFor those they must not.
		webhookFor, notWebhookFor []string
		admits                    []admit
	}{{
		name:          "MutatingPolicy asking for a MutatingAdmissionPolicy",
		cluster:       []string{namespaces, mpolAddLabel("gen", "true")},
		generated:     []string{"MutatingAdmissionPolicy/mpol-gen", "MutatingAdmissionPolicyBinding/mpol-gen-binding"},
		notWebhookFor: []string{"/mpol/gen"},
		admits: []admit{{object: cm("c", "k: v"), allowed: true, label: "gen",
			by: "MutatingAdmissionPolicy/mpol-gen"}},
	}, {
		name:       "MutatingPolicy not asking stays in the webhook",
		cluster:    []string{namespaces, mpolAddLabel("hooked", "false")},
		absent:     []string{"MutatingAdmissionPolicy/mpol-hooked"},
		webhookFor: []string{"/mpol/hooked"},
		admits: []admit{{object: cm("c", "k: v"), allowed: true, label: "hooked",
			by: "mpol.validate.kyverno.svc"}},
	}, {
		name:          "ValidatingPolicy asking for a ValidatingAdmissionPolicy",
		cluster:       []string{namespaces, vpolRequireTeam("team", "", "v1", "configmaps", "true")},
		generated:     []string{"ValidatingAdmissionPolicy/vpol-team", "ValidatingAdmissionPolicyBinding/vpol-team-binding"},
		notWebhookFor: []string{"/vpol/team"},
		admits: []admit{
			{object: cm("c", "k: v"), message: "ValidatingAdmissionPolicy 'vpol-team' with binding 'vpol-team-binding' denied request"},
			{object: cm("c", "team: a"), allowed: true},
		},
	}, {
		// Kyverno folds a CEL PolicyException into the generated policy as
		// a negated match condition.
		name: "ValidatingPolicy with a CEL PolicyException",
		cluster: []string{namespaces, vpolRequireTeam("team", "", "v1", "configmaps", "true"), `
apiVersion: policies.kyverno.io/v1
kind: PolicyException
metadata: {name: legacy, namespace: apps}
spec:
  policyRefs: [{name: team, kind: ValidatingPolicy}]
  matchConditions:
  - {name: legacy, expression: "object.metadata.name == 'legacy'"}
`},
		generated:     []string{"ValidatingAdmissionPolicy/vpol-team"},
		notWebhookFor: []string{"/vpol/team"},
		admits: []admit{
			{object: cm("c", "k: v"), message: "ValidatingAdmissionPolicy 'vpol-team' with binding 'vpol-team-binding' denied request"},
			{object: cm("legacy", "k: v"), allowed: true},
		},
	}, {
		// Pods get pod controller autogen, which Kyverno's generator
		// refuses ("pod controllers autogen is enabled").
		name:       "ValidatingPolicy on Pods is refused and stays in the webhook",
		cluster:    []string{namespaces, vpolRequireTeam("pods", "", "v1", "pods", "true")},
		absent:     []string{"ValidatingAdmissionPolicy/vpol-pods"},
		webhookFor: []string{"/vpol/pods"},
		admits: []admit{{object: `{apiVersion: v1, kind: Pod, metadata: {name: p, namespace: apps}, spec: {containers: [{name: c, image: nginx}]}}`,
			message: "pods wants a team label"}},
	}, {
		name:    "--generateValidatingAdmissionPolicy=false in Kyverno's Deployment",
		cluster: []string{namespaces, vpolRequireTeam("team", "", "v1", "configmaps", "true"), kyvernoDeployment("--generateValidatingAdmissionPolicy=false")},
		absent:  []string{"ValidatingAdmissionPolicy/vpol-team"}, webhookFor: []string{"/vpol/team"},
		admits: []admit{{object: cm("c", "k: v"), message: "admission webhook \"vpol.validate.kyverno.svc-fail\" denied the request"}},
	}, {
		name:      "ClusterPolicy validate.cel with generate",
		cluster:   []string{namespaces, cpolCEL},
		generated: []string{"ValidatingAdmissionPolicy/cpol-secret-owner", "ValidatingAdmissionPolicyBinding/cpol-secret-owner-binding"},
		admits: []admit{
			{object: secret("s", "k: v"), message: "ValidatingAdmissionPolicy 'cpol-secret-owner' with binding 'cpol-secret-owner-binding' denied request: secrets need an owner"},
			{object: secret("s", "owner: me"), allowed: true},
		},
	}, {
		name:    "ClusterPolicy with an exception Kyverno cannot translate stays in the webhook",
		cluster: []string{namespaces, cpolCEL, exceptionWithConditions},
		absent:  []string{"ValidatingAdmissionPolicy/cpol-secret-owner"},
		admits: []admit{
			{object: secret("s", "k: v"), message: "secrets need an owner"},
			{object: secret("break-glass", "k: v"), allowed: true},
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			chain := newChain(t, tt.cluster...)
			st := chain.State()
			gks := map[string]k8sschema.GroupKind{"ValidatingAdmissionPolicy": gkVAP, "ValidatingAdmissionPolicyBinding": gkVAPB,
				"MutatingAdmissionPolicy": gkMAP, "MutatingAdmissionPolicyBinding": gkMAPB}
			for _, g := range tt.generated {
				kind, name, _ := strings.Cut(g, "/")
				o, ok := st.Get(gks[kind], "", name)
				if !ok {
					t.Errorf("no %s in the state", g)
					continue
				}
				if o.GetLabels()["app.kubernetes.io/managed-by"] != "kyverno" {
					t.Errorf("%s labels %v, want app.kubernetes.io/managed-by: kyverno", g, o.GetLabels())
				}
				// kube-apiserver refuses an owner reference without a UID.
				if refs := o.GetOwnerReferences(); len(refs) != 1 || refs[0].UID == "" ||
					!strings.HasPrefix(refs[0].APIVersion, "kyverno.io/") && !strings.HasPrefix(refs[0].APIVersion, "policies.kyverno.io/") {
					t.Errorf("%s owners %v, want the Kyverno policy, with a UID", g, refs)
				}
			}
			for _, g := range tt.absent {
				kind, name, _ := strings.Cut(g, "/")
				if _, ok := st.Get(gks[kind], "", name); ok {
					t.Errorf("%s in the state, want none: Kyverno does not generate it", g)
				}
			}
			paths := webhookPaths(t, st)
			for _, p := range tt.webhookFor {
				if !containsPrefix(paths, p) {
					t.Errorf("Kyverno's webhook paths %v, want one for %s", paths, p)
				}
			}
			for _, p := range tt.notWebhookFor {
				if containsPrefix(paths, p) {
					t.Errorf("Kyverno's webhook paths %v route %s, which Kyverno leaves to the API server", paths, p)
				}
			}
			for _, a := range tt.admits {
				res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, a.object)})
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed != a.allowed {
					t.Fatalf("%s: allowed = %v (%s), want %v", a.object, res.Allowed, res.Message, a.allowed)
				}
				if a.message != "" && !strings.Contains(res.Message, a.message) {
					t.Errorf("%s: message %q, want it to contain %q", a.object, res.Message, a.message)
				}
				if a.label != "" {
					labels, _, _ := unstructured.NestedStringMap(res.Object, "metadata", "labels")
					if labels[a.label] != "yes" {
						t.Errorf("%s: labels %v, want %s: yes", a.object, labels, a.label)
					}
				}
				if a.by != "" {
					var bys []string
					for _, c := range res.Changes {
						bys = append(bys, c.By)
					}
					if !containsPrefix(bys, a.by) {
						t.Errorf("%s: changes by %v, want one by %s", a.object, bys, a.by)
					}
				}
			}
		})
	}
}

// webhookPaths are the service paths of Kyverno's resource webhooks.
func webhookPaths(t *testing.T, st *admission.State) []string {
	t.Helper()
	var out []string
	for _, c := range []struct{ kind, name string }{
		{"MutatingWebhookConfiguration", "kyverno-resource-mutating-webhook-cfg"},
		{"ValidatingWebhookConfiguration", "kyverno-resource-validating-webhook-cfg"},
	} {
		o, ok := st.Get(k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: c.kind}, "", c.name)
		if !ok {
			continue
		}
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for _, h := range hooks {
			path, _, _ := unstructured.NestedString(h.(map[string]any), "clientConfig", "service", "path")
			out = append(out, path)
		}
	}
	return out
}

func containsPrefix(l []string, p string) bool {
	for _, s := range l {
		if strings.HasPrefix(s, p) || strings.Contains(s, p) {
			return true
		}
	}
	return false
}
