package gatekeeper

import (
	"fmt"

	configv1alpha1 "github.com/open-policy-agent/gatekeeper/v3/apis/config/v1alpha1"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller/config/process"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// configName is the one Config Gatekeeper reads (pkg/keys.Config); others
// are ignored by its controller.
const configName = "config"

// config is what Gatekeeper's Config tells its webhooks.
type config struct {
	// excluder holds the Config's namespace exclusions per process.
	excluder *process.Excluder
}

// readConfig reads gatekeeper-system/config as Gatekeeper's config
// controller does: its match entries become the process excluder; a Config
// being deleted excludes nothing.
func readConfig(objs []*unstructured.Unstructured) (config, error) {
	cfg := config{excluder: process.New()}
	for _, o := range objs {
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
