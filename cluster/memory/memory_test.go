package memory

import (
	"context"
	"reflect"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
)

func object(t *testing.T, y string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(y), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

func newCluster(t *testing.T, objs ...*unstructured.Unstructured) *Cluster {
	t.Helper()
	state, err := admission.NewState(objs...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(context.Background(), state, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

const deployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
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
        image: nginx:1.27
`

func managers(u *unstructured.Unstructured) map[string]string {
	out := map[string]string{}
	for _, m := range u.GetManagedFields() {
		out[m.Manager] = string(m.Operation)
	}
	return out
}

func TestApplyTracksOwnershipAndSkipsNoOps(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	apply := cluster.ApplyOptions{FieldManager: "kustomize-controller"}
	first, err := c.Apply(ctx, object(t, deployment), apply)
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(first); got["kustomize-controller"] != "Apply" || len(got) != 1 {
		t.Fatalf("managers after apply = %v", got)
	}
	if first.GetResourceVersion() == "" || first.GetUID() == "" {
		t.Fatalf("stored object lacks resourceVersion or uid: %v", first.Object["metadata"])
	}
	again, err := c.Apply(ctx, object(t, deployment), apply)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetResourceVersion() != first.GetResourceVersion() {
		t.Errorf("a no-op apply bumped resourceVersion %s -> %s", first.GetResourceVersion(), again.GetResourceVersion())
	}

	// Another manager takes replicas with an update, as an HPA does.
	scaled := again.DeepCopy()
	if err := unstructured.SetNestedField(scaled.Object, int64(5), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	scaled, err = c.Update(ctx, scaled, cluster.WriteOptions{FieldManager: "hpa"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(scaled); got["hpa"] != "Update" {
		t.Fatalf("managers after update = %v", got)
	}

	// Applying replicas again without force conflicts with the other owner.
	_, err = c.Apply(ctx, object(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: default}
spec: {replicas: 3}
`), cluster.ApplyOptions{FieldManager: "other"})
	if !apierrors.IsConflict(err) {
		t.Fatalf("apply of a field another manager owns: err = %v, want a conflict", err)
	}

	// A forced dry run shows the Git value but stores nothing.
	dry, err := c.Apply(ctx, object(t, deployment), cluster.ApplyOptions{FieldManager: "kustomize-controller", Force: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(dry.Object, "spec", "replicas"); r != 2 {
		t.Errorf("dry-run replicas = %d, want 2", r)
	}
	live, err := c.Get(ctx, cluster.RefOf(dry))
	if err != nil {
		t.Fatal(err)
	}
	if r, _, _ := unstructured.NestedInt64(live.Object, "spec", "replicas"); r != 5 {
		t.Errorf("live replicas after a dry run = %d, want 5", r)
	}
}

func TestCreateUpdateDeleteErrors(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	cm := object(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: a}, data: {k: v}}`)
	if _, err := c.Update(ctx, cm, cluster.WriteOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("update of a missing object: %v", err)
	}
	created, err := c.Create(ctx, cm, cluster.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetNamespace() != "default" {
		t.Errorf("namespace = %q, want default", created.GetNamespace())
	}
	if _, err := c.Create(ctx, cm, cluster.WriteOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v", err)
	}
	stale := created.DeepCopy()
	stale.SetResourceVersion("1")
	if _, err := c.Update(ctx, stale, cluster.WriteOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("update with a stale resourceVersion: %v", err)
	}
	if err := c.Delete(ctx, cluster.RefOf(created), cluster.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, cluster.RefOf(created)); !apierrors.IsNotFound(err) {
		t.Fatalf("get after delete: %v", err)
	}
	if err := c.Delete(ctx, cluster.RefOf(created), cluster.DeleteOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("second delete: %v", err)
	}
	if c.Calls() != 7 {
		t.Errorf("calls = %d, want 7", c.Calls())
	}
}

func TestWritesAreAdmitted(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, object(t, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: max-replicas}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: object.spec.replicas <= 3
    message: too many replicas
`), object(t, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: max-replicas}
spec:
  policyName: max-replicas
  validationActions: [Deny]
`))
	d := object(t, deployment)
	if err := unstructured.SetNestedField(d.Object, int64(4), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	_, err := c.Apply(ctx, d, cluster.ApplyOptions{FieldManager: "argocd-controller"})
	if !apierrors.IsInvalid(err) {
		t.Fatalf("apply denied by a policy: err = %v, want Invalid", err)
	}
}

// DELETE passes admission as on the server: NamespaceLifecycle keeps the
// system namespaces, a ValidatingAdmissionPolicy matching DELETE answers
// with the stored object as oldObject, and a dry run deletes nothing.
func TestDeleteIsAdmitted(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, object(t, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: keep-locked}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [DELETE], resources: [configmaps]}
  validations:
  - expression: "!has(oldObject.metadata.labels) || !('locked' in oldObject.metadata.labels)"
    message: locked
`), object(t, `{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingAdmissionPolicyBinding, metadata: {name: keep-locked}, spec: {policyName: keep-locked, validationActions: [Deny]}}`))
	for _, ns := range []string{"default", "kube-system", "kube-public"} {
		ref := cluster.Ref{Name: ns}
		ref.Version, ref.Kind = "v1", "Namespace"
		if err := c.Delete(ctx, ref, cluster.DeleteOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("deleting namespace %s: %v, want 403 Forbidden", ns, err)
		}
	}
	locked, err := c.Create(ctx, object(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: l, labels: {locked: "yes"}}}`), cluster.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, cluster.RefOf(locked), cluster.DeleteOptions{}); !apierrors.IsInvalid(err) && !apierrors.IsForbidden(err) {
		t.Fatalf("deleting a locked ConfigMap: %v, want the policy's denial", err)
	}
	free, err := c.Create(ctx, object(t, `{apiVersion: v1, kind: ConfigMap, metadata: {name: f}}`), cluster.WriteOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx, cluster.RefOf(free), cluster.DeleteOptions{DryRun: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, cluster.RefOf(free)); err != nil {
		t.Fatalf("a dry-run delete deleted: %v", err)
	}
	if err := c.Delete(ctx, cluster.RefOf(free), cluster.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
}

// TestPatch: a patch goes through the same chain entry as truce admit's,
// applied to the stored object; a patch of a missing object is NotFound.
func TestPatch(t *testing.T) {
	c := newCluster(t, object(t, `
