package memory

import (
	"context"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
)

// TestResourceVersionMatchesGet: the copy-free answer is Get's, for a
// stored object, a missing object of a known kind and of a kind with none
// stored, and an unknown kind — and it follows writes.
func TestResourceVersionMatchesGet(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, object(t, deployment))
	ref := func(group, version, kind, ns, name string) cluster.Ref {
		return cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Group: group, Version: version, Kind: kind}, Namespace: ns, Name: name}
	}
	refs := []cluster.Ref{
		ref("apps", "v1", "Deployment", "default", "web"),
		ref("", "v1", "Namespace", "", "default"),
		ref("autoscaling", "v1", "HorizontalPodAutoscaler", "default", "missing"),
		ref("apps", "v1", "Deployment", "default", "missing"),
		ref("example.com", "v1", "Widget", "default", "web"),
	}
	check := func() {
		t.Helper()
		for _, r := range refs {
			got, gotErr := c.ResourceVersion(ctx, r)
			want := ""
			live, wantErr := c.Get(ctx, r)
			if wantErr == nil {
				want = live.GetResourceVersion()
			}
			if got != want || (gotErr == nil) != (wantErr == nil) || apierrors.IsNotFound(gotErr) != apierrors.IsNotFound(wantErr) {
				t.Errorf("ResourceVersion(%s) = %q, %v; Get gives %q, %v", r, got, gotErr, want, wantErr)
			}
			if via, err := cluster.ResourceVersion(ctx, c, r); via != got || (err == nil) != (gotErr == nil) {
				t.Errorf("cluster.ResourceVersion(%s) = %q, %v; want %q, %v", r, via, err, got, gotErr)
			}
		}
	}
	check()
	before, _ := c.ResourceVersion(ctx, refs[0])
	d := object(t, deployment)
	if err := unstructured.SetNestedField(d.Object, int64(3), "spec", "replicas"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Apply(ctx, d, cluster.ApplyOptions{FieldManager: "test", Force: true}); err != nil {
		t.Fatal(err)
	}
	if after, _ := c.ResourceVersion(ctx, refs[0]); after == before || after == "" {
		t.Errorf("resourceVersion %q after a change, %q before", after, before)
	}
	check()
}
