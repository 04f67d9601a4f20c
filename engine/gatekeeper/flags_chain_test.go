package gatekeeper_test

import (
	"context"
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
)

// TestControllerManagerFlags: the flags of Gatekeeper's controller manager
// Deployment in the cluster change its webhooks' answers.
func TestControllerManagerFlags(t *testing.T) {
	const labelDenied = `admission webhook "check-ignore-label.gatekeeper.sh" denied the request: Only exempt namespace can have the admission.gatekeeper.sh/ignore label`
	ignored := func(name string) string {
		return "apiVersion: v1\nkind: Namespace\nmetadata: {name: " + name + ", labels: {admission.gatekeeper.sh/ignore: x}}\n"
	}
	tests := []struct {
		name     string
		cluster  string
		object   string
		want     string // the denial, "" when allowed
		wantUnpr string // a substring of the unpredictable list
		wantErr  string // a substring of the chain's error
	}{{
		name:   "the manifests' default: only gatekeeper-system may carry the ignore label",
		object: ignored("team-a"),
		want:   labelDenied,
	}, {
		name:    "--exempt-namespace-prefix lets team-a carry it",
		cluster: controllerManagerDeployment(`["--exempt-namespace=gatekeeper-system", "--exempt-namespace-prefix=team-"]`),
		object:  ignored("team-a"),
	}, {
		name:    "--exempt-namespace-suffix",
		cluster: controllerManagerDeployment(`["--exempt-namespace-suffix=-a"]`),
		object:  ignored("team-a"),
	}, {
		name:    "--exempt-namespace",
		cluster: controllerManagerDeployment(`["--exempt-namespace=team-a"]`),
		object:  ignored("team-a"),
	}, {
		name:    "another namespace is not exempt by those flags",
		cluster: controllerManagerDeployment(`["--exempt-namespace=team-b", "--exempt-namespace-prefix=team-b", "--exempt-namespace-suffix=-b"]`),
		object:  ignored("team-a"),
		want:    labelDenied,
	}, {
		name: "an Argo CD Application of Gatekeeper's chart: controllerManager.exemptNamespaces",
		cluster: applicationCRD + `
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: gatekeeper, namespace: argocd}
spec:
  destination: {namespace: gatekeeper-system}
  source:
    chart: gatekeeper
    repoURL: https://open-policy-agent.github.io/gatekeeper/charts
    helm: {valuesObject: {controllerManager: {exemptNamespaces: [team-a]}}}
`,
		object: ignored("team-a"),
	}, {
		name:    "--enable-k8s-native-validation=false: a template with CEL and Rego runs its Rego",
		cluster: controllerManagerDeployment(`["--enable-k8s-native-validation=false"]`) + celTemplate(true),
		object:  strings.ReplaceAll(configMap, "%s", "apps"),
		want:    `admission webhook "validation.gatekeeper.sh" denied the request: [owner] an owner label is required (Rego)`,
	}, {
		// Gatekeeper ingests no CEL-only template then (TestTemplateIngestion):
		// no CRD, so no constraint of it.
		name:    "--enable-k8s-native-validation=false: a CEL-only template's constraints cannot be created",
		cluster: controllerManagerDeployment(`["--enable-k8s-native-validation=false"]`) + strings.Split(celTemplate(false), "---\napiVersion: constraints")[0],
		object:  "apiVersion: constraints.gatekeeper.sh/v1beta1\nkind: K8sCELRequiredOwner\nmetadata: {name: owner}\n",
		wantErr: `no kind "K8sCELRequiredOwner" is registered`,
	}, {
		name:    "an unknown enforcementAction is refused by default",
		cluster: requiredLabels,
		object:  constraint("odd", "block"),
		want:    `admission webhook "validation.gatekeeper.sh" denied the request: `,
	}, {
		name:    "--disable-enforcementaction-validation accepts it",
		cluster: controllerManagerDeployment(`["--disable-enforcementaction-validation=true"]`) + "\n---\n" + requiredLabels,
		object:  constraint("odd", "block"),
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chain := newChain(t, namespaces+"\n---\n"+tc.cluster)
			res, err := chain.Admit(context.Background(), admission.Request{Object: objects(t, tc.object)[0]})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if !res.Allowed {
				got = res.Message
			}
			if tc.want == "" && got != "" || !strings.HasPrefix(got, tc.want) || tc.want != "" && got == "" {
				t.Errorf("answer = %q, want %q", got, tc.want)
			}
			if unpr := strings.Join(res.Unpredictable, "; "); tc.wantUnpr != "" && !strings.Contains(unpr, tc.wantUnpr) || tc.wantUnpr == "" && unpr != "" {
				t.Errorf("unpredictable = %q, want %q", unpr, tc.wantUnpr)
			}
		})
	}
}

// applicationCRD stands for Argo CD's Application CRD in a cluster where
// Argo CD runs (schema left open).
const applicationCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: applications.argoproj.io}
spec:
  group: argoproj.io
  names: {kind: Application, listKind: ApplicationList, plural: applications, singular: application}
  scope: Namespaced
  versions:
  - name: v1alpha1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`
