package gatekeeper_test

import (
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
)

// expandDeployments is Gatekeeper's own example ExpansionTemplate
// (website docs, "Validating Workload Resources using ExpansionTemplate"):
// a Deployment expands into the Pod its template describes.
func expandDeployments(action string) string {
	s := `
apiVersion: expansion.gatekeeper.sh/v1beta1
kind: ExpansionTemplate
metadata: {name: expand-deployments}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  templateSource: spec.template
  generatedGVK: {kind: Pod, group: "", version: v1}
`
	if action != "" {
		s += "  enforcementAction: " + action + "\n"
	}
	return s
}

// podsNeedOwner is K8sRequiredLabels scoped to Pods; match holds extra
// match fields (source, namespaces).
func podsNeedOwner(action, match string) string {
	return `
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sRequiredLabels
metadata: {name: pods-need-owner}
spec:
  enforcementAction: ` + action + `
  match:
    kinds: [{apiGroups: [""], kinds: [Pod]}]` + match + `
  parameters: {labels: [owner]}
`
}

// ownerForPods sets the owner label on Pods whose source is source.
func ownerForPods(source string) string {
	return `
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: owner-for-pods}
spec:
  match:
    source: ` + source + `
    scope: Namespaced
    kinds: [{apiGroups: [""], kinds: [Pod]}]
  location: metadata.labels.owner
  parameters: {assign: {value: platform}}
`
}

// TestExpansion: Gatekeeper's validating webhook expands a Deployment
// into its Pod with the cluster's ExpansionTemplates, mutates the Pod with
// the mutators that take Generated objects, and answers for the
// Deployment with the Pod's violations (pkg/webhook/policy.go
// reviewRequest).
func TestExpansion(t *testing.T) {
	const denied = `admission webhook "validation.gatekeeper.sh" denied the request: `
	const implied = `[pods-need-owner] [Implied by expand-deployments] you must provide labels: {"owner"}`
	tests := []struct {
		name      string
		policies  []string
		namespace string
		object    string // default: the Deployment in namespace
		// want is the denial, "" when allowed.
		want     string
		warnings []string
		// stored checks the object stored when allowed.
		stored func(t *testing.T, obj map[string]any)
	}{{
		name:     "no ExpansionTemplate: a constraint on Pods does not see a Deployment",
		policies: []string{podsNeedOwner("deny", "")},
	}, {
		name:     "the Deployment's Pod violates: denied with Gatekeeper's message",
		policies: []string{expandDeployments(""), podsNeedOwner("deny", "")},
		want:     denied + implied,
	}, {
		name:     "constraint warn",
		policies: []string{expandDeployments(""), podsNeedOwner("warn", "")},
		warnings: []string{implied},
	}, {
		name:     "constraint dryrun: audit only",
		policies: []string{expandDeployments(""), podsNeedOwner("dryrun", "")},
	}, {
		name:     "the template's enforcementAction overrides the constraint's: warn",
		policies: []string{expandDeployments("warn"), podsNeedOwner("deny", "")},
		warnings: []string{implied},
	}, {
		name:     "the template's enforcementAction overrides the constraint's: dryrun",
		policies: []string{expandDeployments("dryrun"), podsNeedOwner("deny", "")},
	}, {
		name:     "the template's enforcementAction overrides the constraint's: deny",
		policies: []string{expandDeployments("deny"), podsNeedOwner("warn", "")},
		want:     denied + implied,
	}, {
		name:     "a mutator with source Generated labels the Pod before it is reviewed; the Deployment is not mutated",
		policies: []string{expandDeployments(""), podsNeedOwner("deny", ""), ownerForPods("Generated")},
		stored: func(t *testing.T, obj map[string]any) {
			labels, _, _ := unstructured.NestedStringMap(obj, "spec", "template", "metadata", "labels")
			if _, ok := labels["owner"]; ok {
				t.Errorf("the stored Deployment's template has the Generated mutator's label: %v", labels)
			}
		},
	}, {
		name:     "a mutator with source Original does not touch the resultant",
		policies: []string{expandDeployments(""), podsNeedOwner("deny", ""), ownerForPods("Original")},
		want:     denied + implied,
	}, {
		name:     "a mutator with source All labels the resultant",
		policies: []string{expandDeployments(""), podsNeedOwner("deny", ""), ownerForPods("All")},
	}, {
		name:     "a constraint matching source Original does not review resultants",
		policies: []string{expandDeployments(""), podsNeedOwner("deny", "\n    source: Original")},
	}, {
		name:     "a constraint matching source Generated reviews them",
		policies: []string{expandDeployments(""), podsNeedOwner("deny", "\n    source: Generated")},
		want:     denied + implied,
	}, {
		name:     "the resultant is in the request's namespace",
		policies: []string{expandDeployments(""), podsNeedOwner("deny", "\n    namespaces: [apps]")},
		want:     denied + implied,
	}, {
		name:      "… so a constraint on another namespace does not see it",
		policies:  []string{expandDeployments(""), podsNeedOwner("deny", "\n    namespaces: [apps]")},
		namespace: "excluded",
	}, {
		name:     "a constraint with a namespaceSelector reads the request's Namespace",
		policies: []string{expandDeployments(""), podsNeedOwner("deny", "\n    namespaceSelector: {matchLabels: {team: a}}")},
		want:     denied + implied,
	}, {
		name:      "namespaces labelled admission.gatekeeper.sh/ignore are not validated",
		policies:  []string{expandDeployments(""), podsNeedOwner("deny", "")},
		namespace: "ignored",
	}, {
		name: "a template for another kind does not expand Deployments",
		policies: []string{strings.ReplaceAll(expandDeployments(""), "kinds: [Deployment]", "kinds: [StatefulSet]"),
			podsNeedOwner("deny", "")},
	}, {
		name: "templates forming a cycle expand nothing (Gatekeeper keeps them, marked conflicting)",
		policies: []string{expandDeployments(""), podsNeedOwner("deny", ""), `
apiVersion: expansion.gatekeeper.sh/v1beta1
kind: ExpansionTemplate
metadata: {name: pods-to-deployments}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  templateSource: spec
  generatedGVK: {kind: Deployment, group: apps, version: v1}
`},
	}, {
		name: "--enable-generator-resource-expansion=false on the controller manager",
		policies: []string{expandDeployments(""), podsNeedOwner("deny", ""),
			controllerManagerDeployment(`["--operation=webhook", "--enable-generator-resource-expansion=false"]`)},
	}, {
		name:     "Gatekeeper's webhook refuses an ExpansionTemplate that expands the kind it generates",
		policies: []string{podsNeedOwner("deny", "")},
		object: `
apiVersion: expansion.gatekeeper.sh/v1beta1
kind: ExpansionTemplate
metadata: {name: self}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  templateSource: spec
  generatedGVK: {kind: Pod, group: "", version: v1}
`,
		want: denied + "ExpansionTemplate self generates GVK /v1, Kind=Pod, but also applies to that same GVK",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chain := newChain(t, namespaces+"\n---\n"+requiredLabels+"\n---\n"+strings.Join(tc.policies, "\n---\n"))
			ns := tc.namespace
			if ns == "" {
				ns = "apps"
			}
			doc := tc.object
			if doc == "" {
				doc = strings.ReplaceAll(deployment, "%s", ns)
			}
			res, err := chain.Admit(context.Background(), admission.Request{Object: objects(t, doc)[0]})
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if !res.Allowed {
				got = res.Message
			}
			if got != tc.want {
				t.Errorf("answer = %q, want %q", got, tc.want)
			}
			if diff := cmp.Diff(tc.warnings, res.Warnings, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("warnings (-want +got):\n%s", diff)
			}
			if tc.stored != nil && res.Allowed {
				tc.stored(t, res.Object)
			}
		})
	}
}