apiVersion: v1
kind: ConfigMap
metadata: {name: web, namespace: default}
data: {a: "1", b: "1"}
`))
	ref := cluster.Ref{GroupVersionKind: k8sschema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "default", Name: "web"}
	tests := []struct {
		name    string
		ref     cluster.Ref
		pt      types.PatchType
		patch   string
		want    map[string]any
		missing bool
	}{
		{"merge", ref, types.MergePatchType, `{"data":{"b":null,"c":"1"}}`, map[string]any{"a": "1", "c": "1"}, false},
		{"strategic", ref, types.StrategicMergePatchType, `{"data":{"a":"2"}}`, map[string]any{"a": "2", "c": "1"}, false},
		{"json", ref, types.JSONPatchType, `[{"op":"remove","path":"/data/c"}]`, map[string]any{"a": "2"}, false},
		{"missing", cluster.Ref{GroupVersionKind: ref.GroupVersionKind, Namespace: "default", Name: "nope"}, types.MergePatchType, `{}`, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := c.Patch(context.Background(), tt.ref, tt.pt, []byte(tt.patch), cluster.WriteOptions{FieldManager: "kubectl-patch"})
			if tt.missing {
				if !apierrors.IsNotFound(err) {
					t.Fatalf("err %v, want NotFound", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := out.Object["data"]; !reflect.DeepEqual(got, tt.want) {
				t.Errorf("data %v, want %v", got, tt.want)
			}
		})
	}
}
