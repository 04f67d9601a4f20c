package reconcile

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/manifest"
)

// decode reads "---"-separated YAML as manifests named git.yaml.
func decode(t testing.TB, docs string) []manifest.Object {
	t.Helper()
	objs, err := manifest.Decode("git.yaml", strings.NewReader(docs), manifest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func unstructuredOf(objs []manifest.Object) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.Object.DeepCopy()
	}
	return out
}

// newCluster is an in-process cluster holding the given objects.
func newCluster(t testing.TB, docs string) *memory.Cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	state, err := admission.NewState(unstructuredOf(decode(t, docs))...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := memory.New(ctx, state, admission.Options{DisablePlugins: []string{"ServiceAccount"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// fakeClock advances only when told.
type fakeClock struct{ t time.Time }

func (c *fakeClock) now() time.Time      { return c.t }
func (c *fakeClock) add(d time.Duration) { c.t = c.t.Add(d) }
func newClock() *fakeClock               { return &fakeClock{t: time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)} }
func readFile(t testing.TB, p string) string {
	b, err := os.ReadFile(p)
	must(t, err)
	return string(b)
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// events records Events.
type events struct{ got []string }

func (e *events) Event(ref cluster.Ref, kind, reason, msg string) {
	e.got = append(e.got, kind+" "+reason+" "+ref.String()+": "+msg)
}

func runPass(t testing.TB, r *Reconciler) *Result {
	t.Helper()
	res, err := r.Reconcile(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return res
}

func actions(res *Result) map[string]Action {
	out := map[string]Action{}
	for _, o := range res.Objects {
		out[o.Ref.Kind+"/"+o.Ref.Name] = o.Action
	}
	return out
}

func unstructuredInt(obj map[string]any, fields ...string) (int64, bool, error) {
	return unstructured.NestedInt64(obj, fields...)
}

// unstructuredSet sets a value at a path of map keys and list indexes.
func unstructuredSet(obj map[string]any, value any, path ...any) {
	var cur any = obj
	for i, p := range path {
		last := i == len(path)-1
		switch k := p.(type) {
		case string:
			m := cur.(map[string]any)
			if last {
				m[k] = value
				return
			}
			cur = m[k]
		case int:
			l := cur.([]any)
			if last {
				l[k] = value
				return
			}
			cur = l[k]
		}
	}
}
