//go:build e2e

package drift

import (
	"strings"

	"github.com/fluxcd/pkg/ssa/jsondiff"

	tdrift "github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/drift/ignore"
)

// Objects the cases share. Namespaces are left out: every namespaced object
// goes to its case's namespace.
const (
	deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
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
        image: registry.example/web:1.0
        ports:
        - {name: http, containerPort: 8080}
`
	configMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: settings}
data:
  log-level: info
  mode: fast
`
	annotatedConfigMap = `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations:
    example.com/revision: "1"
    example.com/owner: team-a
data:
  log-level: info
`
	secret = `apiVersion: v1
kind: Secret
metadata: {name: credentials}
type: Opaque
data:
  username: YWRtaW4=
  password: czNjcmV0
`
	// stringSecret is secret with its values in stringData, which the
	// server folds into data.
	stringSecret = `apiVersion: v1
kind: Secret
metadata: {name: credentials}
type: Opaque
stringData:
  username: admin
  password: s3cret
`
	widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.drift.truce.dev}
spec:
  group: drift.truce.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              color: {type: string}
              mode: {type: string, default: auto}
              ports:
                type: array
                x-kubernetes-list-type: map
                x-kubernetes-list-map-keys: [name]
                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    port: {type: integer}
`
	widget = `apiVersion: drift.truce.dev/v1
kind: Widget
metadata:
  name: gadget
  labels: {app: gadget}
spec:
  size: 3
  color: blue
  ports:
  - {name: http, port: 80}
  - {name: metrics, port: 9090}
`
	// platformDefaults is a MutatingAdmissionPolicy that overrides a label
	// and a spec field Git sets, on Deployments that opt in by label (so
	// that it touches no other case's objects). The server keeps every
	// case's policies (cases share it without cleanup) and evaluates them in
	// Go map order, so a case's policies must select only objects no other
	// policy touches, or write disjoint fields; the cases' probes check the
	// answer, never which policy gave it.
	platformDefaults = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: drift-e2e-platform-defaults}
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
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{
          metadata: Object.metadata{labels: {"tier": "platform"}},
          spec: Object.spec{revisionHistoryLimit: 3}
        }
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: drift-e2e-platform-defaults}
spec:
  policyName: drift-e2e-platform-defaults
  matchResources:
    objectSelector:
      matchLabels: {drift.truce.dev/platform-defaults: "on"}
`
	platformDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, tier: web, drift.truce.dev/platform-defaults: "on"}
spec:
  replicas: 1
  revisionHistoryLimit: 10
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - {name: web, image: registry.example/web:1.0}
`
	// optInDeployment is deployment opting in to platformDefaults, without
	// the label and field the policy sets.
	optInDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web, drift.truce.dev/platform-defaults: "on"}
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
        image: registry.example/web:1.0
        ports:
        - {name: http, containerPort: 8080}
`
)

// platformProbe shows platformDefaults in effect: a dry-run create of the
// case's desired Deployment (which opts in) comes back with what the
// policy sets.
var platformProbe = admissionProbe{want: `
metadata: {labels: {tier: platform}}
spec: {revisionHistoryLimit: 3}
`}

// optInLabel is the pointer of platformDefaults' opt-in label.
const optInLabel = "/metadata/labels/drift.truce.dev~1platform-defaults"

// replicasRule is an Argo CD ignoreDifferences entry for the replicas of
// Deployments.
var replicasRule = ignore.Rule{Tool: ignore.ArgoCD, Field: "spec.ignoreDifferences[0]",
	Target: ignore.Target{Group: "apps", Kind: "Deployment"}, JSONPointers: []string{"/spec/replicas"}}

// hpaRule is an Argo CD ignoreDifferences entry for what the HPA owns.
var hpaRule = ignore.Rule{Tool: ignore.ArgoCD, Field: "spec.ignoreDifferences[0]",
	Target: ignore.Target{Group: "apps", Kind: "Deployment"}, ManagedFieldsManagers: []string{hpa}}

// Flux's field manager and the managers of the histories.
const (
	flux     = tdrift.FluxFieldManager
	hpa      = "hpa-controller"
	platform = "platform-team"
	operator = "settings-operator"
)

