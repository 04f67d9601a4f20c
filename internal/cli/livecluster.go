package cli

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/manifest"
)

// liveKinds are what a check reads from a live cluster: what admission
// reads, and what objects are applied into.
var liveKinds = append(slices.Clone(admission.ConfigurationKinds),
	k8sschema.GroupVersionKind{Group: "", Version: "v1", Kind: "Namespace"},
	k8sschema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
)

// readLiveCluster reads, without writing anything, the admission
// configuration, namespaces and CRDs of a live cluster, and the live
// objects of the repository's manifests, as the starting state of the
// simulation.
func readLiveCluster(ctx context.Context, kubeconfig, kubeContext string, repo []manifest.Object) ([]manifest.Object, error) {
	cfg, err := live.Load(kubeconfig, kubeContext)
	if err != nil {
		return nil, err
	}
	c, err := live.New(cfg)
	if err != nil {
		return nil, err
	}
	var out []manifest.Object
	for _, gvk := range liveKinds {
		objs, err := c.List(ctx, gvk, "")
		if noKind(err) {
			// The cluster does not serve this version (e.g. an older
			// MutatingAdmissionPolicy API).
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s from the cluster: %w", gvk.Kind, err)
		}
		for _, o := range objs {
			out = append(out, manifest.Object{Source: manifest.Source{File: "cluster:" + cluster.RefOf(o).String()}, Object: o})
		}
	}
	seen := map[cluster.Ref]bool{}
	for _, m := range out {
		seen[cluster.RefOf(m.Object)] = true
	}
	for _, m := range repo {
		ref := cluster.RefOf(m.Object)
		if seen[ref] || ref.Name == "" {
			continue
		}
		o, err := c.Get(ctx, ref)
		if noKind(err) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("reading %s from the cluster: %w", ref, err)
		}
		seen[ref] = true
		out = append(out, manifest.Object{Source: manifest.Source{File: "cluster:" + ref.String()}, Object: o})
	}
	return out, nil
}

// noKind reports an object or a kind the cluster does not have.
func noKind(err error) bool {
	return err != nil && (apierrors.IsNotFound(err) || meta.IsNoMatchError(err))
}
