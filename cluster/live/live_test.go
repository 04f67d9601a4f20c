package live

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"

	"github.com/truce-dev/truce/cluster"
)

// fakeServer serves legacy discovery for core/v1 (ConfigMaps) and, once
// widgets is set, example.com/v1 (Widgets), and GETs of any object of them.
type fakeServer struct {
	mu        sync.Mutex
	widgets   bool
	discovery int
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.Lock()
	defer f.mu.Unlock()
	reply := func(v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	group := metav1.APIGroup{Name: "example.com", Versions: []metav1.GroupVersionForDiscovery{{GroupVersion: "example.com/v1", Version: "v1"}},
		PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "example.com/v1", Version: "v1"}}
	switch p := r.URL.Path; {
	case p == "/api":
		f.discovery++
		reply(metav1.APIVersions{Versions: []string{"v1"}})
	case p == "/apis":
		f.discovery++
		list := metav1.APIGroupList{}
		if f.widgets {
			list.Groups = append(list.Groups, group)
		}
		reply(list)
	case p == "/api/v1":
		f.discovery++
		reply(metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{
			{Name: "configmaps", Namespaced: true, Kind: "ConfigMap", Verbs: metav1.Verbs{"get"}}}})
	case p == "/apis/example.com/v1" && f.widgets:
		f.discovery++
		reply(metav1.APIResourceList{GroupVersion: "example.com/v1", APIResources: []metav1.APIResource{
			{Name: "widgets", Namespaced: false, Kind: "Widget", Verbs: metav1.Verbs{"get"}}}})
	case strings.HasPrefix(p, "/api/v1/namespaces/"), strings.HasPrefix(p, "/apis/example.com/v1/widgets/") && f.widgets:
		name := p[strings.LastIndex(p, "/")+1:]
		reply(map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name}})
	default:
		// A resource not served: the bare 404 kube-apiserver answers.
		http.NotFound(w, r)
	}
}

func (f *fakeServer) discoveries() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.discovery
}

func TestMappingsAreCachedAndRefreshed(t *testing.T) {
	f := &fakeServer{}
	srv := httptest.NewServer(f)
	t.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	cm := cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "ns", Name: "a"}
	for range 50 {
		if _, err := c.Get(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	warm := f.discoveries()
	if warm == 0 {
		t.Fatal("no discovery request seen")
	}
	for range 50 {
		if _, err := c.Get(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	if got := f.discoveries(); got != warm {
		t.Errorf("cached lookups made %d more discovery requests", got-warm)
	}

	// A kind the server does not serve yet: no match, through the
	// exported mapper too.
	widget := cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Name: "w"}
	if _, err := c.Get(ctx, widget); !meta.IsNoMatchError(err) {
		t.Fatalf("Get of an unknown kind: %v", err)
	}
	if _, err := c.RESTMapper().RESTMapping(widget.GroupKind(), "v1"); !meta.IsNoMatchError(err) {
		t.Fatalf("RESTMapping of an unknown kind: %v", err)
	}
	// Its CRD appears: both find it (discovery refreshed on no match).
	f.mu.Lock()
	f.widgets = true
	f.mu.Unlock()
	m, err := c.RESTMapper().RESTMapping(widget.GroupKind(), "v1")
	if err != nil || m.Scope.Name() != meta.RESTScopeNameRoot || m.Resource.Resource != "widgets" {
		t.Fatalf("RESTMapping after the CRD appeared: %+v, %v", m, err)
	}
	if _, err := c.Get(ctx, widget); err != nil {
		t.Fatalf("Get after the CRD appeared: %v", err)
	}
	// It goes away: the bare 404 drops the cached mapping, so the next
	// lookup asks discovery again and reports no match.
	f.mu.Lock()
	f.widgets = false
	f.mu.Unlock()
	if _, err := c.Get(ctx, widget); !apierrors.IsNotFound(err) {
		t.Fatalf("Get after the CRD went: %v", err)
	}
	if _, err := c.Get(ctx, widget); !meta.IsNoMatchError(err) {
		t.Fatalf("Get after the CRD went, again: %v", err)
	}
}

// BenchmarkMapping compares the cached lookup with the deferred discovery
// mapper's own, on the same warm cluster.
func BenchmarkMapping(b *testing.B) {
	srv := httptest.NewServer(&fakeServer{})
	b.Cleanup(srv.Close)
	c, err := New(&rest.Config{Host: srv.URL})
	if err != nil {
		b.Fatal(err)
	}
	gvk := schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	if _, err := c.mapping(gvk); err != nil {
		b.Fatal(err)
	}
	b.Run("deferred", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.mapper.RESTMapping(gvk.GroupKind(), gvk.Version); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("cached", func(b *testing.B) {
		for b.Loop() {
			if _, err := c.mapping(gvk); err != nil {
				b.Fatal(err)
			}
		}
	})
}
