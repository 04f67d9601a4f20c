package flux

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// FuzzParseHelmRelease feeds arbitrary objects to ParseHelmRelease and,
// when they parse, to Values and ReleaseName: none may panic, and what
// parses must be self-consistent.
func FuzzParseHelmRelease(f *testing.F) {
	for _, seed := range []string{
		"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: a, namespace: b}\nspec: {chartRef: {kind: HelmChart, name: c}}",
		"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: a}\nspec: {chart: {spec: {chart: x, sourceRef: {kind: GitRepository, name: g}}}, values: {a: [1, {b: 2}]}, valuesFrom: [{kind: Secret, name: s, targetPath: 'a[0].b'}]}",
		"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: a}\nspec: {chartRef: {kind: OCIRepository, name: c}, driftDetection: {ignore: [{paths: null}]}, postRenderers: [{kustomize: null}, {}]}",
		"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: a}\nspec: [1, 2]",
		"apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: a}\nspec: {releaseName: {}, interval: 5}",
	} {
		f.Add([]byte(seed))
	}
	world := []*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "s", "namespace": ""},
		"stringData": map[string]any{"values.yaml": "a: [1]"},
	}}}
	f.Fuzz(func(t *testing.T, data []byte) {
		var m map[string]any
		if yaml.Unmarshal(data, &m) != nil || m == nil {
			return
		}
		hr, err := ParseHelmRelease(&unstructured.Unstructured{Object: m})
		if err != nil {
			return
		}
		if len(hr.ReleaseName) > maxReleaseName {
			t.Errorf("release name %q is longer than %d", hr.ReleaseName, maxReleaseName)
		}
		if (hr.Chart == nil) == (hr.ChartRef == nil) {
			t.Errorf("want exactly one of Chart and ChartRef: %+v", hr)
		}
		_, _ = Values(hr, world)
	})
}
