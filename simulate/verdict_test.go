package simulate

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
)

// denyPolicy refuses Deployments whose images come from denied/.
const denyPolicy = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: deny}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  validations:
  - expression: "!object.spec.template.spec.containers.exists(c, c.image.startsWith('denied/'))"
    message: images from denied/ are not allowed
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: deny}
spec: {policyName: deny, validationActions: [Deny]}
`

func deniedDeployment(name string) string {
	return strings.NewReplacer("name: web", "name: "+name, "web}", name+"}", "nginx:1.27", "denied/nginx:1.27").Replace(web)
}

// Flux stops its reconciliation at the first object whose dry run the
// server refuses; the other refused objects are Rejected too, with the
// server's answer. They used to be OutOfSync, "flux shows drift on  and
// does not correct it".
func TestFluxRefusedDryRunsAreRejected(t *testing.T) {
	git := deniedDeployment("a") + "---\n" + deniedDeployment("b") + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: shop}\n"
	want := map[string]Verdict{"a": Rejected, "b": Rejected, "c": OutOfSync}
	d := desiredOf(t, git)
	res, err := Run(context.Background(), newCluster(t, shop+"---\n"+denyPolicy), &Flux{Kustomization: "app", Desired: d}, nil, d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		t.Logf("%s %s: %s: %s", o.Ref, o.Verdict, o.Reason, o.Rejection)
		if o.Verdict != want[o.Ref.Name] {
			t.Errorf("%s: %s, want %s", o.Ref, o.Verdict, want[o.Ref.Name])
		}
		if o.Verdict == Rejected && !strings.Contains(o.Rejection, "images from denied/ are not allowed") {
			t.Errorf("%s: rejection %q", o.Ref, o.Rejection)
		}
	}
}

// A reason names the fields it is about, or does not list any.
func TestReasonsNameTheirFields(t *testing.T) {
	ref := cluster.Ref{Name: "web"}
	res := &Result{Simulated: time.Hour}
	tests := []struct {
		name   string
		drift  *drift.Object
		writes []Write
		want   string
	}{
		{
			name:  "drift the tool's listing cannot place",
			drift: &drift.Object{Status: drift.Drifted, Fields: []drift.Field{{Pointer: "/spec/replicas", IgnoredBy: "ks.yaml:1: spec.ignore[0]"}}},
			want:  "flux shows it as drifted and does not correct it",
		},
		{
			name:  "drift on a field",
			drift: &drift.Object{Status: drift.Drifted, Fields: []drift.Field{{Pointer: "/spec/replicas"}}},
			want:  "flux shows drift on /spec/replicas and does not correct it",
		},
		{
			name: "writes that change no field",
			writes: []Write{
				{At: time.Minute, ByTool: true, Verb: "apply", Ref: ref},
				{At: 2 * time.Minute, ByTool: true, Verb: "apply", Ref: ref},
			},
			want: "flux writes it back 2 times in 1h0m0s; the API server's admission chain (not observable on this cluster) changes it again",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := &Object{Ref: ref, InGit: true, Drift: tt.drift}
			judge(o, &Flux{}, tt.writes, nil, res)
			if o.Reason != tt.want {
				t.Errorf("reason %q, want %q", o.Reason, tt.want)
			}
		})
	}
}
