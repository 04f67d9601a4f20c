package admission_test

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
)

func TestKubectlFieldManager(t *testing.T) {
	for op, want := range map[admission.Operation]string{admission.Create: "kubectl-create", admission.Update: "kubectl-replace"} {
		if got := admission.KubectlFieldManager(op); got != want {
			t.Errorf("KubectlFieldManager(%s) = %q, want %q", op, got, want)
		}
	}
}

// entries renders managedFields as "manager/operation: fields", in order.
func entries(t *testing.T, obj map[string]any) []string {
	t.Helper()
	var out []string
	for _, e := range (&unstructured.Unstructured{Object: obj}).GetManagedFields() {
		fields := ""
		if e.FieldsV1 != nil {
			fields = e.FieldsV1.GetRawString()
		}
		out = append(out, e.Manager+"/"+string(e.Operation)+": "+fields)
	}
	return out
}

func TestManagedFieldsOfWrites(t *testing.T) {
	const cmOld = `
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: mf, labels: {app: web}}
data: {key: old}`
	const cmNew = `
apiVersion: v1
kind: ConfigMap
metadata: {name: app, namespace: mf, labels: {app: web}}
data: {key: new}`
	const cmApplied = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app
  namespace: mf
  labels: {app: web}
  managedFields:
  - manager: gitops-controller
    operation: Apply
    apiVersion: v1
    fieldsType: FieldsV1
    fieldsV1: {"f:data": {"f:key": {}}, "f:metadata": {"f:labels": {"f:app": {}}}}
data: {key: old}`
	const crd = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.mf.truce.dev}
spec:
  group: mf.truce.dev
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
              color: {type: string}
              size: {type: integer, default: 3}`
	tests := []struct {
		name         string
		stateManager string
		cluster      []string
		write        string
		fieldManager string
		want         []string
	}{{
		name:         "a create records its writer",
		cluster:      []string{namespace("mf")},
		write:        cmNew,
		fieldManager: "kubectl-create",
		want:         []string{`kubectl-create/Update: {"f:data":{".":{},"f:key":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`},
	}, {
		name:         "an update of a state object: its creator's entry and the writer's",
		stateManager: "kubectl-create",
		cluster:      []string{namespace("mf"), cmOld},
		write:        cmNew,
		fieldManager: "kubectl-replace",
		want: []string{
			`kubectl-create/Update: {"f:data":{},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`,
			`kubectl-replace/Update: {"f:data":{"f:key":{}}}`,
		},
	}, {
		name:         "without a state manager, as for objects stored before fields were tracked: none",
		cluster:      []string{namespace("mf"), cmOld},
		write:        cmNew,
		fieldManager: "kubectl-replace",
	}, {
		name:         "the state's own entries are kept and updated",
		stateManager: "kubectl-create",
		cluster:      []string{namespace("mf"), cmApplied},
		write:        cmNew,
		fieldManager: "kubectl-replace",
		want: []string{
			`gitops-controller/Apply: {"f:metadata":{"f:labels":{"f:app":{}}}}`,
			`kubectl-replace/Update: {"f:data":{"f:key":{}}}`,
		},
	}, {
		name:         "an update that changes nothing adds no entry",
		stateManager: "kubectl-create",
		cluster:      []string{namespace("mf"), cmOld},
		write:        cmOld,
		fieldManager: "kubectl-replace",
		want:         []string{`kubectl-create/Update: {"f:data":{".":{},"f:key":{}},"f:metadata":{"f:labels":{".":{},"f:app":{}}}}`},
	}, {
		name:         "an update of a custom resource, defaults included in the creator's fields",
		stateManager: "kubectl-create",
		cluster: []string{namespace("mf"), crd, `
apiVersion: mf.truce.dev/v1
kind: Widget
metadata: {name: w, namespace: mf, labels: {app: web}}
spec: {color: blue}`},
		write: `
apiVersion: mf.truce.dev/v1
kind: Widget
metadata: {name: w, namespace: mf, labels: {app: web}}
spec: {color: green}`,
		fieldManager: "kubectl-replace",
		want: []string{
			`kubectl-create/Update: {"f:metadata":{"f:labels":{".":{},"f:app":{}}},"f:spec":{".":{},"f:size":{}}}`,
			`kubectl-replace/Update: {"f:spec":{"f:color":{}}}`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newChain(t, admission.Options{StateFieldManager: tt.stateManager}, tt.cluster...)
			res := admit(t, c, admission.Request{Object: object(t, tt.write), FieldManager: tt.fieldManager})
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			if got := entries(t, res.Object); strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("managedFields:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

// TestWebhooksSeeManagedFields checks that both kinds of webhook get the
// object with the managedFields of the write, on CREATE and on UPDATE.
func TestWebhooksSeeManagedFields(t *testing.T) {
	ca := newTestCA(t, "truce-test-ca", []string{webhookService + "." + webhookNamespace + ".svc"}, []net.IP{net.ParseIP("127.0.0.1")})
	record := func(*admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse { return allow() }
	ws := newWebhookServer(t, ca, map[string]reviewFunc{"/mutate": record, "/validate": record})
	svc := func(path string) string { return "service:" + webhookService + ":" + path }
	cluster := []string{namespace(webhookNamespace), namespace("mf"),
		cmWith("existing", "mf", map[string]string{"k": "old"}, nil), `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: mutate}
webhooks:` + webhook("mutate.example.com", svc("/mutate"), "mf", "", ca.caPEM), `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: validate}
webhooks:` + webhook("validate.example.com", svc("/validate"), "mf", "", ca.caPEM)}
	c := newChain(t, admission.Options{
		WebhookEndpoints:  admission.WebhookEndpoints{webhookNamespace + "/" + webhookService: ws.URL},
		StateFieldManager: admission.KubectlCreate,
	}, cluster...)
	for _, tc := range []struct {
		write string
		op    admission.Operation
		want  []string
	}{
		{cmWith("new", "mf", map[string]string{"k": "v"}, nil), admission.Create, []string{"kubectl-create"}},
		{cmWith("existing", "mf", map[string]string{"k": "new"}, nil), admission.Update, []string{"kubectl-create", "kubectl-replace"}},
	} {
		obj := object(t, tc.write)
		op, err := c.Operation(obj)
		if err != nil || op != tc.op {
			t.Fatalf("Operation(%s) = %s, %v; want %s", obj.GetName(), op, err, tc.op)
		}
		res := admit(t, c, admission.Request{Object: obj, FieldManager: admission.KubectlFieldManager(op)})
		if !res.Allowed {
			t.Fatalf("%s denied: %s", tc.op, res.Message)
		}
		for _, path := range []string{"/mutate", "/validate"} {
			calls := ws.calls(path)
			if len(calls) == 0 {
				t.Fatalf("%s: %s not called", tc.op, path)
			}
			var seen metav1.PartialObjectMetadata
			if err := json.Unmarshal(calls[len(calls)-1].Request.Object.Raw, &seen); err != nil {
				t.Fatal(err)
			}
			var managers []string
			for _, e := range seen.ManagedFields {
				managers = append(managers, e.Manager)
			}
			if strings.Join(managers, ",") != strings.Join(tc.want, ",") {
				t.Errorf("%s: %s saw managers %q, want %q", tc.op, path, managers, tc.want)
			}
		}
	}
}