// controllerManagerDeployment is Gatekeeper's controller manager with args.
func controllerManagerDeployment(args string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: gatekeeper-controller-manager, namespace: gatekeeper-system, labels: {gatekeeper.sh/operation: webhook}}
spec:
  selector: {matchLabels: {control-plane: controller-manager}}
  template:
    metadata: {labels: {control-plane: controller-manager, gatekeeper.sh/operation: webhook}}
    spec:
      containers:
      - name: manager
        image: openpolicyagent/gatekeeper:v3.23.1
        args: ` + args + `
`
}

// TestExpansionUnpredictable: a constraint that matches the resultant but
// could not be evaluated (its template calls external data) is named,
// with the template that implied the resultant.
func TestExpansionUnpredictable(t *testing.T) {
	probe := strings.ReplaceAll(regoTemplate(`response := external_data({"provider": "p", "keys": ["a"]}); msg := sprintf("%v", [response])`), "kinds: [ConfigMap]", "kinds: [Pod]")
	chain := newChain(t, namespaces+"\n---\n"+expandDeployments("")+probe)
	res, err := chain.Admit(context.Background(), admission.Request{Object: objects(t, strings.ReplaceAll(deployment, "%s", "apps"))[0]})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(res.Unpredictable, "; ")
	if !res.Allowed || !strings.Contains(got, "[Implied by expand-deployments] K8sProbe probe not evaluated") {
		t.Errorf("allowed=%v unpredictable=%q, want the resultant's constraint named", res.Allowed, got)
	}
}
