//go:build e2e

package sync

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/reconcile"
)

const (
	imageMirrorFile = "../../examples/image-mirror/cluster/image-mirror.yaml"
	webFile         = "../../examples/image-mirror/app/web.yaml"
	webImage        = "nginx:1.27"
	mirroredImage   = "registry.internal/nginx:1.27"
	imagePointer    = "/spec/template/spec/containers/0/image"
)

// imageMirror is the image-mirror policy (the classic mutation/self-heal
// loop) installed for one case.
type imageMirror struct {
	policy, binding string
}

// installImageMirror creates the image-mirror MutatingAdmissionPolicy and
// its binding, renamed after the case and with the binding scoped to the
// case's namespace (the policy rewrites every Deployment it matches), waits
// until a dry-run create in the namespace comes back mirrored, and deletes
// both when the case ends.
func (e *env) installImageMirror() imageMirror {
	e.t.Helper()
	objs := e.inNamespace(imageMirrorFile)
	if len(objs) != 2 {
		e.t.Fatalf("%s: want a policy and a binding, got %d objects", imageMirrorFile, len(objs))
	}
	m := imageMirror{policy: "image-mirror-" + e.ns + ".example.com", binding: "image-mirror-binding-" + e.ns + ".example.com"}
	var policy, binding *unstructured.Unstructured
	for _, o := range objs {
		switch o.Object.GetKind() {
		case "MutatingAdmissionPolicy":
			policy = o.Object.DeepCopy()
		case "MutatingAdmissionPolicyBinding":
			binding = o.Object.DeepCopy()
		}
	}
	if policy == nil || binding == nil {
		e.t.Fatalf("%s: no policy or no binding", imageMirrorFile)
	}
	policy.SetName(m.policy)
	binding.SetName(m.binding)
	must(e.t, unstructured.SetNestedField(binding.Object, m.policy, "spec", "policyName"))
	must(e.t, unstructured.SetNestedField(binding.Object, map[string]any{
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"kubernetes.io/metadata.name": e.ns}},
	}, "spec", "matchResources"))
	for _, o := range []*unstructured.Unstructured{policy, binding} {
		if _, err := e.live.Create(e.ctx, o, cluster.WriteOptions{FieldManager: "e2e-setup"}); err != nil {
			e.t.Fatal(err)
		}
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		for _, ref := range []cluster.Ref{{GroupVersionKind: mapBindingGVK, Name: m.binding}, {GroupVersionKind: mapGVK, Name: m.policy}} {
			if err := e.live.Delete(ctx, ref, cluster.DeleteOptions{}); err != nil && !isNotFound(err) {
				e.t.Errorf("deleting %s: %v", ref, err)
			}
		}
	})
	e.waitMirror(true)
	return m
}

