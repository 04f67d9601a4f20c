package check

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/helm"
	"github.com/truce-dev/truce/render/world"
)

// chartRepository writes a repository of n Argo CD Applications, each
// installing podinfo's chart (from testdata/helm-mirror) as its own
// release with the HPA, PDB and ServiceAccount on: five objects each.
func chartRepository(b *testing.B, n int) (root string, apps string) {
	b.Helper()
	root = b.TempDir()
	if err := copyTree(filepath.Join("testdata", "helm-mirror", "charts"), filepath.Join(root, "charts")); err != nil {
		b.Fatal(err)
	}
	apps = filepath.Join(root, "apps")
	if err := os.MkdirAll(apps, 0o755); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		app := fmt.Sprintf(`apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: shop-%[1]d
  namespace: argocd
spec:
  project: default
  source:
    repoURL: https://git.example.com/platform.git
    path: charts/podinfo
    helm:
      valuesObject:
        hpa: {enabled: true}
        podDisruptionBudget: {maxUnavailable: 1}
        serviceAccount: {enabled: true}
  destination:
    server: https://kubernetes.default.svc
    namespace: shop-%[1]d
  syncPolicy:
    automated: {selfHeal: true, prune: true}
    syncOptions: [CreateNamespace=true]
`, i)
		if err := os.WriteFile(filepath.Join(apps, fmt.Sprintf("shop-%d.yaml", i)), []byte(app), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	return root, apps
}

// BenchmarkRenderCharts reads a repository of Applications through its
// entry points, rendering each chart; the baseline renders the same
// releases with Helm's engine alone (render/helm, one chart load), so the
// ratio is what reading a repository adds to Helm.
func BenchmarkRenderCharts(b *testing.B) {
	for _, n := range []int{10, 100} {
		root, apps := chartRepository(b, n)
		opts := world.Options{Render: render.Options{Offline: true, CacheDir: b.TempDir()}, Root: root, RepoURLs: []string{"https://git.example.com/platform.git"}}
		b.Run(fmt.Sprintf("truce/apps=%d", n), func(b *testing.B) {
			for b.Loop() {
				worlds, err := world.Load(context.Background(), []string{apps}, opts)
				if err != nil || len(worlds) != 1 || len(worlds[0].Units) != n {
					b.Fatalf("%v %v", err, worlds)
				}
			}
		})
		b.Run(fmt.Sprintf("helm-render/apps=%d", n), func(b *testing.B) {
			ctx := context.Background()
			values := map[string]any{"hpa": map[string]any{"enabled": true},
				"podDisruptionBudget": map[string]any{"maxUnavailable": 1}, "serviceAccount": map[string]any{"enabled": true}}
			for b.Loop() {
				ch, err := helm.Load(ctx, filepath.Join(root, "charts", "podinfo"), helm.LoadOptions{RepositoryRoot: root})
				if err != nil {
					b.Fatal(err)
				}
				for i := range n {
					name := fmt.Sprintf("shop-%d", i)
					if _, err := helm.Render(ctx, ch, helm.Release{Name: name, Namespace: name, IncludeCRDs: true}, values, render.Options{}); err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}

// BenchmarkCheckCharts checks the same repository: rendering, one
// simulation per Application, fixes not verified.
func BenchmarkCheckCharts(b *testing.B) {
	for _, n := range []int{10, 100} {
		root, apps := chartRepository(b, n)
		opts := world.Options{Render: render.Options{Offline: true, CacheDir: b.TempDir()}, Root: root, RepoURLs: []string{"https://git.example.com/platform.git"}}
		b.Run(fmt.Sprintf("apps=%d", n), func(b *testing.B) {
			for b.Loop() {
				worlds, err := world.Load(context.Background(), []string{apps}, opts)
				if err != nil {
					b.Fatal(err)
				}
				out, err := Run(context.Background(), Request{Input: WorldInput(worlds[0], nil)})
				if err != nil {
					b.Fatal(err)
				}
				if out.Report.Failed() {
					b.Fatalf("the repository does not settle: %+v", out.Report.Counts())
				}
			}
		})
	}
}
