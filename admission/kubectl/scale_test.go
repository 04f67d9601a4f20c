package kubectl_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/admission/kubectl"
)

// scaleCluster holds one object of every kind with a scale subresource,
// a policy limiting each to 3 replicas, and kinds without one.
const scaleCluster = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-scale}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ["", apps, example.com]
      apiVersions: ["*"]
      operations: [UPDATE]
      resources: [statefulsets/scale, replicasets/scale, replicationcontrollers/scale, widgets/scale]
  validations:
  - {expression: "object.kind == 'Scale' && object.spec.replicas <= 3", messageExpression: "'at most 3 replicas, was ' + string(oldObject.spec.replicas) + ' selector ' + oldObject.status.selector"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-scale}
spec: {policyName: max-scale, validationActions: [Deny]}
---
apiVersion: apps/v1
kind: StatefulSet
metadata:
  name: db
  namespace: default
  managedFields:
  - {manager: creator, operation: Update, apiVersion: apps/v1, time: "2026-01-01T00:00:00Z", fieldsType: FieldsV1, fieldsV1: {f:spec: {f:replicas: {}}}}
spec:
  replicas: 2
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec: {containers: [{name: db, image: postgres}]}
---
apiVersion: apps/v1
kind: ReplicaSet
metadata: {name: rs, namespace: default}
spec:
  replicas: 1
  selector: {matchLabels: {app: rs}}
  template:
    metadata: {labels: {app: rs}}
    spec: {containers: [{name: rs, image: nginx}]}
---
apiVersion: v1
kind: ReplicationController
metadata:
  name: rc
  namespace: default
  managedFields:
  - {manager: creator, operation: Update, apiVersion: v1, time: "2026-01-01T00:00:00Z", fieldsType: FieldsV1, fieldsV1: {f:spec: {f:replicas: {}}}}
spec:
  replicas: 2
  selector: {app: rc}
  template:
    metadata: {labels: {app: rc}}
    spec: {containers: [{name: rc, image: nginx}]}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList}
  versions:
  - name: v1
    served: true
    storage: true
    subresources:
      scale: {specReplicasPath: .spec.size, statusReplicasPath: .status.ready, labelSelectorPath: .status.selector}
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, maximum: 10}
          status:
            type: object
            properties:
              ready: {type: integer}
              selector: {type: string}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.example.com}
spec:
  group: example.com
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: example.com/v1
kind: Widget
metadata:
  name: w
  namespace: default
  managedFields:
  - {manager: creator, operation: Update, apiVersion: example.com/v1, time: "2026-01-01T00:00:00Z", fieldsType: FieldsV1, fieldsV1: {f:spec: {f:size: {}}}}
