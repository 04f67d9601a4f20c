//go:build e2e

package differential

import (
	"context"
	"slices"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"

	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/engine/kyverno"
	"github.com/truce-dev/truce/schema"
)

// TestDiscoveryVersionOrder holds the order in which truce's schema
// registry gives each group's versions (the preferred one first), which
// the discovery truce gives Kyverno and its own RESTMapper follow,
// against kube-apiserver's discovery: the built-in groups, and the groups
// of Kyverno's CRDs, several versions each across several CRDs.
func TestDiscoveryVersionOrder(t *testing.T) {
	ctx := context.Background()
	srv := serverFor(ctx, t, &Case{})
	useCleanServer(ctx, t, srv)
	crds, err := kyverno.CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Apply(ctx, crds...); err != nil {
		t.Fatal(err)
	}
	reg, err := schema.NewRegistry()
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range crds {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crd); err != nil {
			t.Fatal(err)
		}
		if err := reg.AddCRD(&crd); err != nil {
			t.Fatal(err)
		}
	}
	truce := map[string][]string{}
	for _, gv := range reg.GroupVersions() {
		truce[gv.Group] = append(truce[gv.Group], gv.Version)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(srv.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	// The CRDs' groups appear in discovery once the CRDs are established
	// (Apply waits for that); poll until every group truce knows is
	// listed. The core group is served at /api, not among these groups.
	delete(truce, "")
	var server map[string][]string
	preferred := map[string]string{}
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		groups, err := dc.ServerGroups()
		if err != nil {
			return false, err
		}
		server = map[string][]string{}
		for _, g := range groups.Groups {
			if g.Name == "" || g.Name == apiserver.SentinelGroup {
				continue // the harness's own CRD
			}
			preferred[g.Name] = g.PreferredVersion.Version
			for _, v := range g.Versions {
				server[g.Name] = append(server[g.Name], v.Version)
			}
		}
		for group := range truce {
			if _, ok := server[group]; !ok {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil && !wait.Interrupted(err) {
		t.Fatal(err)
	}
	for group, versions := range truce {
		if _, ok := server[group]; !ok {
			t.Errorf("group %q: kube-apiserver does not serve it", group)
			continue
		}
		if !slices.Equal(versions, server[group]) {
			t.Errorf("group %q: truce lists versions %v, kube-apiserver %v", group, versions, server[group])
		}
		if preferred[group] != versions[0] {
			t.Errorf("group %q: truce prefers %s, kube-apiserver %s", group, versions[0], preferred[group])
		}
	}
	for group := range server {
		if _, ok := truce[group]; !ok {
			t.Errorf("group %q: kube-apiserver serves it, truce's registry does not", group)
		}
	}
	t.Logf("%d groups compared", len(truce))
}