// scaled is what an HPA writes: replicas only.
const scaled = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec: {replicas: 5}
`

// revisionAnnotation is the ignore-rule path of the annotation
// example.com/revision: "/" in a key is "~1" in a JSON pointer.
const revisionAnnotation = "/metadata/annotations/example.com~1revision"

var cases = []testCase{
	{
		name: "hpa-takes-replicas",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: deployment},
			{op: opUpdate, manager: hpa, object: scaled},
		},
		desired: deployment,
		flux:    fluxCase{want: tdrift.Drifted, wantFields: []string{"/spec/replicas"}},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/spec/replicas"),
			ssd:        expect(tdrift.Drifted, "/spec/replicas"),
			ssdWebhook: expect(tdrift.Drifted, "/metadata/generation", "/spec/replicas"),
		},
	},
	{
		name: "ignore-replicas-with-selector",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: deployment},
			{op: opUpdate, manager: hpa, object: scaled},
		},
		desired: deployment,
		flux: fluxCase{
			rules: []tdrift.FluxRule{rule("hpa", &jsondiff.Selector{Group: "apps", Kind: "Deployment", Name: "web"}, "/spec/replicas")},
			want:  tdrift.InSync,
		},
		argo: argoCase{
			rules:  []ignore.Rule{replicasRule},
			legacy: expect(tdrift.InSync),
			ssd:    expect(tdrift.InSync),
			// The dry run's answer is compared whole: replicas are
			// ignored, the generation the changed spec bumps is not
			// (argo-cd#17568; users ignore /metadata/generation).
			ssdWebhook: expect(tdrift.Drifted, "/metadata/generation"),
		},
	},
	{
		name: "ignore-replicas-without-selector",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: deployment},
			{op: opUpdate, manager: hpa, object: scaled},
		},
		desired: deployment,
		flux: fluxCase{
			rules: []tdrift.FluxRule{rule("hpa", nil, "/spec/replicas")},
			want:  tdrift.InSync,
		},
		// Argo CD's managedFieldsManagers: what the HPA owns is not drift.
		argo: argoCase{
			rules:      []ignore.Rule{hpaRule},
			legacy:     expect(tdrift.InSync),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.Drifted, "/metadata/generation"),
		},
	},
	{
		name: "ignore-rule-for-another-kind",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: deployment},
			{op: opUpdate, manager: hpa, object: scaled},
		},
		desired: deployment,
		flux: fluxCase{
			rules:      []tdrift.FluxRule{rule("sts", &jsondiff.Selector{Kind: "StatefulSet"}, "/spec/replicas")},
			want:       tdrift.Drifted,
			wantFields: []string{"/spec/replicas"},
		},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/spec/replicas"),
			ssd:        expect(tdrift.Drifted, "/spec/replicas"),
			ssdWebhook: expect(tdrift.Drifted, "/metadata/generation", "/spec/replicas"),
		},
	},
	{
		name: "apply-manager-shares-field",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: configMap},
			{op: opApply, manager: platform, object: `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {log-level: info, extra: "1"}
`},
		},
		desired: configMap,
		flux:    fluxCase{want: tdrift.InSync},
		argo: argoCase{
			legacy:     expect(tdrift.InSync),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
	{
		name: "apply-manager-takes-field",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: configMap},
			{op: opApply, manager: platform, force: true, object: `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {log-level: debug}
`},
		},
		desired: configMap,
		flux:    fluxCase{want: tdrift.Drifted, wantFields: []string{"/data/log-level"}},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/data/log-level"),
			ssd:        expect(tdrift.Drifted, "/data/log-level"),
			ssdWebhook: expect(tdrift.Drifted, "/data/log-level"),
		},
	},
	{
		name: "apply-conflict",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: configMap},
			{op: opApply, manager: platform, wantConflict: true, object: `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {log-level: debug}
`},
		},
		desired: configMap,
		flux:    fluxCase{want: tdrift.InSync},
		argo: argoCase{
			legacy:     expect(tdrift.InSync),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
	{
		name: "label-added-by-other-manager",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: configMap},
			{op: opUpdate, manager: "kubectl-label", object: `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {env: prod}
`},
		},
		desired: configMap,
		flux:    fluxCase{want: tdrift.InSync},
		argo: argoCase{
			legacy:     expect(tdrift.InSync),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
	{
		name: "label-changed-by-other-manager",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: configMap},
			{op: opUpdate, manager: "kubectl-label", object: `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: legacy}
