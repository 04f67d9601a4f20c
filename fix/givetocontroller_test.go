package fix

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

const scaled = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo # the demo app
spec:
  # the autoscaler's minimum is 2
  replicas: 1 # one to start
  selector:
    matchLabels: {app: podinfo}
`

const replicasPatch = `# scale for production
apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
spec:
  replicas: 3
  minReadySeconds: 5 # slow start
`

func TestGiveToController(t *testing.T) {
	ref := cluster.Ref{Namespace: "default", Name: "podinfo"}
	ref.Group, ref.Version, ref.Kind = "apps", "v1", "Deployment"
	loop := func(kind string, git int64) *simulate.Object {
		return &simulate.Object{Ref: ref, InGit: true, Verdict: simulate.Loop,
			Loop: &simulate.LoopInfo{Fields: []string{"/spec/replicas"}, Other: "kube-controller-manager", OtherKind: kind},
			Drift: &drift.Object{Fields: []drift.Field{{Pointer: "/spec/replicas", Desired: git, Live: int64(2)}},
				Desired: map[string]any{"metadata": map[string]any{"name": "podinfo"}, "spec": map[string]any{"replicas": git}}}}
	}
	files := map[string]string{
		"app/deployment.yaml":           scaled,
		"base/deployment.yaml":          scaled,
		"prod/kustomization.yaml":       "resources: [../base]\npatches:\n- path: replicas.yaml\n",
		"prod/replicas.yaml":            replicasPatch,
		"inline/kustomization.yaml":     "resources: [../base]\npatches:\n- patch: |-\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata: {name: podinfo}\n    spec: {replicas: 3}\n",
		"noreplicas/deployment.yaml":    "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: podinfo}\nspec: {}\n",
		"noreplicas/kustomization.yaml": "resources: [deployment.yaml]\nreplicas: [{name: podinfo, count: 1}]\n",
	}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errNotExist
	}
	cases := []struct {
		name   string
		object *simulate.Object
		source manifest.Source
		// file is written and becomes want; none means no candidate,
		// with note in the skipped reasons.
		file, want, note string
	}{
		{name: "plain manifest", object: loop("controller", 1), source: manifest.Source{File: "app/deployment.yaml", Line: 1},
			file: "app/deployment.yaml", want: strings.Replace(scaled, "  replicas: 1 # one to start\n", "", 1)},
		{name: "kustomize base", object: loop("controller", 1), source: manifest.Source{File: "base/deployment.yaml", Line: 1, Kustomization: "app/kustomization.yaml"},
			file: "base/deployment.yaml", want: strings.Replace(scaled, "  replicas: 1 # one to start\n", "", 1)},
		{name: "kustomize patch file", object: loop("controller", 3), source: manifest.Source{File: "base/deployment.yaml", Line: 1, Kustomization: "prod/kustomization.yaml"},
			file: "prod/replicas.yaml", want: strings.Replace(replicasPatch, "  replicas: 3\n", "", 1)},
		{name: "inline kustomize patch", object: loop("controller", 3), source: manifest.Source{File: "base/deployment.yaml", Line: 1, Kustomization: "inline/kustomization.yaml"},
			file: "inline/kustomization.yaml", want: "resources: [../base]\npatches:\n- patch: |-\n    apiVersion: apps/v1\n    kind: Deployment\n    metadata: {name: podinfo}\n    spec: {}\n"},
		{name: "not set where the object comes from", object: loop("controller", 1), source: manifest.Source{File: "noreplicas/deployment.yaml", Line: 1, Kustomization: "noreplicas/kustomization.yaml"},
			note: "does not set /spec/replicas"},
		{name: "Helm template", object: loop("controller", 1), source: manifest.Source{File: "templates/deployment.yaml", Line: 1, Renderer: manifest.RendererHelm, RenderRoot: "charts/web"},
			note: "truce does not edit templates"},
		{name: "admission loop", object: loop("admission", 1), source: manifest.Source{File: "app/deployment.yaml", Line: 1}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cands, skipped := Candidates(Problem{Tool: "flux", Object: tc.object, Source: tc.source}, read)
			var c *Candidate
			for _, cand := range cands {
				if cand.Kind == KindGiveToController {
					c = cand
				}
			}
			if tc.file == "" {
				if c != nil {
					t.Fatalf("candidate %+v, want none", c)
				}
				if got := strings.Join(skipped, "\n"); tc.note != "" && !strings.Contains(got, string(KindGiveToController)+": ") || !strings.Contains(got, tc.note) {
					t.Errorf("skipped %q, want %q", got, tc.note)
				}
				return
			}
			if c == nil {
				t.Fatalf("no give-to-controller candidate; skipped %v", skipped)
			}
			if got := c.Paths(); len(got) != 1 || got[0] != tc.file {
				t.Fatalf("writes %v, want %s", got, tc.file)
			}
			if got := string(c.Files[tc.file]); got != tc.want {
				t.Errorf("%s:\n%s\nwant:\n%s", tc.file, got, tc.want)
			}
			if !c.FromLive || strings.Join(c.Fields, ",") != "/spec/replicas" {
				t.Errorf("FromLive %v, fields %v: the fix must be verified from the live state", c.FromLive, c.Fields)
			}
			if !strings.Contains(c.Description, "kube-controller-manager then owns /spec/replicas") {
				t.Errorf("description %q", c.Description)
			}
		})
	}
}
