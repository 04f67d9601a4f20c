package drift

import (
	"context"
	"errors"
	"fmt"
	"github.com/truce-dev/truce/progress"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
)

func TestFluxStages(t *testing.T) {
	in := []string{
		`{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, namespace: shop}}`,
		`{apiVersion: v1, kind: ConfigMap, metadata: {name: settings, namespace: shop}}`,
		`{apiVersion: storage.k8s.io/v1, kind: StorageClass, metadata: {name: fast}}`,
		`{apiVersion: rbac.authorization.k8s.io/v1, kind: ClusterRole, metadata: {name: reader}}`,
		`{apiVersion: v1, kind: Namespace, metadata: {name: shop}}`,
		`{apiVersion: apiextensions.k8s.io/v1, kind: CustomResourceDefinition, metadata: {name: widgets.example.com}}`,
	}
	objs := make([]*unstructured.Unstructured, len(in))
	for i, y := range in {
		objs[i] = object(t, y)
	}
	var got []string
	for _, stage := range FluxStages(objs) {
		var kinds []string
		for _, at := range stage {
			kinds = append(kinds, objs[at].GetKind())
		}
		got = append(got, strings.Join(kinds, ","))
	}
	want := []string{"CustomResourceDefinition,Namespace,ClusterRole", "StorageClass", "ConfigMap,Deployment"}
	if !slices.Equal(got, want) {
		t.Errorf("stages = %q, want %q", got, want)
	}
}

const (
	shopNamespace = `{apiVersion: v1, kind: Namespace, metadata: {name: shop}}`
	shopWeb       = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx:1.27}]