`},
		},
		desired: configMap,
		flux:    fluxCase{want: tdrift.Drifted, wantFields: []string{"/metadata/labels/app"}},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/metadata/labels/app"),
			ssd:        expect(tdrift.Drifted, "/metadata/labels/app"),
			ssdWebhook: expect(tdrift.Drifted, "/metadata/labels/app"),
		},
	},
	{
		name: "operator-owns-configmap-key",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: configMap},
			{op: opUpdate, manager: operator, object: `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {generated-at: "2026-01-01T00:00:00Z"}
`},
		},
		desired: configMap,
		flux:    fluxCase{want: tdrift.InSync},
		argo: argoCase{
			legacy:     expect(tdrift.InSync),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
	{
		name: "operator-changes-git-key",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: configMap},
			{op: opUpdate, manager: operator, object: `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: safe, generated-at: "2026-01-01T00:00:00Z"}
`},
		},
		desired: configMap,
		flux:    fluxCase{want: tdrift.Drifted, wantFields: []string{"/data/mode"}},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/data/mode"),
			ssd:        expect(tdrift.Drifted, "/data/mode"),
			ssdWebhook: expect(tdrift.Drifted, "/data/mode"),
		},
	},
	{
		name: "field-removed-from-git",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: configMap},
		},
		desired: `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: settings}
data: {log-level: info}
`,
		flux: fluxCase{want: tdrift.Drifted, wantFields: []string{"/data/mode"}},
		// Argo CD sees nothing: its legacy diff has no last-applied
		// configuration to remove the key from, and its dry run is
		// argocd-controller's, which leaves kustomize-controller's key.
		argo: argoCase{
			legacy:     expect(tdrift.InSync),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
	{
		// The removed field is co-owned by another applier, so the apply
		// keeps it: no drift.
		name: "field-removed-from-git-co-owned",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: configMap},
			{op: opApply, manager: platform, object: `apiVersion: v1
kind: ConfigMap
metadata: {name: settings}
data: {mode: fast}
`},
		},
		desired: `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: settings}
data: {log-level: info}
`,
		flux: fluxCase{want: tdrift.InSync},
		argo: argoCase{
			legacy:     expect(tdrift.InSync),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
	{
		name: "created-by-kubectl-create",
		steps: []step{
			{op: opCreate, manager: "kubectl-create", object: configMap},
		},
		desired: `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: settings}
data: {log-level: info, mode: safe}
`,
		flux: fluxCase{want: tdrift.Drifted, wantFields: []string{"/data/mode"}},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/data/mode"),
			ssd:        expect(tdrift.Drifted, "/data/mode"),
			ssdWebhook: expect(tdrift.Drifted, "/data/mode"),
		},
	},
	{
		name: "ignore-annotation-with-selector",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: annotatedConfigMap},
			{op: opUpdate, manager: "release-bot", object: `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations: {example.com/revision: "7"}
`},
		},
		desired: annotatedConfigMap,
		flux: fluxCase{
			rules: []tdrift.FluxRule{rule("revision", &jsondiff.Selector{Kind: "ConfigMap", Name: "settings"}, revisionAnnotation)},
			want:  tdrift.InSync,
		},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, revisionAnnotation),
			ssd:        expect(tdrift.Drifted, revisionAnnotation),
			ssdWebhook: expect(tdrift.Drifted, revisionAnnotation),
		},
	},
	{
		// The rule hides one of two changed annotations.
		name: "ignore-annotation-without-selector",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: annotatedConfigMap},
			{op: opUpdate, manager: "release-bot", object: `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  annotations: {example.com/revision: "7", example.com/owner: team-b}
