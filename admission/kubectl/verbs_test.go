package kubectl_test

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/admission/kubectl"
)

func objects(t testing.TB, doc string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range strings.Split(doc, "\n---\n") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			t.Fatalf("%v\n%s", err, d)
		}
		out = append(out, u)
	}
	return out
}

const configMap = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: web
  namespace: default
  labels: {operator: added}
  annotations:
    kubectl.kubernetes.io/last-applied-configuration: '{"apiVersion":"v1","data":{"a":"1","gone":"x"},"kind":"ConfigMap","metadata":{"annotations":{},"name":"web","namespace":"default"}}'
  managedFields:
  - manager: operator
    operation: Update
    apiVersion: v1
    time: "2026-01-01T00:00:00Z"
    fieldsType: FieldsV1
    fieldsV1:
      f:data: {f:a: {}, f:operator-key: {}}
data: {a: "1", gone: x, operator-key: x}
`

const gitConfigMap = `
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: default}
data: {a: "2"}
`

const policies = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-scale}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [UPDATE], resources: [deployments/scale]}
  validations:
  - {expression: "object.kind == 'Scale' && object.spec.replicas <= 3", message: at most 3 replicas}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-scale}
spec: {policyName: max-scale, validationActions: [Deny]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-exec}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CONNECT], resources: [pods/exec]}
  validations:
  - {expression: "object.container != 'app'", message: no exec into app}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-exec}
spec: {policyName: no-exec, validationActions: [Deny]}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec:
  replicas: 2
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
---
apiVersion: v1
kind: Pod
metadata:
  name: shell
  namespace: default
  annotations: {kubectl.kubernetes.io/default-container: app}
  finalizers: [example.com/keep]
spec: {containers: [{name: sidecar, image: busybox}, {name: app, image: busybox}]}
`

func TestAdmitVerbs(t *testing.T) {
	state, err := admission.NewState(objects(t, configMap+"\n---\n"+policies)...)
	if err != nil {
		t.Fatal(err)
	}
	chain, err := admission.NewChain(context.Background(), state, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	deployment := objects(t, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: default}")[0]
	pod := objects(t, "apiVersion: v1\nkind: Pod\nmetadata: {name: shell, namespace: default}")[0]
	newConfigMap := objects(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: new, namespace: default}\ndata: {a: '1'}")[0]

	tests := []struct {
		name string
		obj  *unstructured.Unstructured
		opts kubectl.Options
		// want: allowed, operation, and the values at paths of the
		// answer ("" means absent); code and message for denials.
		allowed bool
		op      admission.Operation
		values  map[string]string
		code    int32
		message string
	}{
		{name: "apply keeps others' fields, drops what Git removed", obj: objects(t, gitConfigMap)[0], opts: kubectl.Options{Verb: kubectl.Apply},
			allowed: true, op: admission.Update, values: map[string]string{"data.a": "2", "data.gone": "", "data.operator-key": "x", "metadata.labels.operator": "added",
				"metadata.annotations.kubectl\\.kubernetes\\.io/last-applied-configuration": `{"apiVersion":"v1","data":{"a":"2"},"kind":"ConfigMap","metadata":{"annotations":{},"name":"web","namespace":"default"}}` + "\n"}},
		{name: "apply creates with the annotation", obj: newConfigMap, opts: kubectl.Options{Verb: kubectl.Apply},
			allowed: true, op: admission.Create, values: map[string]string{"data.a": "1"}},
		{name: "replace drops others' fields", obj: objects(t, gitConfigMap)[0], opts: kubectl.Options{Verb: kubectl.Replace},
			allowed: true, op: admission.Update, values: map[string]string{"data.a": "2", "data.operator-key": "", "metadata.labels.operator": ""}},
		{name: "server-side apply conflicts with the owner", obj: objects(t, gitConfigMap)[0], opts: kubectl.Options{Verb: kubectl.ServerSideApply, FieldManager: "gitops"},
			code: 409, message: `conflict with "operator"`},
		{name: "server-side apply forced", obj: objects(t, gitConfigMap)[0], opts: kubectl.Options{Verb: kubectl.ServerSideApply, FieldManager: "gitops", ForceConflicts: true},
			allowed: true, op: admission.Update, values: map[string]string{"data.a": "2", "data.gone": "x"}},
		{name: "merge patch", obj: objects(t, gitConfigMap)[0], opts: kubectl.Options{Verb: kubectl.PatchVerb, PatchType: types.MergePatchType, Patch: []byte(`{"data":{"gone":null}}`)},
			allowed: true, op: admission.Update, values: map[string]string{"data.a": "1", "data.gone": ""}},
		{name: "failing JSON patch", obj: objects(t, gitConfigMap)[0], opts: kubectl.Options{Verb: kubectl.PatchVerb, PatchType: types.JSONPatchType, Patch: []byte(`[{"op":"test","path":"/data/a","value":"9"}]`)},
			code: 422},
		{name: "patch of a missing object", obj: newConfigMap, opts: kubectl.Options{Verb: kubectl.PatchVerb, Patch: []byte(`{"data":{"a":"2"}}`)},
			code: 404},
		{name: "scale over the limit", obj: deployment, opts: kubectl.Options{Verb: kubectl.Scale, Replicas: 5},
			code: 422, message: "at most 3 replicas"},
		{name: "scale within the limit answers the Scale", obj: deployment, opts: kubectl.Options{Verb: kubectl.Scale, Replicas: 3},
			allowed: true, op: admission.Update, values: map[string]string{"kind": "Scale", "spec.replicas": "3", "status.selector": "app=web"}},
		{name: "exec into kubectl's default container", obj: pod, opts: kubectl.Options{Verb: kubectl.Exec, Command: []string{"sh"}},
			code: 422, message: "no exec into app"},
		{name: "exec into another container", obj: pod, opts: kubectl.Options{Verb: kubectl.Exec, Container: "sidecar", Command: []string{"sh"}},
			allowed: true, op: admission.Connect},
		{name: "delete", obj: deployment, opts: kubectl.Options{Verb: kubectl.Delete},
			allowed: true, op: admission.Delete},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := kubectl.Admit(context.Background(), chain, "test", tt.obj, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != tt.allowed || (!tt.allowed && res.Code != tt.code) || (tt.allowed && res.Operation != tt.op) {
				t.Fatalf("allowed %v, code %d, operation %s (%s); want allowed %v, code %d, operation %s", res.Allowed, res.Code, res.Operation, res.Message, tt.allowed, tt.code, tt.op)
			}
			if !strings.Contains(res.Message, tt.message) {
				t.Errorf("message %q, want it to contain %q", res.Message, tt.message)
			}
			for path, want := range tt.values {
				got, _, _ := unstructured.NestedFieldNoCopy(res.Object, splitPath(path)...)
				s := ""
				if got != nil {
					s = strings.TrimSpace(toString(got))
					want = strings.TrimSpace(want)
				}
				if s != want {
					t.Errorf("%s = %q, want %q", path, s, want)
				}
			}
		})
	}
}