`
	widgetCRD = `
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
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              mode: {type: string, default: auto}
`
	widget = `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w, namespace: default}, spec: {size: 3}}`
)

// withWave returns y's object in sync wave w.
func withWave(t *testing.T, y string, w int) *unstructured.Unstructured {
	u := object(t, y)
	u.SetAnnotations(map[string]string{"argocd.argoproj.io/sync-wave": fmt.Sprint(w)})
	return u
}

// TestPredictedDiffAll: the predicted strategy admits a sync's objects in
// the tool's order with the earlier ones stored, so that a repository's
// own Namespace, CRD and policies are there for the objects after them,
// whatever the order of the files.
func TestPredictedDiffAll(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name  string
		order Order
		objs  func(t *testing.T) []*unstructured.Unstructured
		// want is the status of each object, in the order of objs.
		want []Status
	}{
		{name: "deployment before its namespace, Argo CD", order: ArgoSyncOrder,
			objs: func(t *testing.T) []*unstructured.Unstructured {
				return []*unstructured.Unstructured{object(t, shopWeb), object(t, shopNamespace)}
			},
			want: []Status{InSync, InSync}},
		{name: "deployment before its namespace, Flux", order: FluxStages,
			objs: func(t *testing.T) []*unstructured.Unstructured {
				return []*unstructured.Unstructured{object(t, shopWeb), object(t, shopNamespace)}
			},
			want: []Status{InSync, InSync}},
		{name: "deployment before its namespace, default order",
			objs: func(t *testing.T) []*unstructured.Unstructured {
				return []*unstructured.Unstructured{object(t, shopWeb), object(t, shopNamespace)}
			},
			want: []Status{InSync, InSync}},
		{name: "custom resource before its CRD; the CRD's default is no drift", order: FluxStages,
			objs: func(t *testing.T) []*unstructured.Unstructured {
				return []*unstructured.Unstructured{object(t, widget), object(t, widgetCRD)}
			},
			want: []Status{InSync, InSync}},
		{name: "the repository's policy in an earlier wave mutates the deployment", order: ArgoSyncOrder,
			objs: func(t *testing.T) []*unstructured.Unstructured {
				return []*unstructured.Unstructured{object(t, web), withWave(t, mirror[0], -1), withWave(t, mirror[1], -1)}
			},
			want: []Status{Drifted, InSync, InSync}},
		{name: "without waves the policy comes after the deployment (kind order)", order: ArgoSyncOrder,
			objs: func(t *testing.T) []*unstructured.Unstructured {
				return []*unstructured.Unstructured{object(t, mirror[0]), object(t, mirror[1]), object(t, web)}
			},
			want: []Status{InSync, InSync, InSync}},
		{name: "a namespace that is not in the repository", order: ArgoSyncOrder,
			objs: func(t *testing.T) []*unstructured.Unstructured {
				return []*unstructured.Unstructured{object(t, shopWeb)}
			},
			want: []Status{Rejected}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newMemory(t)
			objs := tc.objs(t)
			got, err := (&Predicted{Admitter: c, Order: tc.order}).DiffAll(ctx, objs, nil)
			if err != nil {
				t.Fatal(err)
			}
			for i, o := range got {
				if o.Name != objs[i].GetName() || o.Kind != objs[i].GetKind() {
					t.Fatalf("answer %d is for %s %s, want %s %s", i, o.Kind, o.Name, objs[i].GetKind(), objs[i].GetName())
				}
				if o.Status != tc.want[i] {
					t.Errorf("%s %s: %s %v %v, want %s", o.Kind, o.Name, o.Status, pointers(o.Fields, false), o.Notes, tc.want[i])
				}
			}
			// What was admitted is stored, what was rejected is not.
			for i, o := range got {
				_, err := c.Get(ctx, cluster.RefOf(objs[i]))
				if stored := err == nil; stored != (o.Status != Rejected) {
					t.Errorf("%s %s (%s): stored = %v", o.Kind, o.Name, o.Status, stored)
				}
			}
		})
	}
}

// TestFluxStageSeesOnlyEarlierStages: Flux dry-runs a stage as a whole
// before applying it, so a policy in the same stage as the Deployment does
// not change the Deployment's dry run.
func TestFluxStageSeesOnlyEarlierStages(t *testing.T) {
	ctx := context.Background()
	c := newMemory(t)
	objs := []*unstructured.Unstructured{object(t, mirror[0]), object(t, mirror[1]), object(t, web)}
	got, err := (&Predicted{Admitter: c, Order: FluxStages}).DiffAll(ctx, objs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got[2].Status != InSync {
		t.Errorf("deployment: %s %v, want InSync", got[2].Status, pointers(got[2].Fields, false))
	}
	// The next sync sees the policy.
	again, err := (&Predicted{Admitter: c, Order: FluxStages}).DiffAll(ctx, objs, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again[2].Status != Drifted {
		t.Errorf("deployment on the next sync: %s, want Drifted", again[2].Status)
	}
}

// failingAdmitter fails every admission.
type failingAdmitter struct{ *memory.Cluster }

func (failingAdmitter) Admit(context.Context, admission.Request) (*admission.Result, error) {
	return nil, errors.New("chain broken")
}

// TestDiffAllNamesTheObject: an error about one object says which (its
// position), for the caller to name its file and line.
func TestDiffAllNamesTheObject(t *testing.T) {
	objs := []*unstructured.Unstructured{object(t, shopNamespace), object(t, shopWeb)}
	for _, tc := range []struct {
		s     Strategy
		index int
	}{
		{&Predicted{Admitter: failingAdmitter{newMemory(t)}}, 0}, // the Namespace goes first
		{failingStrategy{}, 1},
	} {
		_, err := DiffAll(context.Background(), tc.s, objs, nil)
		var oe *ObjectError
		if !errors.As(err, &oe) || oe.Index != tc.index || !strings.Contains(err.Error(), "broken") {
			t.Errorf("%s: %v, want an ObjectError for object %d", tc.s.Name(), err, tc.index)
		}
	}
}

// failingStrategy fails on Deployments.
type failingStrategy struct{}

func (failingStrategy) Name() string { return "failing" }
func (failingStrategy) Diff(_ context.Context, d *unstructured.Unstructured) (*Object, error) {
	if d.GetKind() == "Deployment" {
		return nil, errors.New("strategy broken")
	}
	return newObject("failing", d), nil
}

// cancellingAdmitter ends the run after its first answer, as a run's time
// limit would.
type cancellingAdmitter struct {
	*memory.Cluster
	cancel context.CancelFunc
}

func (c cancellingAdmitter) Admit(ctx context.Context, req admission.Request) (*admission.Result, error) {
	res, err := c.Cluster.Admit(ctx, req)
	c.cancel()
	return res, err
}

// TestDiffAllWhenTheRunEnds: what was compared before the run ended is
// kept, the rest is Unpredictable with the reason, and nothing fails. An
// answer given while the run ended is not trusted.
func TestDiffAllWhenTheRunEnds(t *testing.T) {
	objs := []*unstructured.Unstructured{object(t, shopNamespace), object(t, shopWeb)}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var seen []progress.Event
	sink := progressFunc(func(e progress.Event) { seen = append(seen, e) })
	got, err := DiffAll(ctx, &Predicted{Admitter: cancellingAdmitter{newMemory(t), cancel}}, objs, sink)
	if err != nil {
		t.Fatal(err)
	}
	for i, o := range got {
		if o.Status != Unpredictable || len(o.Notes) != 1 || !strings.Contains(o.Notes[0], "--timeout") {
			t.Errorf("object %d: %s %v, want Unpredictable with the time limit named", i, o.Status, o.Notes)
		}
	}
	if len(seen) != 0 {
		t.Errorf("progress %v for objects not compared", seen)
	}

	// Cancelled between objects: the first one stands.
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	got, err = DiffAll(ctx2, failingStrategy{}, objs[:1], progressFunc(func(progress.Event) { cancel2() }))
	if err != nil || got[0].Status == Unpredictable {
		t.Fatalf("first object: %v %v, want its answer", got, err)
	}
	got, err = DiffAll(ctx2, failingStrategy{}, objs, nil)
	if err != nil || got[0].Status != Unpredictable || got[1].Status != Unpredictable {
		t.Errorf("after the end: %v %v, want both Unpredictable", got, err)
	}
}

type progressFunc func(progress.Event)

func (f progressFunc) Progress(e progress.Event) { f(e) }