// waitMirror polls with dry-run creates of a probe Deployment in the case's
// namespace until the policy demonstrably acts on it (on: the image comes
// back mirrored) or no longer does (off: it comes back as sent).
func (e *env) waitMirror(on bool) {
	e.t.Helper()
	probe := e.decode(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: mirror-probe, namespace: NS}
spec:
  selector: {matchLabels: {app: probe}}
  template:
    metadata: {labels: {app: probe}}
    spec:
      containers: [{name: nginx, image: ` + webImage + `}]
`)[0].Object
	want := webImage
	if on {
		want = mirroredImage
	}
	start := time.Now()
	attempts := 0
	e.poll(admissionTimeout, fmt.Sprintf("the probe's image is %s (image-mirror policy in force: %v)", want, on), func(ctx context.Context) (bool, error) {
		attempts++
		out, err := e.live.Create(ctx, probe.DeepCopy(), cluster.WriteOptions{FieldManager: "e2e-probe", DryRun: true})
		if err != nil {
			return false, err
		}
		got := imageOf(out)
		if got != want {
			return false, fmt.Errorf("probe image %q", got)
		}
		return true, nil
	})
	e.t.Logf("image-mirror policy in force=%v after %s (%d probe dry runs)", on, time.Since(start).Round(time.Millisecond), attempts)
}

func imageOf(obj *unstructured.Unstructured) string {
	cs, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
	if len(cs) == 0 {
		return ""
	}
	img, _ := cs[0].(map[string]any)["image"].(string)
	return img
}

// TestImageMirrorToldAboutAdmission: with server dry-run drift detection
// the policy's rewrite is part of the prediction, so after the creation
// nothing is drift: no writes, the resourceVersion stays.
func TestImageMirrorToldAboutAdmission(t *testing.T) {
	e := newEnv(t, "mirror-server", true)
	e.installImageMirror()
	opts := e.options()
	opts.Drift = reconcile.DriftServer
	src := &reconcile.StaticSource{Revision: "main@sha1:1", Objects: e.inNamespace(webFile)}
	r, err := reconcile.New(e.live, src, &reconcile.MemoryStore{}, opts)
	must(t, err)

	res := e.pass(r)
	if o := object(res, "Deployment", "web"); o == nil || o.Action != reconcile.Created || res.Writes != 1 || !res.Synced() {
		t.Fatalf("first pass: want web Created with 1 write: %s", describe(res))
	}
	web := e.get(deploymentGVK, e.ns, "web")
	if got := imageOf(web); got != mirroredImage {
		t.Fatalf("the policy did not act on the created Deployment: image %q, want %q", got, mirroredImage)
	}
	rv := web.GetResourceVersion()
	for i := 0; i < 3; i++ {
		res = e.pass(r)
		if o := object(res, "Deployment", "web"); o == nil || o.Action != reconcile.Unchanged || res.Writes != 0 || !res.Synced() {
			t.Fatalf("pass %d after the creation: want web Unchanged with 0 writes: %s", i+2, describe(res))
		}
		web = e.get(deploymentGVK, e.ns, "web")
		if web.GetResourceVersion() != rv {
			t.Fatalf("pass %d after the creation: resourceVersion moved %s -> %s", i+2, rv, web.GetResourceVersion())
		}
	}
}

// TestImageMirrorLoopBroken: offline drift detection with the repository's
// admission configuration, which lacks the cluster's policy, sees the
// mirrored image as drift and writes Git's back; the policy rewrites it
// inside every write. The loop breaker stops after Threshold writes, names
// the policy (replayed from the cluster's configuration), recommends
// putting the value in Git and records a Warning Event. Deleting the
// binding changes the admission configuration: the contest is lifted and
// Git's image written.
func TestImageMirrorLoopBroken(t *testing.T) {
	e := newEnv(t, "mirror-offline", true)
	m := e.installImageMirror()
	opts := e.options()
	opts.Drift = reconcile.DriftOffline
	nsObj := e.get(namespaceGVK, "", e.ns)
	predictor := reconcile.FixedAdmission([]*unstructured.Unstructured{nsObj})
	t.Cleanup(predictor.Close)
	view := reconcile.ClusterAdmission(e.live)
	t.Cleanup(view.Close)
	rec := &reconcile.ClusterRecorder{Cluster: e.live, Namespace: e.ns, Component: "truce-sync",
		OnError: func(err error) { t.Errorf("event: %v", err) }}
	src := &reconcile.StaticSource{Revision: "main@sha1:1", Objects: e.inNamespace(webFile)}
	r, err := reconcile.New(e.live, src, &reconcile.MemoryStore{}, opts,
		reconcile.WithPredictor(predictor), reconcile.WithAdmission(view), reconcile.WithRecorder(rec))
	must(t, err)

	writes, passes := 0, 0
	var res *reconcile.Result
	for passes < opts.Loop.Threshold+3 {
		res = e.pass(r)
		passes++
		writes += res.Writes
		t.Logf("pass %d: %d writes, image %s", passes, res.Writes, imageOf(e.get(deploymentGVK, e.ns, "web")))
		if len(res.Contested) > 0 {
			break
		}
	}
	if len(res.Contested) != 1 {
		t.Fatalf("no contest after %d passes and %d writes: %s", passes, writes, describe(res))
	}
	if writes > opts.Loop.Threshold {
		t.Fatalf("truce wrote %d times before the contest, more than the threshold %d", writes, opts.Loop.Threshold)
	}
	c := res.Contested[0]
	t.Logf("contested after %d passes, %d writes: %s by %s; fix %s: %s", passes, writes, c.Pointer, c.Writer, c.Fix.Kind, c.Fix.Description)
	if c.Pointer != imagePointer {
		t.Errorf("contest pointer %q, want %q", c.Pointer, imagePointer)
	}
	if want := "MutatingAdmissionPolicy/" + m.policy; !strings.Contains(c.Writer.Admission, want) {
		t.Errorf("contest writer %+v, want admission naming %s", c.Writer, want)
	}
	if c.Fix.Kind != "git-value" {
		t.Errorf("fix kind %q, want git-value", c.Fix.Kind)
	}
	if c.Git != webImage || c.Live != mirroredImage {
		t.Errorf("contest values: Git %v, live %v; want %s, %s", c.Git, c.Live, webImage, mirroredImage)
	}
	if t.Failed() {
		t.FailNow()
	}
	e.waitEvent("Warning", "Contested", "web", imagePointer)

	web := e.get(deploymentGVK, e.ns, "web")
	rv := web.GetResourceVersion()
	for i := 0; i < 3; i++ {
		res = e.pass(r)
		if res.Writes != 0 || len(res.Contested) != 1 {
			t.Fatalf("pass %d after the contest: want 0 writes and the contest held: %s", i+1, describe(res))
		}
	}
	if got := e.get(deploymentGVK, e.ns, "web").GetResourceVersion(); got != rv {
		t.Fatalf("resourceVersion moved %s -> %s while contested", rv, got)
	}

	// The admission configuration changes: the binding goes.
	must(t, e.live.Delete(e.ctx, cluster.Ref{GroupVersionKind: mapBindingGVK, Name: m.binding}, cluster.DeleteOptions{}))
	e.waitMirror(false)
	res = e.pass(r)
	if len(res.Contested) != 0 || res.Writes != 1 {
		t.Fatalf("after the binding went: want the contest lifted and 1 write: %s", describe(res))
	}
	if got := imageOf(e.get(deploymentGVK, e.ns, "web")); got != webImage {
		t.Fatalf("after the binding went: image %q, want Git's %q", got, webImage)
	}
	e.waitEvent("Normal", "ContestLifted", "web", "admission configuration changed")
	res = e.pass(r)
	if res.Writes != 0 || !res.Synced() {
		t.Fatalf("the pass after: want synced with 0 writes: %s", describe(res))
	}
}

// waitEvent polls the case namespace's Events for one of type kind and
// reason about the object named name whose message contains text.
func (e *env) waitEvent(kind, reason, name, text string) {
	e.t.Helper()
	var seen []string
	e.poll(30*time.Second, fmt.Sprintf("a %s Event %s on %s mentioning %q", kind, reason, name, text), func(ctx context.Context) (bool, error) {
		evs, err := e.live.List(ctx, eventGVK, e.ns)
		if err != nil {
			return false, err
		}
		seen = seen[:0]
		for _, ev := range evs {
			typ, _, _ := unstructured.NestedString(ev.Object, "type")
			why, _, _ := unstructured.NestedString(ev.Object, "reason")
			msg, _, _ := unstructured.NestedString(ev.Object, "message")
			obj, _, _ := unstructured.NestedString(ev.Object, "involvedObject", "name")
			src, _, _ := unstructured.NestedString(ev.Object, "source", "component")
			seen = append(seen, fmt.Sprintf("%s %s %s: %s", typ, why, obj, msg))
			if typ == kind && why == reason && obj == name && src == "truce-sync" && strings.Contains(msg, text) {
				return true, nil
			}
		}
		return false, fmt.Errorf("events: %v", seen)
	})
}
