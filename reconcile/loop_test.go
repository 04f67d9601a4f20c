package reconcile

import (
	"context"
	"strings"
	"testing"

	"github.com/truce-dev/truce/cluster"
)

func TestImageMirrorIsNotALoopWithServerDryRun(t *testing.T) {
	c := newCluster(t, readFile(t, "../examples/image-mirror/cluster/image-mirror.yaml")+"\n---\n"+shopNamespace)
	r, _ := newReconciler(t, c, web, DefaultOptions())
	runPass(t, r)
	for i := 0; i < 4; i++ {
		res := runPass(t, r)
		if res.Writes != 0 || len(res.Contested) != 0 {
			t.Fatalf("pass %d: writes %d, %+v", i, res.Writes, res.Objects)
		}
	}
}

func TestImageMirrorLoopIsBrokenAndTheMAPNamed(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t, readFile(t, "../examples/image-mirror/cluster/image-mirror.yaml")+"\n---\n"+shopNamespace)
	clock := newClock()
	rec := &events{}
	opts := DefaultOptions()
	opts.Drift = DriftOffline
	// The prediction is given the repository's admission configuration,
	// which does not have the cluster's image-mirror policy (here: none;
	// the namespace is assumed).
	predictor := FixedAdmission(nil)
	t.Cleanup(predictor.Close)
	view := ClusterAdmission(c)
	t.Cleanup(view.Close)
	r, _ := newReconciler(t, c, web, opts, WithPredictor(predictor), WithAdmission(view), WithClock(clock.now), WithRecorder(rec))
	writes := 0
	var res *Result
	for i := 0; i < 6; i++ {
		res = runPass(t, r)
		writes += res.Writes
		clock.add(r.opts.Backoff.Delay(i))
		if len(res.Contested) > 0 {
			break
		}
	}
	if len(res.Contested) != 1 {
		t.Fatalf("no contest after %d writes: %+v", writes, res.Objects)
	}
	if writes > opts.Loop.Threshold {
		t.Fatalf("truce wrote the image %d times, more than the threshold %d", writes, opts.Loop.Threshold)
	}
	con := res.Contested[0]
	if con.Pointer != "/spec/template/spec/containers/0/image" || !strings.Contains(con.Writer.Admission, "MutatingAdmissionPolicy/image-mirror.example.com") {
		t.Fatalf("contest: %+v", con)
	}
	t.Logf("contest after %d writes: %+v", writes, con)
	if con.Fix.Kind != "git-value" || !strings.Contains(con.Fix.Description, "registry.internal/nginx:1.27") {
		t.Fatalf("fix: %+v", con.Fix)
	}
	if len(rec.got) == 0 || !strings.Contains(rec.got[len(rec.got)-1], "Contested") {
		t.Fatalf("events: %v", rec.got)
	}
	// Contested: further passes write nothing, and the contest holds.
	for i := 0; i < 3; i++ {
		res = runPass(t, r)
		if res.Writes != 0 || len(res.Contested) != 1 {
			t.Fatalf("after the contest: writes %d contested %d %+v", res.Writes, len(res.Contested), res.Objects)
		}
	}
	// The admission configuration changes where it does not touch the
	// image (a policy for ConfigMaps): the contest holds.
	vap := decode(t, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: cm-keys.example.com}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [configmaps]}
  validations:
  - expression: "size(object.data) < 100"
`)[0].Object
	_, err := c.Create(ctx, vap, cluster.WriteOptions{FieldManager: "kubectl-client-side-apply"})
	must(t, err)
	for i := 0; i < 2; i++ {
		res = runPass(t, r)
		if res.Writes != 0 || len(res.Contested) != 1 {
			t.Fatalf("after an unrelated policy: writes %d, contested %+v", res.Writes, res.Contested)
		}
	}
	if res.Contested[0].Admission == con.Admission || res.Contested[0].Effect != con.Effect {
		t.Fatalf("the contest should hold under the new digest with the same effect: before %+v after %+v", con, res.Contested[0])
	}
	// The admission configuration changes the image no more (the policy
	// goes): the contest is lifted and truce writes Git's image again.
	must(t, c.Delete(ctx, cluster.Ref{GroupVersionKind: mapBindingGVK, Name: "image-mirror-binding.example.com"}, cluster.DeleteOptions{}))
	res = runPass(t, r)
	if len(res.Contested) != 0 || res.Writes != 1 {
		t.Fatalf("after the policy went: writes %d, contested %+v", res.Writes, res.Contested)
	}
}

var mapBindingGVK = cluster.Ref{}.GroupVersionKind

func init() {
	mapBindingGVK.Group, mapBindingGVK.Version, mapBindingGVK.Kind = "admissionregistration.k8s.io", "v1", "MutatingAdmissionPolicyBinding"
}
