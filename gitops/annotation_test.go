package gitops

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/truce-dev/truce/drift/ignore"
)

func deploymentWithAnnotation(t *testing.T, value string) Object {
	t.Helper()
	doc := `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  annotations:
    argocd.argoproj.io/ignore-differences: ` + value + `
spec:
  replicas: 3
`
	return object(t, "apps/web.yaml:12", doc)
}

func TestResourceIgnoreDifferences(t *testing.T) {
	tests := []struct {
		name, value string
		want        []ignore.Rule
		wantErr     string
	}{
		{
			name:  "comma separated pointers",
			value: "'/spec/replicas, /metadata/labels/version,'",
			want: []ignore.Rule{{Tool: ignore.ArgoCD, Source: "apps/web.yaml:12", Field: "metadata.annotations[argocd.argoproj.io/ignore-differences]",
				Target:       ignore.Target{Group: "apps", Kind: "Deployment", Name: "web", Namespace: "shop"},
				JSONPointers: []string{"/spec/replicas", "/metadata/labels/version"}}},
		},
		{name: "empty", value: "''"},
		{name: "invalid pointer", value: "spec/replicas",
			wantErr: `apps/web.yaml:12: metadata.annotations[argocd.argoproj.io/ignore-differences]: jsonPointers[0]: JSON pointer "spec/replicas" must start with "/"`},
		{name: "YAML is not read", value: "|\n      jsonPointers:\n      - /spec/replicas",
			wantErr: `apps/web.yaml:12: metadata.annotations[argocd.argoproj.io/ignore-differences]: the value must be comma-separated JSON pointers, e.g. "/spec/replicas,/metadata/labels/version" (Argo CD reads no YAML here); use the Application's ignoreDifferences`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rules, err := ResourceIgnoreDifferences(deploymentWithAnnotation(t, tt.value))
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, rules); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}