// TestApplyTwiceIsUnchanged: kubectl apply of what was applied last sends
// nothing.
func TestApplyTwiceIsUnchanged(t *testing.T) {
	state, err := admission.NewState()
	if err != nil {
		t.Fatal(err)
	}
	chain, err := admission.NewChain(context.Background(), state, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(chain.Close)
	for i, wantNote := range []bool{false, true} {
		res, err := kubectl.Admit(context.Background(), chain, "test", objects(t, gitConfigMap)[0], kubectl.Options{})
		if err != nil || !res.Allowed {
			t.Fatalf("apply %d: %v %+v", i, err, res)
		}
		if got := len(res.Notes) > 0 && strings.Contains(res.Notes[0], "unchanged"); got != wantNote {
			t.Errorf("apply %d: unchanged note %v, want %v (%v)", i, got, wantNote, res.Notes)
		}
		if _, err := chain.Commit(res); err != nil {
			t.Fatal(err)
		}
	}
}

func splitPath(p string) []string {
	var out []string
	var cur strings.Builder
	for i := 0; i < len(p); i++ {
		switch {
		case p[i] == '\\' && i+1 < len(p):
			i++
			cur.WriteByte(p[i])
		case p[i] == '.':
			out = append(out, cur.String())
			cur.Reset()
		default:
			cur.WriteByte(p[i])
		}
	}
	return append(out, cur.String())
}

func toString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	default:
		b, _ := yaml.Marshal(x)
		return string(b)
	}
}

// FuzzPatch: any patch of any type is answered (admitted, or a status as
// the server answers), never a panic nor an evaluation error.
func FuzzPatch(f *testing.F) {
	state, err := admission.NewState(objects(f, configMap)...)
	if err != nil {
		f.Fatal(err)
	}
	chain, err := admission.NewChain(context.Background(), state, admission.Options{})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(chain.Close)
	target := objects(f, gitConfigMap)[0]
	for _, seed := range []struct {
		pt    uint8
		patch string
	}{
		{0, `{"data":{"a":"2"}}`}, {0, `{"$patch":"replace"}`}, {0, `{"metadata":{"$deleteFromPrimitiveList/finalizers":["x"]}}`},
		{1, `{"data":null}`}, {1, `[]`}, {2, `[{"op":"add","path":"/data/z","value":"1"}]`}, {2, `[{"op":"move","from":"/data","path":"/data/x"}]`},
		{2, `{}`}, {1, `{"kind":"Secret"}`}, {0, `{"metadata":{"name":"other"}}`},
	} {
		f.Add(seed.pt, seed.patch)
	}
	pts := []types.PatchType{types.StrategicMergePatchType, types.MergePatchType, types.JSONPatchType}
	f.Fuzz(func(t *testing.T, pt uint8, patch string) {
		res, err := kubectl.Admit(context.Background(), chain, "fuzz", target.DeepCopy(), kubectl.Options{
			Verb: kubectl.PatchVerb, PatchType: pts[int(pt)%len(pts)], Patch: []byte(patch)})
		if err != nil {
			t.Fatalf("patch %q: %v", patch, err)
		}
		if !res.Allowed && res.Code == 0 {
			t.Fatalf("patch %q: denied without a status code: %+v", patch, res)
		}
	})
}
