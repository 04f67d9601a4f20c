package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/truce-dev/truce/engine/kyverno"
	treport "github.com/truce-dev/truce/report"
)

// Every example repository: its verdicts, and that `truce fix` resolves
// what it finds (the fixed copy checks clean, or only what has no fix is
// left).
func TestExamples(t *testing.T) {
	type want map[string]string // "tool unit object" → verdict
	cases := []struct {
		dir  string
		want want
		// after are the verdicts left after `truce fix` (objects not
		// named: Synced).
		after want
		code  int
		// kyverno: the example holds Kyverno policies, which run in the
		// helper truce-kyverno.
		kyverno bool
	}{
		{dir: "image-mirror", code: exitFound,
			want: want{
				"argocd shop Deployment.apps/shop/web":    "Loop",
				"argocd batch Deployment.apps/shop/batch": "Rejected",
			},
			after: want{"argocd batch Deployment.apps/shop/batch": "Rejected"}},
		{dir: "gatekeeper-assign", code: exitFound,
			want: want{
				"argocd shop Deployment.apps/shop/web": "Loop",
				"argocd shop Namespace/shop":           "Synced",
			}},
		{dir: "hpa-flux", code: exitFound,
			want: want{
				"flux web Deployment.apps/shop/web":                     "Loop",
				"flux web Namespace/shop":                               "Synced",
				"flux web HorizontalPodAutoscaler.autoscaling/shop/web": "Synced",
				"flux api Deployment.apps/shop/api":                     "Synced",
				"flux api HorizontalPodAutoscaler.autoscaling/shop/api": "Synced",
			}},
		{dir: "cert-manager-cabundle", code: exitFound,
			want: want{"flux widgets CustomResourceDefinition.apiextensions.k8s.io/widgets.example.com": "Loop"}},
		{dir: "operator-configmap", code: exitFound,
			want: want{
				"argocd settings ConfigMap/settings/app-config": "Loop",
				"argocd settings Namespace/settings":            "Synced",
			}},
		{dir: "kyverno-generate", code: exitFound, kyverno: true,
			want: want{
				"argocd shop Secret/team-a/registry-creds": "Loop",
				"argocd shop Secret/team-b/registry-creds": "Pruned",
				"argocd shop Secret/shop/registry-creds":   "Synced",
				"argocd shop Namespace/shop":               "Synced",
				"argocd shop Namespace/team-a":             "Synced",
				"argocd shop Namespace/team-b":             "Synced",
			}},
		{dir: "kyverno-mutate-existing", code: exitFound, kyverno: true,
			want: want{
				"argocd shop ConfigMap/shop/settings": "OutOfSync",
				"argocd shop Namespace/shop":          "Synced",
			}},
		{dir: "kyverno-mutate-targets", code: exitFound, kyverno: true,
			want: want{
				"argocd shop ConfigMap/shop/settings": "OutOfSync",
				"argocd shop Namespace/shop":          "Synced",
			}},
		{dir: "kyverno-deleting", code: exitFound, kyverno: true,
			want: want{
				"argocd shop Service/shop/web-debug": "Loop",
				"argocd shop Service/shop/web":       "Synced",
				"argocd shop Namespace/shop":         "Synced",
			},
			// Nothing truce can write into Git or Argo CD stops a
			// deletion: the policy or the manifest has to change.
			after: want{"argocd shop Service/shop/web-debug": "Loop"}},
		{dir: "label-mutation", code: exitOK,
			want: want{
				"argocd  Deployment.apps/shop/web": "Synced", "argocd  Namespace/shop": "Synced",
				"flux  Deployment.apps/shop/web": "Synced", "flux  Namespace/shop": "Synced",
			}},
		{dir: "sidecar-injection", code: exitOK,
			want: want{
				"argocd  Deployment.apps/shop/web": "Synced", "argocd  Namespace/shop": "Synced",
				"flux  Deployment.apps/shop/web": "Synced", "flux  Namespace/shop": "Synced",
			}},
	}
	for _, tc := range cases {
		t.Run(tc.dir, func(t *testing.T) {
			t.Parallel()
			if tc.kyverno {
				if _, err := kyverno.FindHelper(); err != nil {
					t.Skipf("the example's Kyverno policies need the helper (make unit sets $%s): %v", kyverno.HelperEnv, err)
				}
			}
			dir := copyExample(t, tc.dir)
			got, code := checkJSON(t, dir)
			if code != tc.code {
				t.Errorf("check exit %d, want %d", code, tc.code)
			}
			if len(got.verdicts) != len(tc.want) {
				t.Errorf("%d objects, want %d: %v", len(got.verdicts), len(tc.want), got.verdicts)
			}
			for k, v := range tc.want {
				if got.verdicts[k] != v {
					t.Errorf("%s: %q, want %q", k, got.verdicts[k], v)
				}
			}
			for k, fixed := range got.fixed {
				if tc.want[k] != "Synced" && tc.after[k] == "" && !fixed {
					t.Errorf("%s: no verified fix", k)
				}
			}
			if tc.code == exitOK {
				return
			}
			out, errOut, code := runTruce(t, "fix", dir)
			wantFix := exitOK
			if len(tc.after) > 0 {
				wantFix = exitFound
			}
			if code != wantFix {
				t.Fatalf("fix exit %d, want %d\n%s%s", code, wantFix, out, errOut)
			}
			again, _ := checkJSON(t, dir)
			for k, v := range again.verdicts {
				want := tc.after[k]
				if want == "" {
					want = "Synced"
				}
				if v != want {
					t.Errorf("after fix: %s: %q, want %q\n%s", k, v, want, out)
				}
			}
		})
	}
}

type checked struct {
	verdicts map[string]string
	fixed    map[string]bool
}

func checkJSON(t *testing.T, dir string) (checked, int) {
	t.Helper()
	out, errOut, code := runTruce(t, "check", dir, "--format", "json")
	if code == exitFailure {
		t.Fatalf("check: %s", errOut)
	}
	var r treport.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	c := checked{verdicts: map[string]string{}, fixed: map[string]bool{}}
	for _, run := range r.Runs {
		for _, o := range run.Objects {
			k := run.Tool + " " + run.Unit + " " + o.Object
			c.verdicts[k] = string(o.Verdict)
			if o.Problem() {
				c.fixed[k] = o.Fix != nil && o.Fix.Verified
			}
		}
	}
	return c, code
}

// copyExample copies an example into a temporary directory, so fixing it
// leaves the repository alone.
func copyExample(t *testing.T, name string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), name)
	if err := os.CopyFS(dst, os.DirFS(filepath.Join("..", "..", "examples", name))); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dst); err != nil {
		t.Fatal(err)
	}
	return dst
}
