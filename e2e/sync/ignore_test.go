//go:build e2e

package sync

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/reconcile"
)

const webDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: NS
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: IMAGE
`

func webWithImage(image string) string { return strings.ReplaceAll(webDeployment, "IMAGE", image) }

// managers lists obj's managedFields entries for failure messages.
func managers(obj *unstructured.Unstructured) string {
	var out []string
	for _, mf := range obj.GetManagedFields() {
		s := mf.Manager + "/" + string(mf.Operation)
		if mf.Subresource != "" {
			s += "/" + mf.Subresource
		}
		if mf.FieldsV1 != nil {
			s += " " + mf.FieldsV1.GetRawString()
		}
		out = append(out, s)
	}
	return strings.Join(out, "\n  ")
}

// TestIgnoreStripHPA: a Flux ignore rule on /spec/replicas; Git's replicas
// seed the creation, then an Apply manager (an HPA) takes the field. Its
// change alone makes no write (the field is stripped from truce's payload);
// a Git change elsewhere is applied without the field, so the HPA keeps its
// value and its ownership and truce owns no replicas.
func TestIgnoreStripHPA(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "ignore-strip", true)
	opts := e.options()
	opts.Rules = []ignore.Rule{{Tool: ignore.Flux, JSONPointers: []string{"/spec/replicas"}, Target: ignore.Target{Kind: "Deployment"}}}
	r, src, _ := e.newReconciler(webWithImage("nginx:1.27"), opts)

	res := e.pass(r)
	if o := object(res, "Deployment", "web"); o == nil || o.Action != reconcile.Created {
		t.Fatalf("first pass: %s", describe(res))
	}
	web := e.get(deploymentGVK, e.ns, "web")
	if n, _, _ := unstructured.NestedInt64(web.Object, "spec", "replicas"); n != 3 {
		t.Fatalf("the creation must seed Git's replicas: %d", n)
	}

	hpa := e.decode(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: NS}
spec: {replicas: 7}
`)[0].Object
	if _, err := e.live.Apply(e.ctx, hpa, cluster.ApplyOptions{FieldManager: "hpa-controller", Force: true}); err != nil {
		t.Fatal(err)
	}
	rv := e.get(deploymentGVK, e.ns, "web").GetResourceVersion()

	res = e.pass(r)
	o := object(res, "Deployment", "web")
	if res.Writes != 0 || o == nil || o.Action != reconcile.Unchanged || !res.Synced() {
		t.Fatalf("a change of an ignored field alone must write nothing: %s", describe(res))
	}
	if len(o.Ignored) != 1 || o.Ignored[0].Pointer != "/spec/replicas" || o.Ignored[0].Treatment != reconcile.Strip {
		t.Fatalf("ignored: %+v, want /spec/replicas stripped", o.Ignored)
	}
	web = e.get(deploymentGVK, e.ns, "web")
	if web.GetResourceVersion() != rv {
		t.Fatalf("resourceVersion moved %s -> %s", rv, web.GetResourceVersion())
	}

	// Git changes the image.
	src.Objects, src.Revision = e.decode(webWithImage("nginx:1.28")), "main@sha1:2"
	res = e.pass(r)
	o = object(res, "Deployment", "web")
	if o == nil || o.Action != reconcile.Configured || res.Writes != 1 || !res.Synced() {
		t.Fatalf("the image change must be applied: %s", describe(res))
	}
	if len(o.Drifted) != 1 || o.Drifted[0] != imagePointer {
		t.Errorf("drifted %v, want only %s", o.Drifted, imagePointer)
	}
	web = e.get(deploymentGVK, e.ns, "web")
	if n, _, _ := unstructured.NestedInt64(web.Object, "spec", "replicas"); n != 7 {
		t.Errorf("replicas %d, want the HPA's 7", n)
	}
	if got := imageOf(web); got != "nginx:1.28" {
		t.Errorf("image %q, want nginx:1.28", got)
	}
	if owns(web, "/spec/replicas", reconcile.DefaultFieldManager, "Apply") {
		t.Errorf("truce still owns /spec/replicas:\n  %s", managers(web))
	}
	if !owns(web, "/spec/replicas", "hpa-controller", "Apply") {
		t.Errorf("hpa-controller does not own /spec/replicas:\n  %s", managers(web))
	}
	if !owns(web, imagePointer, reconcile.DefaultFieldManager, "Apply") {
		t.Errorf("truce does not own the image it applied:\n  %s", managers(web))
	}

	res = e.pass(r)
	if res.Writes != 0 || !res.Synced() {
		t.Fatalf("the pass after: want 0 writes: %s", describe(res))
	}
}

