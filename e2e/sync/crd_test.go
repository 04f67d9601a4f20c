//go:build e2e

package sync

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/reconcile"
)

const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.GROUP}
spec:
  group: GROUP
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// crdCase is a revision holding a Namespace, a CRD and widgets of it; the
// CRD (its group named after the case) is deleted when the case ends.
func crdCase(t *testing.T, prefix, widgets string) (*env, string, string) {
	t.Helper()
	e := newEnv(t, prefix, false)
	group := e.ns + ".example.com"
	docs := strings.ReplaceAll(pruneNamespace+"---"+widgetCRD+"---"+widgets, "GROUP", group)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		crd := schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}
		_ = e.live.Delete(ctx, cluster.Ref{GroupVersionKind: crd, Name: "widgets." + group}, cluster.DeleteOptions{})
	})
	return e, group, docs
}

// TestCRDsGoFirst: a revision holding a Namespace, a CRD and a custom
// resource of it syncs in one pass on a real server (the CRD is applied
// and Established before the custom resource is predicted and applied);
// the next pass writes nothing.
func TestCRDsGoFirst(t *testing.T) {
	t.Parallel()
	e, _, docs := crdCase(t, "crd", `
apiVersion: GROUP/v1
kind: Widget
metadata: {name: w, namespace: NS}
spec: {size: 3}
`)
	r, _, _ := e.newReconciler(docs, e.options())
	res := e.pass(r)
	if !res.Synced() || res.Count(reconcile.Created) != 3 {
		t.Fatalf("first pass: want the Namespace, the CRD and the Widget Created: %s", describe(res))
	}
	res = e.pass(r)
	if !res.Synced() || res.Writes != 0 || res.Count(reconcile.Unchanged) != 3 {
		t.Fatalf("second pass: want 3 Unchanged and 0 writes: %s", describe(res))
	}
}

// TestCRDsGoFirstNamespaceDefaulted: a custom resource without a namespace
// goes to "default" (as kubectl and Flux put it, and as the reconciler
// does for kinds it knows), also when its CRD is in the same revision.
// (The namespace is taken from the CRD of the revision when the cluster
// does not serve the kind yet.)
func TestCRDsGoFirstNamespaceDefaulted(t *testing.T) {
	t.Parallel()
	e, group, docs := crdCase(t, "crd-default", `
apiVersion: GROUP/v1
kind: Widget
metadata: {name: w-NS}
spec: {size: 4}
`)
	r, _, _ := e.newReconciler(docs, e.options())
	res := e.pass(r)
	if !res.Synced() || res.Count(reconcile.Created) != 3 {
		t.Errorf("first pass: want the Namespace, the CRD and the Widget Created: %s", describe(res))
	}
	widget := schema.GroupVersionKind{Group: group, Version: "v1", Kind: "Widget"}
	if e.get(widget, "default", "w-"+e.ns) == nil {
		t.Errorf("the Widget without a namespace is not in default after the first pass")
	}
	res = e.pass(r)
	if !res.Synced() || res.Writes != 0 || res.Count(reconcile.Unchanged) != 3 {
		t.Errorf("second pass: want 3 Unchanged and 0 writes: %s", describe(res))
	}
}