spec: {size: 2}
status: {ready: 1, selector: app=w}
---
apiVersion: example.com/v1
kind: Widget
metadata: {name: unsized, namespace: default}
spec: {}
---
apiVersion: example.com/v1
kind: Gadget
metadata: {name: g, namespace: default}
spec: {size: 2}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: cm, namespace: default}
`

func TestAdmitScale(t *testing.T) {
	state, err := admission.NewState(objects(t, scaleCluster)...)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := admission.NewChain(context.Background(), state, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	ref := func(apiVersion, kind, name string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		u.SetName(name)
		u.SetNamespace("default")
		return u
	}
	current := func(n int32) *int32 { return &n }
	tests := []struct {
		name            string
		obj             *unstructured.Unstructured
		replicas        int32
		currentReplicas *int32
		// want: allowed and values of the answered Scale, or the code,
		// reason and message of a denial.
		allowed bool
		values  map[string]string
		// stored are values of the parent the server would store.
		stored  map[string]string
		code    int32
		reason  string
		message string
	}{
		{name: "statefulset over the limit", obj: ref("apps/v1", "StatefulSet", "db"), replicas: 5,
			code: 422, message: "at most 3 replicas, was 2 selector app=db"},
		{name: "statefulset within the limit", obj: ref("apps/v1", "StatefulSet", "db"), replicas: 3, allowed: true,
			values: map[string]string{"kind": "Scale", "spec.replicas": "3", "status.selector": "app=db", "metadata.name": "db"},
			stored: map[string]string{"kind": "StatefulSet", "spec.replicas": "3"}},
		{name: "replicaset", obj: ref("apps/v1", "ReplicaSet", "rs"), replicas: 2, allowed: true,
			values: map[string]string{"spec.replicas": "2", "status.selector": "app=rs"},
			stored: map[string]string{"spec.replicas": "2"}},
		{name: "replicationcontroller's selector is a map", obj: ref("v1", "ReplicationController", "rc"), replicas: 4,
			code: 422, message: "was 2 selector app=rc"},
		{name: "custom resource through its paths", obj: ref("example.com/v1", "Widget", "w"), replicas: 3, allowed: true,
			values: map[string]string{"spec.replicas": "3", "status.replicas": "1", "status.selector": "app=w"},
			stored: map[string]string{"kind": "Widget", "spec.size": "3", "status.ready": "1"}},
		{name: "custom resource over the policy", obj: ref("example.com/v1", "Widget", "w"), replicas: 4,
			code: 422, message: "at most 3 replicas, was 2 selector app=w"},
		{name: "custom resource's schema validates the replicas", obj: ref("example.com/v1", "Widget", "unsized"), replicas: 11,
			code: 422, reason: "Invalid", message: "spec.size"},
		{name: "custom resource without spec replicas is read as the CR GET answers", obj: ref("example.com/v1", "Widget", "unsized"), replicas: 1,
			currentReplicas: current(0), code: 500, message: `the spec replicas field ".spec.size" does not exist`},
		{name: "custom resource without a scale subresource", obj: ref("example.com/v1", "Gadget", "g"), replicas: 1,
			code: 404, reason: "NotFound", message: `gadgets.example.com "g" not found`},
		{name: "built-in without a scale subresource", obj: ref("v1", "ConfigMap", "cm"), replicas: 1,
			code: 404, reason: "NotFound", message: "the server could not find the requested resource"},
		{name: "missing object", obj: ref("apps/v1", "StatefulSet", "gone"), replicas: 1,
			code: 404, message: `statefulsets.apps "gone" not found`},
		{name: "current replicas match: a PUT of the Scale", obj: ref("apps/v1", "StatefulSet", "db"), replicas: 1, currentReplicas: current(2),
			allowed: true, values: map[string]string{"spec.replicas": "1"}},
		{name: "current replicas mismatch: kubectl sends nothing", obj: ref("apps/v1", "StatefulSet", "db"), replicas: 1, currentReplicas: current(3),
			reason: admission.PreconditionFailedReason, message: "Expected replicas to be 3, was 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := kubectl.Admit(context.Background(), chain, "test", tt.obj,
				kubectl.Options{Verb: kubectl.Scale, Replicas: tt.replicas, CurrentReplicas: tt.currentReplicas})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != tt.allowed || res.Code != tt.code {
				t.Fatalf("allowed %v, code %d (%s %s); want allowed %v, code %d", res.Allowed, res.Code, res.Reason, res.Message, tt.allowed, tt.code)
			}
			if tt.reason != "" && res.Reason != tt.reason {
				t.Errorf("reason %q, want %q", res.Reason, tt.reason)
			}
			if !strings.Contains(res.Message, tt.message) {
				t.Errorf("message %q, want it to contain %q", res.Message, tt.message)
			}
			if res.Operation != admission.Update || res.Kind != "Scale" || res.APIVersion != "autoscaling/v1" {
				t.Errorf("answered %s %s %s, want an UPDATE of an autoscaling/v1 Scale", res.Operation, res.APIVersion, res.Kind)
			}
			check := func(what string, obj map[string]any, want map[string]string) {
				for path, w := range want {
					got, _, _ := unstructured.NestedFieldNoCopy(obj, splitPath(path)...)
					if s := strings.TrimSpace(toString(got)); s != w {
						t.Errorf("%s %s = %q, want %q", what, path, s, w)
					}
				}
			}
			check("scale", res.Object, tt.values)
			check("stored", res.Stored, tt.stored)
		})
	}
}

// TestScaleManagedFields: the replicas written through the scale
// subresource are recorded on the parent's spec replicas path, for the
// writer, as the ScaleHandler maps them (the objects were created with
// managedFields, as the server records them: without any, the server
// tracks no update either).
func TestScaleManagedFields(t *testing.T) {
	state, err := admission.NewState(objects(t, scaleCluster)...)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := admission.NewChain(context.Background(), state, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	for _, tt := range []struct {
		apiVersion, kind, name string
		replicas               int32
		field                  string
	}{
		{"apps/v1", "StatefulSet", "db", 1, "f:replicas"},
		{"v1", "ReplicationController", "rc", 1, "f:replicas"},
		{"example.com/v1", "Widget", "w", 1, "f:size"},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			obj := &unstructured.Unstructured{}
			obj.SetAPIVersion(tt.apiVersion)
			obj.SetKind(tt.kind)
			obj.SetName(tt.name)
			obj.SetNamespace("default")
			res, err := kubectl.Admit(context.Background(), chain, "test", obj, kubectl.Options{Verb: kubectl.Scale, Replicas: tt.replicas})
			if err != nil || !res.Allowed {
				t.Fatalf("%v %+v", err, res)
			}
			parent := unstructured.Unstructured{Object: res.Stored}
			var found bool
			for _, e := range parent.GetManagedFields() {
				if e.Manager != kubectl.ScaleManager || e.Subresource != "scale" || e.FieldsV1 == nil {
					continue
				}
				found = strings.Contains(e.FieldsV1.GetRawString(), `"`+tt.field+`"`) && strings.Contains(e.FieldsV1.GetRawString(), `"f:spec"`)
			}
			if !found {
				t.Errorf("no scale entry of %s owning spec.%s: %+v", kubectl.ScaleManager, strings.TrimPrefix(tt.field, "f:"), parent.GetManagedFields())
			}
		})
	}
}
