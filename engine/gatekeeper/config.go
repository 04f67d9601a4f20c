package gatekeeper

import (
	"fmt"

	configv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/config/v1alpha1"
	syncsetv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/syncset/v1alpha1"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller/config/process"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// inventory returns the objects Gatekeeper's cache manager syncs into
// data.inventory (pkg/cachemanager AddObject): those of a synced kind, at
// the version synced, outside the namespaces the Config excludes from
// sync. An object stored at another version of a synced kind is not
// converted.
func (c config) inventory(objs []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if !c.synced[o.GroupVersionKind()] {
			continue
		}
		excluded, err := c.excluder.IsNamespaceExcluded(process.Sync, o)
		if err != nil {
			return nil, fmt.Errorf("syncing %s %s/%s into Gatekeeper's inventory: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
		if !excluded {
			out = append(out, o)
		}
	}
	return out, nil
}

// watches are the kinds whose objects are synced.
func (c config) watches() []schema.GroupKind {
	var out []schema.GroupKind
	for gvk := range c.synced {
		out = append(out, gvk.GroupKind())
	}
	return out
}

// configName is the one Config Gatekeeper reads (pkg/keys.Config); others
// are ignored by its controller.
const configName = "config"

// syncSetGroup is the group of Gatekeeper's SyncSets.
const syncSetGroup = "syncset.gatekeeper.sh"

// config is what Gatekeeper's Config and SyncSets tell its webhooks.
type config struct {
	// excluder holds the Config's namespace exclusions per process.
	excluder *process.Excluder
	// synced are the kinds Gatekeeper's cache manager watches and puts
	// into its constraints' data.inventory: the Config's spec.sync.syncOnly
	// and every SyncSet's spec.gvks.
	synced map[schema.GroupVersionKind]bool
}

// readConfig reads gatekeeper-system/config as Gatekeeper's config
// controller does: its match entries become the process excluder, its
// syncOnly entries (with the SyncSets') the synced kinds; a Config being
// deleted excludes and syncs nothing.
func readConfig(objs []*unstructured.Unstructured) (config, error) {
	cfg := config{excluder: process.New(), synced: map[schema.GroupVersionKind]bool{}}
	for _, o := range objs {
		if o.GroupVersionKind().Group == syncSetGroup && o.GetKind() == "SyncSet" {
			var ss syncsetv1alpha1.SyncSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &ss); err != nil {
				return config{}, fmt.Errorf("reading Gatekeeper's SyncSet %s: %w", o.GetName(), err)
			}
			if ss.GetDeletionTimestamp().IsZero() {
				for _, e := range ss.Spec.GVKs {
					cfg.synced[e.ToGroupVersionKind()] = true
				}
			}
			continue
		}
		if o.GroupVersionKind().Group != configGroup || o.GetKind() != "Config" ||
			o.GetNamespace() != Namespace || o.GetName() != configName {
			continue
		}
		var c configv1alpha1.Config
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &c); err != nil {
			return config{}, fmt.Errorf("reading Gatekeeper's Config %s/%s: %w", Namespace, configName, err)
		}
		if c.GetDeletionTimestamp().IsZero() {
			cfg.excluder.Add(c.Spec.Match)
			if c.Spec.Sync.SyncOnly != nil {
				for _, e := range c.Spec.Sync.SyncOnly {
					cfg.synced[e.ToGroupVersionKind()] = true
				}
			}
		}
	}
	return cfg, nil
}

// namespaces returns the cluster's namespaces, which Gatekeeper's webhook
// reads from its cache to match namespaceSelectors.
func namespaces(objs []*unstructured.Unstructured) (map[string]*corev1.Namespace, error) {
	out := map[string]*corev1.Namespace{}
	for _, o := range objs {
		if o.GetAPIVersion() != "v1" || o.GetKind() != "Namespace" {
			continue
		}
		ns := &corev1.Namespace{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, ns); err != nil {
			return nil, fmt.Errorf("reading Namespace %s: %w", o.GetName(), err)
		}
		out[ns.Name] = ns
	}
	return out, nil
}
