package check

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/simulate"
)

// podinfo's kustomize directory with replicas: 1 beside its autoscaler
// (minReplicas 2), in a plain directory checked under both tools'
// defaults: the loop's fix is to give /spec/replicas to the autoscaler.
// Under Flux, server-side apply let the controller's Update take the
// field over, so dropping it from Git leaves it alone: verified and
// chosen. Under Argo CD's client-side apply, last-applied-configuration
// still holds it, so the next apply removes it before the autoscaler sets
// it again: not offered as safe.
func TestGiveToControllerFix(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
spec:
  # the autoscaler's minimum is 2
  replicas: 1
  selector:
    matchLabels: {app: podinfo}
  template:
    metadata:
      labels: {app: podinfo}
    spec:
      containers:
      - name: podinfod
        image: ghcr.io/stefanprodan/podinfo:6.7.0
`
	const hpa = `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata:
  name: podinfo
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: podinfo}
  minReplicas: 2
  maxReplicas: 4
`
	for _, layout := range []struct {
		name  string
		files map[string]string
	}{
		{"plain", map[string]string{"deployment.yaml": deployment, "hpa.yaml": hpa}},
		{"kustomize", map[string]string{"deployment.yaml": deployment, "hpa.yaml": hpa,
			"kustomization.yaml": "apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n- deployment.yaml\n- hpa.yaml\n"}},
	} {
		t.Run(layout.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, layout.files)
			outs := checkWorlds(t, []string{root}, offlineOptions(t, root), nil)
			file := filepath.Join(root, "deployment.yaml")
			seen := map[string]bool{}
			for _, pf := range outs[0].Problems {
				if pf.Ref.Kind != "Deployment" {
					continue
				}
				seen[pf.Tool] = true
				if pf.Verdict != simulate.Loop {
					t.Errorf("%s: %s, want Loop", pf.Tool, pf.Verdict)
				}
				var c *fix.Candidate
				var verdict simulate.Verdict
				for i, cand := range pf.Candidates {
					if cand.Kind == fix.KindGiveToController {
						c, verdict = cand, pf.Verdicts[i]
					}
				}
				if c == nil {
					t.Fatalf("%s: no give-to-controller fix; notes %v", pf.Tool, pf.Notes)
				}
				if got, want := string(c.Content(file)), strings.Replace(deployment, "  replicas: 1\n", "", 1); got != want {
					t.Errorf("%s: %s after the fix:\n%s\nwant:\n%s", pf.Tool, file, got, want)
				}
				switch pf.Tool {
				case "flux":
					if verdict != simulate.Synced || c.Unsafe || pf.Chosen != c {
						t.Errorf("flux: verdict %q, unsafe %v, chosen %v; want the fix verified Synced and chosen (notes %v, warning %q)", verdict, c.Unsafe, pf.Chosen == c, pf.Notes, c.Warning)
					}
				case "argocd":
					if !c.Unsafe || pf.Chosen == c || !strings.Contains(c.Warning, "the field is removed on the next apply, then kube-controller-manager sets it again") {
						t.Errorf("argocd: verdict %q, unsafe %v, chosen %v, warning %q; want it not offered as safe", verdict, c.Unsafe, pf.Chosen == c, c.Warning)
					}
				}
			}
			if !seen["flux"] || !seen["argocd"] {
				t.Fatalf("problems under %v, want both tools; verdicts %v", seen, verdicts(outs))
			}
		})
	}
}

// The hpa-flux example: its Kustomization's simulation ends on Flux's
// apply, yet the fix meets the cluster as it is between two applies,
// after the autoscaler took replicas over: verified and chosen.
func TestGiveToControllerFixFromTheControllersWrite(t *testing.T) {
	root := t.TempDir()
	if err := copyTree(filepath.Join("..", "examples", "hpa-flux"), root); err != nil {
		t.Fatal(err)
	}
	outs := checkWorlds(t, []string{root}, offlineOptions(t, root), nil)
	for _, pf := range outs[0].Problems {
		if pf.Ref.String() == "Deployment.apps/shop/web" {
			if pf.Chosen == nil || pf.Chosen.Kind != fix.KindGiveToController {
				var kinds []fix.Kind
				for _, c := range pf.Candidates {
					kinds = append(kinds, c.Kind)
				}
				t.Fatalf("chosen %v, want give-to-controller; candidates %v, verdicts %v, notes %v", pf.Chosen != nil, kinds, pf.Verdicts, pf.Notes)
			}
			return
		}
	}
	t.Fatalf("no problem for the web Deployment; verdicts %v", verdicts(outs))
}
