package cli

import (
	"path/filepath"
	"strings"
	"testing"
)

// check, lint and diff read a repository through its entry points: a Helm
// chart under an Argo CD Application is rendered, and its objects are
// judged where the chart renders them.
func TestCommandsRenderCharts(t *testing.T) {
	root := filepath.Join("..", "..", "check", "testdata", "helm-mirror")
	common := []string{"--repo-root", root, "--repo-url", "https://git.example.com/platform.git", "--offline", "--cache-dir", t.TempDir()}
	apps, cluster := filepath.Join(root, "apps"), filepath.Join(root, "cluster")
	template := filepath.Join("charts", "podinfo", "templates", "deployment.yaml")

	out, errOut, code := runTruce(t, append([]string{"check", apps, "-c", cluster, "--no-verify"}, common...)...)
	if code != 1 || !strings.Contains(out, "Loop  Deployment.apps/podinfo/podinfo") {
		t.Errorf("check: exit %d, want 1 and the Loop at %s:\n%s%s", code, template, out, errOut)
	}
	out, errOut, code = runTruce(t, append([]string{"lint", apps, cluster}, common...)...)
	if code != 1 || !strings.Contains(out, template) || !strings.Contains(out, "admission-gitops-loop") {
		t.Errorf("lint: exit %d, want 1 and the loop at %s:\n%s%s", code, template, out, errOut)
	}
	// The predicted strategy compares Git with what the API server
	// would store: the policy's image.
	out, errOut, code = runTruce(t, append([]string{"diff", filepath.Join(root, "clusters", "dev"), "-c", cluster, "--strategy", "predicted"}, common...)...)
	if code != 1 || !strings.Contains(out, "~ Deployment/podinfo/podinfo (drifted)") || strings.Contains(out, "(rejected)") {
		t.Errorf("diff of the Flux cluster: exit %d, want 1, the Deployment drifted and nothing rejected:\n%s%s", code, out, errOut)
	}
	// Without --repo-root the repository is truce's own checkout, where
	// ./clusters/dev is not: the Kustomization is named, not skipped.
	out, _, _ = runTruce(t, append([]string{"diff", filepath.Join(root, "clusters", "dev"), "--strategy", "predicted"}, common[2:]...)...)
	if !strings.Contains(out, "Kustomization flux-system/flux-system not rendered") {
		t.Errorf("diff without the repository root does not name the unit it could not render:\n%s", out)
	}
}

// A kind without CRD is named and left out of a diff, as check leaves it
// out of its simulations; the rest is compared.
func TestDiffLeavesOutKindsWithoutCRD(t *testing.T) {
	root := filepath.Join("..", "..", "render", "world", "testdata", "flux2-kustomize-helm-example")
	out, errOut, code := runTruce(t, "diff", filepath.Join(root, "clusters", "staging"), "--strategy", "predicted",
		"--repo-root", root, "--offline", "--cache-dir", t.TempDir())
	if code != 0 {
		t.Fatalf("exit %d, want 0:\n%s%s", code, out, errOut)
	}
	for _, want := range []string{"ClusterIssuer letsencrypt not compared: no CRD for ClusterIssuer.cert-manager.io", "HelmRelease podinfo/podinfo not rendered", "8 in sync"} {
		if !strings.Contains(out+errOut, want) {
			t.Errorf("the diff does not say %q:\n%s%s", want, out, errOut)
		}
	}
}