`},
		},
		desired: annotatedConfigMap,
		flux: fluxCase{
			rules:      []tdrift.FluxRule{rule("revision", nil, revisionAnnotation)},
			want:       tdrift.Drifted,
			wantFields: []string{"/metadata/annotations/example.com~1owner"},
		},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/metadata/annotations/example.com~1owner", revisionAnnotation),
			ssd:        expect(tdrift.Drifted, "/metadata/annotations/example.com~1owner", revisionAnnotation),
			ssdWebhook: expect(tdrift.Drifted, "/metadata/annotations/example.com~1owner", revisionAnnotation),
		},
	},
	{
		name: "image-changed-in-git",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: deployment},
			{op: opUpdate, manager: hpa, object: scaled},
		},
		desired: strings.Replace(deployment, "web:1.0", "web:1.1", 1),
		flux: fluxCase{
			rules:      []tdrift.FluxRule{rule("hpa", &jsondiff.Selector{Kind: "Deployment"}, "/spec/replicas")},
			want:       tdrift.Drifted,
			wantFields: []string{"/spec/template/spec/containers/0/image"},
		},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/spec/replicas", "/spec/template/spec/containers/0/image"),
			ssd:        expect(tdrift.Drifted, "/spec/replicas", "/spec/template/spec/containers/0/image"),
			ssdWebhook: expect(tdrift.Drifted, "/metadata/generation", "/spec/replicas", "/spec/template/spec/containers/0/image"),
		},
	},
	{
		name:    "not-created-yet",
		desired: deployment,
		flux:    fluxCase{want: tdrift.Missing},
		argo: argoCase{
			legacy:     expect(tdrift.Missing),
			ssd:        expect(tdrift.Missing),
			ssdWebhook: expect(tdrift.Missing),
		},
	},
	{
		name: "secret-rotated",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: secret},
			{op: opUpdate, manager: "secret-rotator", object: `apiVersion: v1
kind: Secret
metadata: {name: credentials}
data: {password: cm90YXRlZA==}
`},
		},
		desired: stringSecret,
		flux:    fluxCase{want: tdrift.Drifted, wantFields: []string{"/data/password"}},
		// In the dry run argocd-controller owns stringData, which the
		// server folds into data: data is nobody's, so without
		// IncludeMutationWebhook the rotated value is taken as desired.
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/data/password"),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.Drifted, "/data/password"),
		},
	},
	{
		// Reapplying stringData is a no-op on the server: the merged
		// object differs from the stored one (stringData) until
		// conversion folds it into data again.
		name: "secret-stringdata-reapplied",
		steps: []step{
			{op: opApply, manager: flux, force: true, object: stringSecret, repeatNextSecond: true},
		},
		wantStored: "data: {username: YWRtaW4=, password: czNjcmV0}\n",
		desired:    stringSecret,
		flux:       fluxCase{want: tdrift.InSync},
		argo: argoCase{
			legacy:     expect(tdrift.InSync),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
	{
		name:    "custom-resource",
		prereqs: widgetCRD,
		steps: []step{
			{op: opApply, manager: flux, force: true, object: widget},
			{op: opUpdate, manager: "widget-operator", object: `apiVersion: drift.truce.dev/v1
kind: Widget
metadata: {name: gadget}
spec: {size: 5}
`},
			{op: opApply, manager: platform, object: `apiVersion: drift.truce.dev/v1
kind: Widget
metadata: {name: gadget}
spec:
  ports:
  - {name: admin, port: 8443}
`},
		},
		wantStored: `
spec:
  size: 5
  mode: auto
  ports:
  - {name: http, port: 80}
  - {name: metrics, port: 9090}
  - {name: admin, port: 8443}
`,
		desired: widget,
		flux:    fluxCase{want: tdrift.Drifted, wantFields: []string{"/spec/size"}},
		// Argo CD's legacy diff merges custom resources with a JSON merge
		// patch: the list the platform team extended differs whole.
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/spec/ports", "/spec/size"),
			ssd:        expect(tdrift.Drifted, "/spec/size"),
			ssdWebhook: expect(tdrift.Drifted, "/metadata/generation", "/spec/size"),
		},
	},
	{
		// Admission overrides a label and a field Git sets, on every
		// write, the dry run included: Flux and Argo CD's server-side diff
		// see no drift there although the stored object differs from Git;
		// the legacy diff (two-way: kubectl create keeps no
		// last-applied-configuration) sees both.
		name:    "mutating-admission-policy",
		prereqs: platformDefaults,
		probe:   platformProbe,
		steps: []step{
			{op: opCreate, manager: "kubectl-create", object: platformDeployment},
			{op: opUpdate, manager: hpa, object: scaled},
		},
		wantStored: `
