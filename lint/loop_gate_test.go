package lint

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

func TestHasGitOps(t *testing.T) {
	const role = "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata: {name: r}\n"
	cases := []struct {
		name, files string
		want        bool
	}{
		{name: "aggregated ClusterRole", files: role + "aggregationRule: {clusterRoleSelectors: [{matchLabels: {a: b}}]}\nrules: []\n", want: true},
		{name: "plain ClusterRole", files: role + "rules: []\n", want: false},
		{name: "HPA and a Deployment", files: "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata: {name: d}\n", want: true},
		{name: "HPA alone", files: "apiVersion: autoscaling/v2\nkind: HorizontalPodAutoscaler\nmetadata: {name: h}\n", want: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := manifest.Decode("x.yaml", strings.NewReader(tc.files), manifest.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			if got := hasGitOps(objs, nil); got != tc.want {
				t.Errorf("hasGitOps = %v, want %v", got, tc.want)
			}
		})
	}
}
