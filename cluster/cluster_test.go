package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRefJSON(t *testing.T) {
	for _, tc := range []struct {
		ref  Ref
		want string
	}{
		{Ref{GroupVersionKind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "shop", Name: "web"},
			`{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"}`},
		{Ref{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "shop"},
			`{"apiVersion":"v1","kind":"Namespace","name":"shop"}`},
	} {
		b, err := json.Marshal(tc.ref)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tc.ref, b, err, tc.want)
		}
		var back Ref
		if err := json.Unmarshal(b, &back); err != nil || back != tc.ref {
			t.Errorf("Unmarshal(%s) = %+v, %v", b, back, err)
		}
	}
	var r Ref
	if err := json.Unmarshal([]byte(`{"apiVersion":"a/b/c","kind":"X","name":"x"}`), &r); err == nil {
		t.Error("a bad apiVersion was accepted")
	}
}

// versionless answers Get only; wrapped wraps a cluster for its writes.
type versionless struct {
	Cluster
	gets int
}

func (v *versionless) Get(_ context.Context, ref Ref) (*unstructured.Unstructured, error) {
	v.gets++
	if ref.Name == "missing" {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, ref.Name)
	}
	u := &unstructured.Unstructured{}
	u.SetResourceVersion("7")
	return u, nil
}

type versioned struct {
	versionless
	asked int
}

func (v *versioned) ResourceVersion(context.Context, Ref) (string, error) {
	v.asked++
	return "9", nil
}

type wrapped struct{ Cluster }

func (w wrapped) Unwrap() Cluster { return w.Cluster }

// TestResourceVersion: a cluster's VersionReader answers, through
// wrappers; without one, Get does, NotFound passed on.
func TestResourceVersion(t *testing.T) {
	ctx := context.Background()
	ref := Ref{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "a", Name: "b"}
	plain := &versionless{}
	if rv, err := ResourceVersion(ctx, plain, ref); rv != "7" || err != nil || plain.gets != 1 {
		t.Errorf("without a VersionReader: %q, %v after %d gets; want 7 from one Get", rv, err, plain.gets)
	}
	missing := ref
	missing.Name = "missing"
	if _, err := ResourceVersion(ctx, wrapped{plain}, missing); !apierrors.IsNotFound(err) {
		t.Errorf("missing object: %v, want NotFound", err)
	}
	v := &versioned{}
	for _, c := range []Cluster{v, wrapped{v}, wrapped{wrapped{v}}} {
		if rv, err := ResourceVersion(ctx, c, ref); rv != "9" || err != nil {
			t.Errorf("%T: %q, %v; want the VersionReader's 9", c, rv, err)
		}
	}
	if v.asked != 3 || v.gets != 0 {
		t.Errorf("VersionReader asked %d times, Get %d; want 3 and 0", v.asked, v.gets)
	}
}

// listing answers List with two objects; walking is a Walker too.
type listing struct {
	Cluster
	lists int
}

func (l *listing) List(_ context.Context, gvk schema.GroupVersionKind, ns string) ([]*unstructured.Unstructured, error) {
	l.lists++
	if gvk.Kind == "Missing" {
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "missings"}, "")
	}
	var out []*unstructured.Unstructured
	for _, name := range []string{"a", "b"} {
		u := &unstructured.Unstructured{}
		u.SetName(name)
		out = append(out, u)
	}
	return out, nil
}

type walking struct {
	listing
	walks int
}

func (w *walking) Walk(_ context.Context, _ schema.GroupVersionKind, _ string, fn func(*unstructured.Unstructured)) error {
	w.walks++
	u := &unstructured.Unstructured{}
	u.SetName("walked")
	fn(u)
	return nil
}

// TestWalk: a cluster's Walker answers, through wrappers; without one,
// List does, its errors passed on.
func TestWalk(t *testing.T) {
	ctx := context.Background()
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	names := func(c Cluster, gvk schema.GroupVersionKind) ([]string, error) {
		var out []string
		err := Walk(ctx, c, gvk, "", func(o *unstructured.Unstructured) { out = append(out, o.GetName()) })
		return out, err
	}
	l := &listing{}
	if got, err := names(wrapped{l}, gvk); fmt.Sprint(got) != "[a b]" || err != nil || l.lists != 1 {
		t.Errorf("without a Walker: %v, %v after %d lists; want [a b] from one List", got, err, l.lists)
	}
	if _, err := names(l, schema.GroupVersionKind{Version: "v1", Kind: "Missing"}); !apierrors.IsNotFound(err) {
		t.Errorf("unknown kind: %v, want NotFound", err)
	}
	w := &walking{}
	if got, err := names(wrapped{wrapped{w}}, gvk); fmt.Sprint(got) != "[walked]" || err != nil || w.walks != 1 || w.lists != 0 {
		t.Errorf("with a Walker: %v, %v after %d walks and %d lists; want [walked] from one walk", got, err, w.walks, w.lists)
	}
}
