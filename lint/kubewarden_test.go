package lint

import (
	"context"
	"strings"
	"testing"

	"github.com/truce-dev/truce/manifest"
)

// TestKubewardenNotEvaluated: a policy is reported unless a webhook of
// the input calls the Service of its own PolicyServer.
func TestKubewardenNotEvaluated(t *testing.T) {
	policy := func(kind, server string) string {
		s := "apiVersion: policies.kubewarden.io/v1\nkind: " + kind + "\nmetadata: {name: p, namespace: team}\nspec:\n  module: registry://ghcr.io/kubewarden/policies/x:v1.0.0\n"
		if server != "" {
			s += "  policyServer: " + server + "\n"
		}
		return s
	}
	hook := func(service string) string {
		return `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: w}
webhooks:
- name: w.kubewarden.admission
  admissionReviewVersions: [v1]
  sideEffects: None
  clientConfig: {service: {namespace: kubewarden, name: ` + service + `}}
`
	}
	tests := []struct {
		name string
		docs []string
		want string // "" for no finding
	}{
		{"no webhook", []string{policy("ClusterAdmissionPolicy", "")}, `PolicyServer "default"`},
		{"default server's webhook", []string{policy("ClusterAdmissionPolicy", ""), hook("policy-server-default")}, ""},
		{"another server's webhook", []string{policy("AdmissionPolicy", "tenants"), hook("policy-server-default")}, `Kubewarden AdmissionPolicy "p" (registry://ghcr.io/kubewarden/policies/x:v1.0.0) is not evaluated: no webhook configuration of the input calls its PolicyServer "tenants"`},
		{"own server's webhook", []string{policy("AdmissionPolicyGroup", "tenants"), hook("policy-server-tenants")}, ""},
		{"not a policy", []string{"apiVersion: policies.kubewarden.io/v1\nkind: PolicyServer\nmetadata: {name: default}\n"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []manifest.Object
			for _, d := range tt.docs {
				o, err := manifest.Decode("in.yaml", strings.NewReader(d), manifest.Options{})
				if err != nil {
					t.Fatal(err)
				}
				objs = append(objs, o...)
			}
			fs, err := checkKubewardenNotEvaluated(context.Background(), &Input{Objects: objs})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tt.want == "" && len(fs) != 0:
				t.Fatalf("findings %+v, want none", fs)
			case tt.want != "" && (len(fs) != 1 || !strings.Contains(fs[0].Message, tt.want)):
				t.Fatalf("findings %+v, want one containing %q", fs, tt.want)
			}
		})
	}
}
