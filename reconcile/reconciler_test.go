package reconcile

import (
	"context"
	"strings"
	"testing"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
)

const shopNamespace = `
apiVersion: v1
kind: Namespace
metadata:
  name: shop
`

const web = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
spec:
  replicas: 3
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
`

const config = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings
  namespace: shop
data:
  mode: blue
`

func newReconciler(t *testing.T, c cluster.Cluster, docs string, opts Options, with ...Option) (*Reconciler, *StaticSource) {
	t.Helper()
	src := &StaticSource{Revision: "main@sha1:1", Objects: decode(t, docs)}
	r, err := New(c, sourceFunc{src}, &MemoryStore{}, opts, with...)
	must(t, err)
	return r, src
}

// sourceFunc lets a test change the source between passes.
type sourceFunc struct{ s *StaticSource }

func (f sourceFunc) Fetch(ctx context.Context) (*Snapshot, error) { return f.s.Fetch(ctx) }
func (f sourceFunc) String() string                               { return f.s.String() }

func TestSecondPassWritesNothing(t *testing.T) {
	c := newCluster(t, "")
	r, _ := newReconciler(t, c, shopNamespace+"---"+web+"---"+config, DefaultOptions())
	first := runPass(t, r)
	if got := actions(first); got["Deployment/web"] != Created || got["Namespace/shop"] != Created || got["ConfigMap/settings"] != Created {
		t.Fatalf("first pass: %v %v", got, first.Errors)
	}
	before, err := c.Get(context.Background(), cluster.Ref{GroupVersionKind: webRef.GroupVersionKind, Namespace: "shop", Name: "web"})
	must(t, err)
	second := runPass(t, r)
	if second.Writes != 0 || second.Count(Unchanged) != 3 || !second.Synced() {
		t.Fatalf("second pass: writes %d, %v, errors %v", second.Writes, actions(second), second.Errors)
	}
	after, err := c.Get(context.Background(), cluster.RefOf(before))
	must(t, err)
	if before.GetResourceVersion() != after.GetResourceVersion() {
		t.Fatalf("resourceVersion moved %s -> %s", before.GetResourceVersion(), after.GetResourceVersion())
	}
	if got := after.GetAnnotations()[TrackingAnnotation]; got != "truce-system/truce:apps/Deployment:shop/web" {
		t.Fatalf("tracking id %q", got)
	}
}

var webRef = cluster.Ref{Namespace: "shop", Name: "web"}

func init() {
	webRef.Group, webRef.Version, webRef.Kind = "apps", "v1", "Deployment"
}