metadata: {labels: {tier: platform}}
spec: {revisionHistoryLimit: 3}
`,
		desired: platformDeployment,
		flux:    fluxCase{want: tdrift.Drifted, wantFields: []string{"/spec/replicas"}},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/metadata/labels/tier", "/spec/replicas", "/spec/revisionHistoryLimit"),
			ssd:        expect(tdrift.Drifted, "/spec/replicas"),
			ssdWebhook: expect(tdrift.Drifted, "/metadata/generation", "/spec/replicas"),
		},
	},
	{
		// Reapplying what admission overrides is a no-op on the server.
		name:    "mutating-admission-policy-reapplied",
		prereqs: platformDefaults,
		probe:   platformProbe,
		steps: []step{
			{op: opApply, manager: flux, force: true, object: platformDeployment, repeatNextSecond: true},
		},
		wantStored: `
metadata: {labels: {tier: platform}}
spec: {revisionHistoryLimit: 3}
`,
		desired: platformDeployment,
		flux:    fluxCase{want: tdrift.InSync},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/metadata/labels/tier", "/spec/revisionHistoryLimit"),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
	{
		// Argo CD's default sync (client-side apply) of what admission
		// overrides: the legacy three-way diff shows the override of
		// every field Git sets (the endless mutation/self-heal sync), the
		// server-side diff none, with or without IncludeMutationWebhook.
		name:    "mutating-admission-policy-argocd-sync",
		prereqs: platformDefaults,
		probe:   platformProbe,
		steps: []step{
			{op: opClientApply, manager: argo, object: platformDeployment},
		},
		wantStored: `
metadata: {labels: {tier: platform}}
spec: {revisionHistoryLimit: 3}
`,
		desired: platformDeployment,
		flux:    fluxCase{want: tdrift.InSync},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/metadata/labels/tier", "/spec/revisionHistoryLimit"),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
	{
		// Git opts the live object in to the policy: the dry run now
		// adds a label and rewrites a defaulted field, neither of which
		// Git sets. Without IncludeMutationWebhook they take their live
		// value (nobody owns them in the dry run); with it they show.
		name:    "mutating-admission-policy-opt-in",
		prereqs: platformDefaults,
		probe:   platformProbe,
		steps: []step{
			{op: opApply, manager: argo, force: true, object: deployment},
		},
		wantStored: "spec: {revisionHistoryLimit: 10}\n",
		desired:    optInDeployment,
		flux: fluxCase{want: tdrift.Drifted, wantFields: []string{
			optInLabel, "/metadata/labels/tier", "/spec/revisionHistoryLimit",
		}},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, optInLabel),
			ssd:        expect(tdrift.Drifted, optInLabel),
			ssdWebhook: expect(tdrift.Drifted, "/metadata/generation", optInLabel, "/metadata/labels/tier", "/spec/revisionHistoryLimit"),
		},
	},
	{
		// Argo CD's default sync, then an HPA: every tool sees replicas.
		name: "argocd-sync-hpa-takes-replicas",
		steps: []step{
			{op: opClientApply, manager: argo, object: deployment},
			{op: opUpdate, manager: hpa, object: scaled},
		},
		desired: deployment,
		flux:    fluxCase{want: tdrift.Drifted, wantFields: []string{"/spec/replicas"}},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/spec/replicas"),
			ssd:        expect(tdrift.Drifted, "/spec/replicas"),
			ssdWebhook: expect(tdrift.Drifted, "/metadata/generation", "/spec/replicas"),
		},
	},
	{
		// A label Git does not mention is not drift for anyone.
		name: "argocd-sync-label-added",
		steps: []step{
			{op: opClientApply, manager: argo, object: configMap},
			{op: opUpdate, manager: "kubectl-label", object: `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {env: prod}
`},
		},
		desired: configMap,
		flux:    fluxCase{want: tdrift.InSync},
		argo: argoCase{
			legacy:     expect(tdrift.InSync),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
	{
		// A key removed from Git after a client-side sync: the legacy
		// diff deletes it (it is in the last-applied configuration); a
		// server-side apply by the same manager keeps it, since the
		// client-side sync's entry (operation Update) still owns it.
		name: "argocd-sync-field-removed-from-git",
		steps: []step{
			{op: opClientApply, manager: argo, object: configMap},
		},
		desired: `apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  labels: {app: settings}
data: {log-level: info}
`,
		flux: fluxCase{want: tdrift.InSync},
		argo: argoCase{
			legacy:     expect(tdrift.Drifted, "/data/mode"),
			ssd:        expect(tdrift.InSync),
			ssdWebhook: expect(tdrift.InSync),
		},
	},
}
