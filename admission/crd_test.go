package admission_test

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
)

// CustomResourceDefinitions are served by the apiextensions-apiserver: its
// scheme decodes and defaults them, its registry strategy prepares and
// validates them, and admission sees them typed.

const gadgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.com
spec:
  group: example.com
  names: {plural: gadgets, kind: Gadget}
  scope: Namespaced
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
`

// crdStatusAtCreate is the status PrepareForCreate leaves: the storage
// version recorded, no names accepted and no conditions yet (the server's
// controllers set those after the write).
var crdStatusAtCreate = map[string]any{
	"acceptedNames":  map[string]any{"kind": "", "plural": ""},
	"conditions":     nil,
	"storedVersions": []any{"v1"},
}

func TestCustomResourceDefinitionWrites(t *testing.T) {
	t.Run("create", func(t *testing.T) {
		c := newChain(t, admission.Options{})
		runTable(t, c, []entry{{
			name: "v1 defaults and the strategy's status",
			write: gadgetCRD + `
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {name: conv, namespace: default}
`,
			want: want{allowed: true, fields: map[string]any{
				"/spec/names":          map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "listKind": "GadgetList"},
				"/spec/conversion":     yamlValue(t, `{strategy: Webhook, webhook: {conversionReviewVersions: [v1], clientConfig: {service: {name: conv, namespace: default, port: 443}}}}`),
				"/status":              crdStatusAtCreate,
				"/metadata/generation": 1,
			}},
		}, {
			name:  "conversion strategy None by default",
			write: gadgetCRD,
			want: want{allowed: true, fields: map[string]any{
				"/spec/conversion": map[string]any{"strategy": "None"},
				"/status":          crdStatusAtCreate,
			}},
		}, {
			name:  "warnings of the strategy",
			write: strings.Replace(gadgetCRD, "size: {type: integer}", "size: {type: integer, format: bogus}", 1),
			want: want{allowed: true, warnings: []string{`unrecognized format "bogus"`}, fields: map[string]any{
				"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size": map[string]any{"type": "integer", "format": "bogus"},
			}},
		}, {
			name:  "validation of the strategy",
			write: strings.Replace(gadgetCRD, "name: gadgets.example.com", "name: widgets.example.com", 1),
			want: want{
				code: 422, reason: "Invalid",
				message: `CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid: metadata.name: Invalid value: "widgets.example.com": must be spec.names.plural+"."+spec.group`,
			},
		}, {
			name:  "strict decoding",
			write: strings.Replace(gadgetCRD, "  scope: Namespaced\n", "  scope: Namespaced\n  bogus: 1\n", 1),
			want: want{
				code: 400, reason: "BadRequest",
				message: `CustomResourceDefinition in version "v1" cannot be handled as a CustomResourceDefinition: strict decoding error: unknown field "spec.bogus"`,
			},
		}})
	})

	t.Run("update", func(t *testing.T) {
		c := newChain(t, admission.Options{}, gadgetCRD+`
  conversion: {strategy: None}
`)
		runTable(t, c, []entry{{
			name:  "a spec change bumps the generation; status is the stored one",
			write: strings.Replace(gadgetCRD, "size: {type: integer}", "size: {type: integer, minimum: 1}", 1) + "status: {storedVersions: [v1, v0]}\n",
			want: want{op: admission.Update, allowed: true, fields: map[string]any{
				"/metadata/generation": 2,
				"/spec/versions/0/schema/openAPIV3Schema/properties/spec/properties/size": map[string]any{"type": "integer", "minimum": 1},
				"/status": crdStatusAtCreate,
			}},
		}, {
			name:  "the scope of a CRD whose names are not established yet can change",
			write: strings.Replace(gadgetCRD, "scope: Namespaced", "scope: Cluster", 1),
			want:  want{op: admission.Update, allowed: true, fields: map[string]any{"/spec/scope": "Cluster"}},
		}, {
			name:  "the group is immutable",
			write: strings.Replace(gadgetCRD, "group: example.com", "group: example.org", 1),
			want: want{
				op: admission.Update, code: 422, reason: "Invalid",
				message: `CustomResourceDefinition.apiextensions.k8s.io "gadgets.example.com" is invalid: spec.group: Invalid value: "example.org": field is immutable`,
			},
		}})
	})

	t.Run("update of an established CRD", func(t *testing.T) {
		// A snapshot of a live CRD: the server's controllers accepted its
		// names and established it; the status is kept as observed.
		c := newChain(t, admission.Options{}, gadgetCRD+`
  conversion: {strategy: None}
