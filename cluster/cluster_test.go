package cluster

import (
	"context"
	"encoding/json"
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
