package gatekeeper_test

import (
	"context"
	"strings"
	"testing"
)

// TestRefusals: the Gatekeeper objects a cluster refuses to create, so that
// truce check leaves them for the sync (which is refused them) instead of
// taking them as installed.
func TestRefusals(t *testing.T) {
	const noCRD = "no CRD for K8sProbe.constraints.gatekeeper.sh: "
	tests := []struct {
		name    string
		cluster string
		objs    string
		want    map[string]string // refused Kind/name → a substring of why
	}{{
		name: "a template and its constraint",
		objs: requiredLabels + "---" + constraint("needs-owner", "deny"),
	}, {
		name:    "a constraint of a template the cluster holds",
		cluster: requiredLabels,
		objs:    constraint("needs-owner", "warn"),
	}, {
		name: "a constraint its template's schema refuses",
		objs: requiredLabels + "---" + strings.ReplaceAll(constraint("typo", "deny"), "labels: [owner]", "labels: owner"),
		want: map[string]string{"K8sRequiredLabels/typo": `admission webhook "validation.gatekeeper.sh" denied the request: `},
	}, {
		name: "an enforcementAction Gatekeeper does not know",
		objs: requiredLabels + "---" + constraint("blocking", "block"),
		want: map[string]string{"K8sRequiredLabels/blocking": `unrecognized enforcementAction: "block"`},
	}, {
		name:    "--disable-enforcementaction-validation accepts it",
		cluster: controllerManagerDeployment(`["--disable-enforcementaction-validation"]`),
		objs:    requiredLabels + "---" + constraint("blocking", "block"),
	}, {
		name: "a constraint of no template",
		objs: constraint("orphan", "deny"),
		want: map[string]string{"K8sRequiredLabels/orphan": "no CRD for K8sRequiredLabels.constraints.gatekeeper.sh: no ConstraintTemplate defines it"},
	}, {
		name: "a template Gatekeeper cannot ingest: it is created, its constraint is not",
		objs: regoTemplate(`msg := "x" +`),
		want: map[string]string{"K8sProbe/probe": noCRD + "Gatekeeper cannot ingest its ConstraintTemplate k8sprobe: "},
	}, {
		// The CRD stays, but a Gatekeeper started since holds no
		// template for the kind.
		name:    "a template Gatekeeper cannot ingest, with the CRD of its earlier version",
		cluster: probeCRD,
		objs:    regoTemplate(`msg := "x" +`),
		want:    map[string]string{"K8sProbe/probe": `admission webhook "validation.gatekeeper.sh" denied the request: missing ConstraintTemplate`},
	}, {
		name: "a template whose name is not its kind's",
		objs: strings.Replace(regoTemplate(`msg := "x"`), "name: k8sprobe", "name: probe", 1),
		want: map[string]string{
			"ConstraintTemplate/probe": `admission webhook "validation.gatekeeper.sh" denied the request: invalid ConstraintTemplate: the ConstraintTemplate's name "probe" is not equal to the lowercase of CRD's Kind`,
			"K8sProbe/probe":           noCRD + "its ConstraintTemplate probe is refused",
		},
	}, {
		// Refused for more than its CRD: its kind is defined by nothing.
		name: "a template with \"*\" among other operations, and its constraint",
		objs: strings.Replace(regoTemplate(`msg := "x"`), "  - target: admission.k8s.gatekeeper.sh\n", "  - target: admission.k8s.gatekeeper.sh\n    operations: [\"*\", CREATE]\n", 1),
		want: map[string]string{
			"ConstraintTemplate/k8sprobe": "if '*' is present, must not specify other operations",
			"K8sProbe/probe":              noCRD + "its ConstraintTemplate k8sprobe is refused",
		},
	}, {
		// The repository's version replaces the cluster's.
		name:    "a template the cluster holds, updated to one Gatekeeper cannot ingest",
		cluster: regoTemplate(`msg := "x"`),
		objs:    regoTemplate(`msg := "x" +`),
		want:    map[string]string{"K8sProbe/probe": noCRD + "Gatekeeper cannot ingest its ConstraintTemplate k8sprobe: "},
	}, {
		name: "a mutator Gatekeeper cannot build",
		objs: `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: meta}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: metadata.labels.team
  parameters: {assign: {value: shop}}
`,
		want: map[string]string{"Assign/meta": "assign meta can't change metadata"},
	}, {
		name: "a mutator that takes external data",
		objs: externalDataAssign,
	}, {
		name:    "a mutator that takes external data, with --enable-external-data=false",
		cluster: controllerManagerDeployment(`["--enable-external-data=false"]`),
		objs:    externalDataAssign,
		want:    map[string]string{"Assign/tag-images": "external data feature flag is not enabled"},
	}, {
		name: "an ExpansionTemplate without a source",
		objs: strings.Replace(expandDeployments(""), "templateSource: spec.template", "templateSource: \"\"", 1),
		want: map[string]string{"ExpansionTemplate/expand-deployments": "has empty source field"},
	}, {
		// Gatekeeper's webhook configuration exempts gatekeeper-system.
		name: "a Config of another name in gatekeeper-system",
		objs: "apiVersion: config.gatekeeper.sh/v1alpha1\nkind: Config\nmetadata: {name: other, namespace: gatekeeper-system}\n",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			objs := objects(t, tc.objs)
			got, err := testEngine.Refusals(context.Background(), objects(t, namespaces+"\n---\n"+tc.cluster), objs)
			if err != nil {
				t.Fatal(err)
			}
			byName := map[string]string{}
			for i, why := range got {
				byName[objs[i].GetKind()+"/"+objs[i].GetName()] = why
			}
			for name, want := range tc.want {
				if why, ok := byName[name]; !ok || !strings.Contains(why, want) {
					t.Errorf("%s: refused %v (%q), want %q", name, ok, why, want)
				}
			}
			for name, why := range byName {
				if _, ok := tc.want[name]; !ok {
					t.Errorf("%s refused: %s", name, why)
				}
			}
		})
	}
}

// probeCRD is the CRD Gatekeeper created for K8sProbe, from a version of
// its template that compiled.
const probeCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: k8sprobe.constraints.gatekeeper.sh}
spec:
  group: constraints.gatekeeper.sh
  names: {kind: K8sProbe, listKind: K8sProbeList, plural: k8sprobe, singular: k8sprobe}
  scope: Cluster
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// externalDataAssign sets images from an external data provider.
const externalDataAssign = `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: tag-images}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name:*].image"
  parameters:
    assign:
      externalData: {provider: tags, dataSource: ValueAtLocation, failurePolicy: Fail}
`
