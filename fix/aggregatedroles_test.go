package fix

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

func TestIgnoreAggregatedRoles(t *testing.T) {
	role := cluster.Ref{Name: "monitoring"}
	role.Group, role.Version, role.Kind = "rbac.authorization.k8s.io", "v1", "ClusterRole"
	deployment := cluster.Ref{Namespace: "shop", Name: "web"}
	deployment.Group, deployment.Version, deployment.Kind = "apps", "v1", "Deployment"
	loop := &simulate.Object{Ref: role, Verdict: simulate.Loop, InGit: true,
		Loop: &simulate.LoopInfo{Fields: []string{"/rules"}, Other: simulate.AggregationManager}}
	const cmHead = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm # Argo CD's settings\ndata:\n"
	cases := []struct {
		name     string
		cm       string // argocd-cm.yaml; "" for none
		object   *simulate.Object
		tool     string
		want     []string // in the new argocd-cm
		wantSkip string   // why it is not offered; "-" for not considered at all
	}{
		{name: "no compare options", cm: cmHead + "  url: https://argocd.example.com\n", object: loop, tool: "argocd",
			want: []string{"# Argo CD's settings", "url: https://argocd.example.com", "resource.compareoptions: |", "ignoreAggregatedRoles: true"}},
		{name: "compare options kept", cm: cmHead + "  resource.compareoptions: |\n    ignoreResourceStatusField: crd\n", object: loop, tool: "argocd",
			want: []string{"ignoreAggregatedRoles: true", "ignoreResourceStatusField: crd"}},
		{name: "already set", cm: cmHead + "  resource.compareoptions: |\n    ignoreAggregatedRoles: true\n", object: loop, tool: "argocd",
			wantSkip: "already sets ignoreAggregatedRoles"},
		{name: "no argocd-cm", object: loop, tool: "argocd", wantSkip: `set resource.compareoptions: "ignoreAggregatedRoles: true" in it`},
		{name: "flux", cm: cmHead, object: loop, tool: "flux", wantSkip: "-"},
		{name: "not a ClusterRole", cm: cmHead, tool: "argocd", wantSkip: "-",
			object: &simulate.Object{Ref: deployment, Verdict: simulate.Loop, InGit: true,
				Loop: &simulate.LoopInfo{Fields: []string{"/spec/replicas"}, Other: "kube-controller-manager"}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{}
			p := Problem{Tool: tc.tool, Object: tc.object, ArgoConfig: gitops.DefaultArgoConfig()}
			if tc.cm != "" {
				files["argocd-cm.yaml"] = tc.cm
				objs := objectsOf(t, "argocd-cm.yaml", tc.cm)
				o := gitops.ObjectOf(objs[0])
				cfg, _, err := gitops.ParseArgoConfig(&o, nil)
				if err != nil {
					t.Fatal(err)
				}
				p.ArgoConfig = cfg
			}
			read := func(path string) ([]byte, error) {
				if s, ok := files[path]; ok {
					return []byte(s), nil
				}
				return nil, errNotExist
			}
			cands, skipped := Candidates(p, read)
			var got *Candidate
			for _, c := range cands {
				if c.Kind == KindAggregatedRoles {
					got = c
				}
			}
			notes := strings.Join(skipped, "\n")
			switch {
			case tc.wantSkip == "-":
				if got != nil || strings.Contains(notes, string(KindAggregatedRoles)) {
					t.Fatalf("offered: %v %q", got, notes)
				}
				return
			case tc.wantSkip != "":
				if got != nil || !strings.Contains(notes, tc.wantSkip) {
					t.Fatalf("candidate %v, notes %q; want skipped with %q", got, notes, tc.wantSkip)
				}
				return
			case got == nil:
				t.Fatalf("not offered: %q", notes)
			}
			cm := string(got.Files["argocd-cm.yaml"])
			for _, s := range tc.want {
				if !strings.Contains(cm, s) {
					t.Errorf("argocd-cm lacks %q:\n%s", s, cm)
				}
			}
			objs, err := manifest.Decode("argocd-cm.yaml", strings.NewReader(cm), manifest.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			o := gitops.ObjectOf(objs[0])
			cfg, _, err := gitops.ParseArgoConfig(&o, nil)
			if err != nil || !cfg.IgnoreAggregatedRoles {
				t.Errorf("argocd-cm after the fix: ignoreAggregatedRoles %v (%v)", cfg.IgnoreAggregatedRoles, err)
			}
		})
	}
}