status:
  acceptedNames: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  storedVersions: [v1]
  conditions:
  - {type: NamesAccepted, status: "True", reason: NoConflicts, message: no conflicts found, lastTransitionTime: "2026-01-01T00:00:00Z"}
  - {type: Established, status: "True", reason: InitialNamesAccepted, message: the initial names have been accepted, lastTransitionTime: "2026-01-01T00:00:00Z"}
`)
		runTable(t, c, []entry{{
			name:  "the scope is immutable",
			write: strings.Replace(gadgetCRD, "scope: Namespaced", "scope: Cluster", 1),
			want: want{
				op: admission.Update, code: 422, reason: "Invalid",
				message: `CustomResourceDefinition.apiextensions.k8s.io "gadgets.example.com" is invalid: spec.scope: Invalid value: "Cluster": field is immutable`,
			},
		}, {
			name:  "a label keeps the generation and the observed status",
			write: strings.Replace(gadgetCRD, "  name: gadgets.example.com\n", "  name: gadgets.example.com\n  labels: {team: blue}\n", 1),
			want: want{op: admission.Update, allowed: true, fields: map[string]any{
				"/metadata/generation":                    1,
				"/metadata/labels":                        map[string]any{"team": "blue"},
				"/status/acceptedNames/plural":            "gadgets",
				"/status/conditions/1/type":               "Established",
				"/status/conditions/1/lastTransitionTime": "2026-01-01T00:00:00Z",
			}},
		}})
	})

	t.Run("admission sees typed CRDs", func(t *testing.T) {
		c := newChain(t, admission.Options{}, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: crd-groups}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [apiextensions.k8s.io]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [customresourcedefinitions]
  validations:
  - expression: object.spec.group.endsWith('.com') && object.spec.conversion.strategy == 'None'
    message: only .com groups without conversion
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: crd-groups}
spec:
  policyName: crd-groups
  validationActions: [Deny]
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: crd-label}
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [apiextensions.k8s.io]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [customresourcedefinitions]
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{metadata: Object.metadata{labels: {"owner": object.spec.names.singular}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: crd-label}
spec:
  policyName: crd-label
`)
		runTable(t, c, []entry{{
			name:  "a mutating policy reads the defaulted object and labels it",
			write: gadgetCRD,
			want: want{allowed: true, fields: map[string]any{
				"/metadata/labels":       map[string]any{"owner": "gadget"},
				"/spec/names/singular":   "gadget",
				"/spec/conversion":       map[string]any{"strategy": "None"},
				"/metadata/generation":   1,
				"/status/storedVersions": []any{"v1"},
			}, changes: []admission.Change{{Path: "/metadata/labels", By: mapBy("crd-label", "crd-label"), Round: 0}}},
		}, {
			name:  "a validating policy denies",
			write: strings.Replace(strings.Replace(gadgetCRD, "group: example.com", "group: example.org", 1), "name: gadgets.example.com", "name: gadgets.example.org", 1),
			want: want{
				code: 422, reason: "Invalid",
				message: `customresourcedefinitions.apiextensions.k8s.io "gadgets.example.org" is forbidden: ValidatingAdmissionPolicy 'crd-groups' with binding 'crd-groups' denied request: only .com groups without conversion`,
			},
		}})
	})
}
