package lint

import (
	"context"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

// TestArgoInstallsKyverno: which sources are Kyverno's chart, and one
// finding per setting Kyverno's Argo CD notes warn against.
func TestArgoInstallsKyverno(t *testing.T) {
	const labelCM = `apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: argocd}
data:
  application.resourceTrackingMethod: label
`
	const safeCM = `apiVersion: v1
kind: ConfigMap
metadata: {name: argocd-cm, namespace: argocd}
data:
  resource.compareoptions: "ignoreAggregatedRoles: true"
`
	app := func(source, syncOptions string) string {
		return `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: policy, namespace: argocd}
spec:
  project: default
` + source + `
  destination: {server: https://kubernetes.default.svc, namespace: kyverno}
  syncPolicy:
    syncOptions: [` + syncOptions + `]
`
	}
	const helmRepo = "  source: {repoURL: https://kyverno.github.io/kyverno/, chart: kyverno, targetRevision: 3.7.1}"
	tests := []struct {
		name string
		docs []string
		want []string // message suffixes, in order
	}{
		{"helm repository, every hazard", []string{labelCM, app(helmRepo, "Replace=true")},
			[]string{"tracks resources by label", "without ServerSideApply=true", "with Replace=true", "does not set ignoreAggregatedRoles"}},
		{"helm repository, safe", []string{safeCM, app(helmRepo, "ServerSideApply=true")}, nil},
		{"no argocd-cm: Argo CD 3.x defaults", []string{app(helmRepo, "ServerSideApply=true")}, nil},
		{"OCI chart", []string{app("  source: {repoURL: ghcr.io/kyverno/charts, chart: kyverno, targetRevision: 3.7.1}", "")},
			[]string{"without ServerSideApply=true"}},
		{"chart directory in Kyverno's Git repository, among sources", []string{app(`  sources:
  - {repoURL: https://github.com/example/values.git, ref: values}
  - {repoURL: https://github.com/kyverno/kyverno.git, path: charts/kyverno, targetRevision: v1.19.1}`, "")},
			[]string{"without ServerSideApply=true"}},
		{"another chart named kyverno elsewhere", []string{app("  source: {repoURL: https://charts.example.com, chart: kyverno-policies, targetRevision: 1.0.0}", "")}, nil},
		{"Kyverno's policies chart", []string{app("  source: {repoURL: https://kyverno.github.io/kyverno/, chart: kyverno-policies, targetRevision: 3.7.1}", "")}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []manifest.Object
			for i, d := range tt.docs {
				o, err := manifest.Decode("in.yaml", strings.NewReader(d), manifest.Options{})
				if err != nil {
					t.Fatalf("doc %d: %v", i, err)
				}
				objs = append(objs, o...)
			}
			fs, err := checkArgoInstallsKyverno(context.Background(), &Input{Objects: objs})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range fs {
				if !strings.Contains(f.Message, `Application "policy" installs Kyverno's Helm chart`) {
					t.Errorf("message does not name the Application and the chart: %q", f.Message)
				}
				got = append(got, f.Message)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("findings %q, want %d ending in %q", got, len(tt.want), tt.want)
			}
			for i, w := range tt.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("finding %d %q, want it to contain %q", i, got[i], w)
				}
			}
		})
	}
}
