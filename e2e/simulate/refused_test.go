//go:build e2e

package simulate

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/manifest"
	sim "github.com/truce-dev/truce/simulate"
)

// denyDocs is a ValidatingAdmissionPolicy, bound to the case's namespace
// only, that denies Deployments whose images come from denied/.
func denyDocs(ns string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: deny-%[1]s}
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
metadata: {name: deny-%[1]s}
spec:
  policyName: deny-%[1]s
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {%[2]s: %[1]s}
`, ns, caseLabel)
}

// Flux stops a reconciliation at the first object whose dry run the server
// refuses; the other refused objects of the Kustomization are never
// reached. truce used to call them OutOfSync with "flux shows drift on  and
// does not correct it" (no field named). They are Rejected, with the
// server's answer, on the server and on memory alike.
func TestFluxStopsAtTheFirstRefusedObject(t *testing.T) {
	t.Parallel()
	s := server(t)
	ctx := t.Context()
	ns := fmt.Sprintf("sim%d-flux-refused", runs.Add(1))
	objs := parseAll(t, namespaceDoc(ns, ns)+"---\n"+denyDocs(ns))
	if err := s.Apply(ctx, objs...); err != nil {
		t.Fatal(err)
	}
	lc, err := live.New(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	state, err := admission.NewState(objs...)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := memory.New(ctx, state, admission.Options{
		DisablePlugins:        apiserver.DefaultDisabledAdmissionPlugins,
		FieldValidation:       "Warn",
		ServiceClusterIPRange: "10.0.0.0/16",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	waitForDenial(ctx, t, lc, ns)

	git := func() []sim.Desired {
		var out []sim.Desired
		for i, doc := range []string{
			deployment(ns, "a", "denied/nginx:1.27"),
			deployment(ns, "b", "denied/nginx:1.27"),
			"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c, namespace: " + ns + "}\ndata: {k: v}\n",
		} {
			out = append(out, sim.Desired{Object: parse(t, doc), Source: manifest.Source{File: "git.yaml", Line: 1 + 12*i}})
		}
		return out
	}
	run := func(what string, c cluster.Cluster) *sim.Result {
		d := git()
		res, err := sim.Run(ctx, c, &sim.Flux{Kustomization: ns, Namespace: "flux-system", Interval: fluxInterval, Desired: d}, nil, d, sim.Options{})
		if err != nil {
			t.Fatalf("simulating on %s: %v", what, err)
		}
		return res
	}
	liveRes, memRes := run("server", lc), run("memory", mc)
	want := map[string]sim.Verdict{"a": sim.Rejected, "b": sim.Rejected, "c": sim.OutOfSync}
	for _, r := range []struct {
		what string
		res  *sim.Result
	}{{"server", liveRes}, {"memory", memRes}} {
		if len(r.res.Objects) != len(want) {
			t.Fatalf("%s: %d objects judged, want %d", r.what, len(r.res.Objects), len(want))
		}
		for _, o := range r.res.Objects {
			if o.Verdict != want[o.Ref.Name] {
				t.Errorf("%s: %s: %s (%s), want %s", r.what, o.Ref, o.Verdict, o.Reason, want[o.Ref.Name])
			}
			if strings.Contains(o.Reason, "  ") || strings.Contains(o.Reason, "on and") {
				t.Errorf("%s: %s: the reason names nothing: %q", r.what, o.Ref, o.Reason)
			}
			if o.Verdict == sim.Rejected && !strings.Contains(o.Rejection, "images from denied/ are not allowed") {
				t.Errorf("%s: %s: rejection %q does not give the server's answer", r.what, o.Ref, o.Rejection)
			}
		}
	}
	if d := cmp.Diff(viewOf(liveRes), viewOf(memRes)); d != "" {
		t.Errorf("memory's simulation differs from the server's (-server +memory):\n%s", d)
	}
	if t.Failed() {
		logRun(t, "server", liveRes)
		logRun(t, "memory", memRes)
	}
}

// waitForDenial returns once the server applies the case's deny policy: a
// server-side dry-run create of a probe Deployment with a denied/ image,
// repeated until the server refuses it.
func waitForDenial(ctx context.Context, t *testing.T, lc *live.Cluster, ns string) {
	t.Helper()
	probe := parse(t, deployment(ns, "deny-probe", "denied/busybox:1.37"))
	opts := cluster.WriteOptions{FieldManager: "simulate-e2e-probe", DryRun: true}
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 60*time.Second, true, func(context.Context) (bool, error) {
		_, lastErr = lc.Create(ctx, probe.DeepCopy(), opts)
		return apierrors.IsInvalid(lastErr) || apierrors.IsForbidden(lastErr), nil
	})
	if err != nil {
		t.Fatalf("the deny policy is not in effect on the server: last dry run: %v", lastErr)
	}
}
