package webhook

import (
	"context"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

type fakeNamespaces struct {
	mu sync.Mutex
	m  map[string]*corev1.Namespace
}

func (f *fakeNamespaces) Namespace(_ context.Context, name string) (*corev1.Namespace, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ns, ok := f.m[name]
	return ns, ok
}

func (f *fakeNamespaces) set(name, rv string, labels map[string]string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.m[name] = &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: rv, Labels: labels}}
}

// TestNamespaceLabels: the replica-limit binding selects namespaces
// labelled environment=test; where the labels come from decides.
func TestNamespaceLabels(t *testing.T) {
	policy := []string{"../examples/image-mirror/cluster/replica-limit.yaml"}
	body := reviewFor(t, "CREATE", mustObject(t, strings.Replace(deployment, "%d", "9", 1)), "deployments")
	allowed := func(h *Handler) bool {
		_, out := post(t, h, "/validate", body)
		if out == nil {
			t.Fatal("no answer")
		}
		return out.Response.Allowed
	}

	t.Run("unknown namespace carries only its name label", func(t *testing.T) {
		h := newTestHandler(t, policy, nil)
		if !allowed(h) {
			t.Fatal("denied in a namespace nobody labelled environment=test")
		}
	})
	t.Run("--cluster describes the namespace", func(t *testing.T) {
		h := newTestHandler(t, policy, []string{"../examples/image-mirror/cluster/namespace.yaml"})
		if allowed(h) {
			t.Fatal("allowed 9 replicas in a test namespace")
		}
	})
	t.Run("live namespaces, labels changing", func(t *testing.T) {
		live := &fakeNamespaces{m: map[string]*corev1.Namespace{}}
		live.set("shop", "1", map[string]string{"environment": "prod"})
		h, err := NewHandler(context.Background(), Options{PolicyPaths: policy, Namespaces: live})
		if err != nil {
			t.Fatal(err)
		}
		defer h.Close()
		if !allowed(h) {
			t.Fatal("denied in a prod namespace")
		}
		live.set("shop", "2", map[string]string{"environment": "test"})
		if allowed(h) {
			t.Fatal("allowed after the namespace was relabelled environment=test")
		}
	})
}