// TestIgnoreAdoptKubectlEdit: a Flux ignore rule on a ConfigMap key that an
// Update manager (kubectl edit: a PUT) changes. The live value is adopted:
// no write, the value stays; the next write truce makes for another reason
// carries the adopted value, so truce keeps (co-)owning the field.
func TestIgnoreAdoptKubectlEdit(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "ignore-adopt", true)
	opts := e.options()
	opts.Rules = []ignore.Rule{{Tool: ignore.Flux, JSONPointers: []string{"/data/mode"}, Target: ignore.Target{Kind: "ConfigMap", Name: "settings"}}}
	settings := func(size string) string {
		return `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings, namespace: NS}
data: {mode: blue, size: ` + size + `}
`
	}
	r, src, _ := e.newReconciler(settings("small"), opts)
	res := e.pass(r)
	if o := object(res, "ConfigMap", "settings"); o == nil || o.Action != reconcile.Created {
		t.Fatalf("first pass: %s", describe(res))
	}

	// kubectl edit: read, change, PUT.
	cm := e.get(configMapGVK, e.ns, "settings")
	must(t, unstructured.SetNestedField(cm.Object, "green", "data", "mode"))
	cm, err := e.live.Update(e.ctx, cm, cluster.WriteOptions{FieldManager: "kubectl-edit"})
	must(t, err)
	rv := cm.GetResourceVersion()
	t.Logf("after kubectl-edit's PUT:\n  %s", managers(cm))

	res = e.pass(r)
	o := object(res, "ConfigMap", "settings")
	if res.Writes != 0 || o == nil || o.Action != reconcile.Unchanged || !res.Synced() {
		t.Fatalf("a change of an ignored field alone must write nothing: %s", describe(res))
	}
	if len(o.Ignored) != 1 || o.Ignored[0].Pointer != "/data/mode" || o.Ignored[0].Treatment != reconcile.Adopt {
		t.Fatalf("ignored: %+v, want /data/mode adopted", o.Ignored)
	}
	cm = e.get(configMapGVK, e.ns, "settings")
	if got, _, _ := unstructured.NestedString(cm.Object, "data", "mode"); got != "green" || cm.GetResourceVersion() != rv {
		t.Fatalf("mode %q (resourceVersion %s -> %s), want kubectl's green untouched", got, rv, cm.GetResourceVersion())
	}

	// Git changes another key: truce writes, with the adopted value.
	src.Objects, src.Revision = e.decode(settings("large")), "main@sha1:2"
	res = e.pass(r)
	o = object(res, "ConfigMap", "settings")
	if o == nil || o.Action != reconcile.Configured || res.Writes != 1 || !res.Synced() {
		t.Fatalf("the size change must be applied: %s", describe(res))
	}
	if len(o.Drifted) != 1 || o.Drifted[0] != "/data/size" {
		t.Errorf("drifted %v, want only /data/size", o.Drifted)
	}
	cm = e.get(configMapGVK, e.ns, "settings")
	mode, _, _ := unstructured.NestedString(cm.Object, "data", "mode")
	size, _, _ := unstructured.NestedString(cm.Object, "data", "size")
	if mode != "green" || size != "large" {
		t.Errorf("data mode=%q size=%q, want green (adopted) and large (Git)", mode, size)
	}
	if !owns(cm, "/data/mode", reconcile.DefaultFieldManager, "Apply") {
		t.Errorf("truce does not own the adopted /data/mode:\n  %s", managers(cm))
	}
	res = e.pass(r)
	if res.Writes != 0 || !res.Synced() {
		t.Fatalf("the pass after: want 0 writes: %s", describe(res))
	}
}