func TestIgnoreRulesStripAndAdopt(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, shopNamespace)
	opts := DefaultOptions()
	opts.Rules = []ignore.Rule{{Tool: ignore.Flux, JSONPointers: []string{"/spec/replicas"}, Target: ignore.Target{Kind: "Deployment"}}}
	r, _ := newReconciler(t, c, web, opts)
	runPass(t, r)
	live, err := c.Get(ctx, webRef)
	must(t, err)
	if n, _, _ := unstructuredInt(live.Object, "spec", "replicas"); n != 3 {
		t.Fatalf("creation must seed Git's replicas: %d", n)
	}
	// An HPA-like Apply manager takes /spec/replicas.
	hpa := decode(t, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec: {replicas: 7}
`)[0].Object
	_, err = c.Apply(ctx, hpa, cluster.ApplyOptions{FieldManager: "hpa-controller", Force: true})
	must(t, err)
	res := runPass(t, r)
	if res.Writes != 0 || actions(res)["Deployment/web"] != Unchanged {
		t.Fatalf("a change to an ignored field alone must trigger nothing: %+v", res.Objects)
	}
	if ig := res.Objects[0].Ignored; len(ig) != 1 || ig[0].Treatment != Strip {
		t.Fatalf("ignored: %+v", ig)
	}
	// A real change elsewhere is applied and the HPA keeps its replicas.
	live, err = c.Get(ctx, webRef)
	must(t, err)
	unstructuredSet(live.Object, "nginx:1.26", "spec", "template", "spec", "containers", 0, "image")
	_, err = c.Update(ctx, live, cluster.WriteOptions{FieldManager: "kubectl-edit"})
	must(t, err)
	res = runPass(t, r)
	if actions(res)["Deployment/web"] != Configured || len(res.Objects[0].Drifted) != 1 {
		t.Fatalf("image drift: %+v", res.Objects)
	}
	live, err = c.Get(ctx, webRef)
	must(t, err)
	if n, _, _ := unstructuredInt(live.Object, "spec", "replicas"); n != 7 {
		t.Fatalf("stripped replicas must stay the HPA's: %d", n)
	}
}

func TestUpdateManagerIsAdopted(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, shopNamespace)
	opts := DefaultOptions()
	opts.Rules = []ignore.Rule{{Tool: ignore.Flux, JSONPointers: []string{"/data/mode"}, Target: ignore.Target{Kind: "ConfigMap", Name: "settings"}}}
	r, _ := newReconciler(t, c, config, opts)
	runPass(t, r)
	live, err := c.Get(ctx, cluster.Ref{GroupVersionKind: cmGVK, Namespace: "shop", Name: "settings"})
	must(t, err)
	live.Object["data"] = map[string]any{"mode": "green"}
	_, err = c.Update(ctx, live, cluster.WriteOptions{FieldManager: "kubectl-edit"})
	must(t, err)
	res := runPass(t, r)
	if res.Writes != 0 {
		t.Fatalf("writes %d: %+v", res.Writes, res.Objects)
	}
	if ig := res.Objects[0].Ignored; len(ig) != 1 || ig[0].Treatment != Adopt {
		t.Fatalf("ignored: %+v", ig)
	}
	live, _ = c.Get(ctx, cluster.RefOf(live))
	if live.Object["data"].(map[string]any)["mode"] != "green" {
		t.Fatalf("adopted value lost: %v", live.Object["data"])
	}
}

var cmGVK = cluster.Ref{}.GroupVersionKind

func init() { cmGVK.Version, cmGVK.Kind = "v1", "ConfigMap" }

func TestPruneOnlyWhatLeftGitAndNamesItself(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, "")
	opts := DefaultOptions()
	opts.Prune = true
	r, src := newReconciler(t, c, shopNamespace+"---"+web+"---"+config, opts)
	runPass(t, r)
	// A copy of the ConfigMap, made by another tool, carries its id.
	cm, err := c.Get(ctx, cluster.Ref{GroupVersionKind: cmGVK, Namespace: "shop", Name: "settings"})
	must(t, err)
	cp := cm.DeepCopy()
	cp.SetName("settings-copy")
	cp.SetResourceVersion("")
	cp.SetUID("")
	cp.SetManagedFields(nil)
	_, err = c.Create(ctx, cp, cluster.WriteOptions{FieldManager: "kyverno"})
	must(t, err)
	// Git drops the ConfigMap.
	src.Objects = decode(t, shopNamespace+"---"+web)
	src.Revision = "main@sha1:2"
	res := runPass(t, r)
	if len(res.Pruned) != 1 || res.Pruned[0].Name != "settings" {
		t.Fatalf("pruned %v, errors %v", res.Pruned, res.Errors)
	}
	if _, err := c.Get(ctx, cluster.RefOf(cp)); err != nil {
		t.Fatalf("the copy must stay: %v", err)
	}
	// The copy was never in the inventory; dropping the Deployment prunes
	// it, and the Namespace last.
	src.Objects = nil
	src.Revision = "main@sha1:3"
	res = runPass(t, r)
	if len(res.Pruned) != 2 || res.Pruned[0].Kind != "Deployment" || res.Pruned[1].Kind != "Namespace" {
		t.Fatalf("pruned %v, errors %v", res.Pruned, res.Errors)
	}
}

func TestNoPruneAfterAFailedRead(t *testing.T) {
	c := newCluster(t, "")
	opts := DefaultOptions()
	opts.Prune = true
	r, src := newReconciler(t, c, shopNamespace+"---"+config, opts)
	runPass(t, r)
	// Git now holds an object of a kind the cluster does not serve: its
	// read fails, and nothing is pruned in that pass.
	src.Objects = decode(t, shopNamespace+`---
apiVersion: example.com/v1
kind: Widget
metadata: {name: w, namespace: shop}
`)
	src.Revision = "main@sha1:2"
	res := runPass(t, r)
	if len(res.Pruned) != 0 || !strings.Contains(strings.Join(res.Errors, "\n"), "prune skipped") {
		t.Fatalf("pruned %v, errors %v", res.Pruned, res.Errors)
	}
	if _, err := c.Get(context.Background(), cluster.Ref{GroupVersionKind: cmGVK, Namespace: "shop", Name: "settings"}); err != nil {
		t.Fatalf("the ConfigMap must survive: %v", err)
	}
}

var _ = manifest.Object{}
