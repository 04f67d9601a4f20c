package gitops

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/drift/ignore"
)

// FuzzDiscover feeds arbitrary setting strings (annotations, argocd-cm
// values, Flux target fields, ignoreDifferences entries) through Discover:
// it must return settings or an error, never panic.
func FuzzDiscover(f *testing.F) {
	f.Add("ServerSideDiff=true,IncludeMutationWebhook=true", "/spec/replicas", "jsonPointers: [/spec]", "apps_Deployment", "Deploy.*", ".spec.x[]", "ignoreResourceStatusField: crd")
	f.Add("", "spec/replicas,", "jsonPointers: [", "a_b_c", "(", ".[", ": :")
	f.Add("", "/spec/replicas", "", "warn", "Deployment", "", "")
	f.Add(",,", "|\n a", "apps/Deployment:\n  ignoreDifferences: 3", "", "", "", "off")
	f.Fuzz(func(t *testing.T, compare, annotation, override, overrideKey, fluxKind, jq, compareOpts string) {
		app := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "argoproj.io/v1alpha1", "kind": "Application",
			"metadata": map[string]any{"name": "a", "annotations": map[string]any{AnnotationCompareOptions: compare}},
			"spec": map[string]any{
				"syncPolicy": map[string]any{"syncOptions": []any{compare}},
				"ignoreDifferences": []any{map[string]any{
					"group": overrideKey, "kind": fluxKind, "jsonPointers": []any{annotation}, "jqPathExpressions": []any{jq},
				}},
			},
		}}
		cm := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "argocd-cm"},
			"data": map[string]any{
				"resource.customizations.ignoreDifferences." + overrideKey: override,
				"resource.customizations":                                  override,
				"resource.compareoptions":                                  compareOpts,
				"application.resourceTrackingMethod":                       compare,
			},
		}}
		ks := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "kustomize.toolkit.fluxcd.io/v1", "kind": "Kustomization", "metadata": map[string]any{"name": "k"},
			"spec": map[string]any{"ignore": []any{map[string]any{
				"paths": []any{annotation}, "target": map[string]any{"kind": fluxKind, "labelSelector": compare},
			}}},
		}}
		res := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Service",
			"metadata": map[string]any{"name": "s", "annotations": map[string]any{AnnotationIgnoreDifferences: annotation}},
		}}
		hr := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "helm.toolkit.fluxcd.io/v2", "kind": "HelmRelease", "metadata": map[string]any{"name": "h"},
			"spec": map[string]any{"driftDetection": map[string]any{"mode": overrideKey, "ignore": []any{map[string]any{
				"paths": []any{annotation}, "target": map[string]any{"kind": fluxKind},
			}}}},
		}}
		s, rest, err := Discover([]Object{{Source: "a.yaml:1", Unstructured: app}, {Source: "cm.yaml:1", Unstructured: cm}, {Source: "k.yaml:1", Unstructured: ks}, {Source: "s.yaml:1", Unstructured: res}, {Source: "h.yaml:1", Unstructured: hr}})
		if err != nil {
			return
		}
		switch m := s.HelmReleases[0].DriftDetection; m {
		case HelmDriftDisabled, HelmDriftWarn, HelmDriftEnabled:
		default:
			t.Fatalf("drift detection mode %q accepted", m)
		}
		if len(rest) != 1 || s.ArgoConfig == nil {
			t.Fatalf("rest %d, settings %+v", len(rest), s)
		}
		for _, app := range s.Applications {
			_ = s.ComparisonFor(Unit{Tool: ignore.ArgoCD, App: app})
		}
	})
}
