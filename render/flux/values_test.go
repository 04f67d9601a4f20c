package flux

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const valuesWorld = `
apiVersion: v1
kind: ConfigMap
metadata: {name: base, namespace: apps}
data:
  values.yaml: |
    replicas: 1
    image: {repository: nginx, tag: "1.0"}
    list: [a, b]
  replicas: "3"
  quoted: '"007"'
  literal: "a,b[0]={x}"
---
apiVersion: v1
kind: ConfigMap
metadata: {name: override, namespace: apps}
data:
  values.yaml: |
    image: {tag: "2.0"}
    list: [c]
---
apiVersion: v1
kind: Secret
metadata: {name: creds, namespace: apps}
data:
  token: c2VjcmV0LXRva2Vu
  bad.yaml: c2VjcmV0OiBbdW5jbG9zZWQ=
---
apiVersion: v1
kind: ConfigMap
metadata: {name: base, namespace: other}
data:
  values.yaml: "replicas: 99"
`

func TestValues(t *testing.T) {
	var world []*unstructured.Unstructured
	for _, doc := range strings.Split(strings.TrimSpace(valuesWorld), "\n---\n") {
		world = append(world, object(t, doc))
	}
	tests := []struct {
		name    string
		spec    string
		want    map[string]any
		wantErr string
	}{
		{name: "in order, later refs win, lists replaced", spec: `
valuesFrom: [{kind: ConfigMap, name: base}, {kind: ConfigMap, name: override}]`,
			want: map[string]any{"replicas": float64(1), "image": map[string]any{"repository": "nginx", "tag": "2.0"},
				"list": []any{"c"}}},
		{name: "spec.values win over valuesFrom", spec: `
valuesFrom: [{kind: ConfigMap, name: base}]
values: {replicas: 5, image: {tag: spec}}`,
			want: map[string]any{"replicas": float64(5), "image": map[string]any{"repository": "nginx", "tag": "spec"},
				"list": []any{"a", "b"}}},
		{name: "targetPath with --set typing", spec: `
valuesFrom:
  - {kind: ConfigMap, name: base, valuesKey: replicas, targetPath: app.replicas}
  - {kind: ConfigMap, name: base, valuesKey: quoted, targetPath: app.id}
  - {kind: Secret, name: creds, valuesKey: token, targetPath: auth.token}`,
			want: map[string]any{"app": map[string]any{"replicas": int64(3), "id": "007"},
				"auth": map[string]any{"token": "secret-token"}}},
		{name: "literal targetPath keeps syntax characters", spec: `
valuesFrom: [{kind: ConfigMap, name: base, valuesKey: literal, targetPath: raw, literal: true}]`,
			want: map[string]any{"raw": "a,b[0]={x}"}},
		{name: "spec.values win over targetPath, except where the path writes through", spec: `
valuesFrom: [{kind: ConfigMap, name: base, valuesKey: replicas, targetPath: app.replicas}]
values: {app: {replicas: 7, name: x}, top: 1}`,
			// chartutil merges spec.values in before setting the path and
			// again at the end; MergeMaps shares the nested map, so the
			// path's value lands in spec.values' own map and survives.
			want: map[string]any{"app": map[string]any{"replicas": int64(3), "name": "x"}, "top": float64(1)}},
		{name: "spec.values win over targetPath at the top level", spec: `
valuesFrom: [{kind: ConfigMap, name: base, valuesKey: replicas, targetPath: top}]
values: {top: 1}`,
			want: map[string]any{"top": float64(1)}},
		{name: "optional missing object and key are skipped", spec: `
valuesFrom:
  - {kind: ConfigMap, name: absent, optional: true}
  - {kind: ConfigMap, name: base, valuesKey: nokey, optional: true}
  - {kind: ConfigMap, name: override}`,
			want: map[string]any{"image": map[string]any{"tag": "2.0"}, "list": []any{"c"}}},
		{name: "missing object names it", spec: "valuesFrom: [{kind: Secret, name: absent}]",
			wantErr: "could not resolve Secret chart values reference 'apps/absent' with key 'values.yaml': not found"},
		{name: "missing key names it", spec: "valuesFrom: [{kind: ConfigMap, name: base, valuesKey: nokey}]",
			wantErr: "'apps/base' with key 'nokey': key not found"},
		{name: "optional missing object then required ref to it", spec: `
valuesFrom: [{kind: ConfigMap, name: absent, optional: true}, {kind: ConfigMap, name: absent}]`,
			wantErr: "'apps/absent'"},
		{name: "bad YAML in a Secret is not quoted", spec: "valuesFrom: [{kind: Secret, name: creds, valuesKey: bad.yaml}]",
			wantErr: "failed to read values data"},
		{name: "nothing", spec: "", want: map[string]any{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := object(t, "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\n"+
				"metadata: {name: web, namespace: apps}\nspec:\n  chartRef: {kind: HelmChart, name: x}\n  "+indent(tt.spec))
			hr, err := ParseHelmRelease(obj)
			if err != nil {
				t.Fatal(err)
			}
			before := deepCopy(hr.Values)
			got, err := Values(hr, world)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				for _, secret := range []string{"secret-token", "unclosed", "secret:"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error shows Secret contents: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(before, hr.Values); diff != "" {
				t.Errorf("Values changed hr.Values (-before +after):\n%s", diff)
			}
		})
	}
}
