//go:build e2e

package drift

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/internal/cli"
)

// syncCase is a repository that brings what its own objects need: a
// Namespace, a CRD, admission policies. $NS in its documents is the case's
// namespace.
type syncCase struct {
	name string
	// objects are the manifests the tool applies, one per file, in the
	// order the files are named in one run of truce and in reverse in the
	// other.
	objects []string
	// settings are the GitOps tool's settings (an Application, a
	// Kustomization), in files of their own.
	settings []string
	// server is the order the tool applies the objects in, as Argo CD's and
	// Flux's documentation describe it, written out here (not computed by
	// truce): stages of positions in objects, applied to the server one
	// after the other, each once the one before is in effect.
	server []serverStage
	// wantDrift, if set, is the object (position in objects) the server
	// must store with a Git field changed, to keep the case honest.
	wantDrift int
}

// serverStage is objects applied together; probe, if set, shows the
// admission configuration of the stage in effect before the next.
type serverStage struct {
	objects []int
	probe   *admissionProbe
	// probeObject is the position in objects of the object probe
	// dry-runs.
	probeObject int
}

const (
	orderNamespace = `apiVersion: v1
kind: Namespace
metadata: {name: $NS}
`
	orderDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: $NS
  labels: {app: web}
spec:
  replicas: 1
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - {name: web, image: nginx:1.27}
`
	orderCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: gadgets.order.drift.truce.dev}
spec:
  group: order.drift.truce.dev
  scope: Namespaced
  names: {plural: gadgets, singular: gadget, kind: Gadget, listKind: GadgetList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
              mode: {type: string, default: auto}
`
	orderGadget = `apiVersion: order.drift.truce.dev/v1
kind: Gadget
metadata: {name: g, namespace: $NS}
spec: {size: 3}
`
	// orderMirror rewrites the images of Deployments in the case's
	// namespace (and no other: the server is shared) to an internal
	// registry; sync wave -1 puts it before them.
	orderMirror = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: mirror-$NS
  annotations: {argocd.argoproj.io/sync-wave: "-1"}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: >
        object.spec.template.spec.containers.filter(c, !c.image.startsWith("registry.internal/")).map(c,
          JSONPatch{op: "replace", path: "/spec/template/spec/containers/" + string(object.spec.template.spec.containers.indexOf(c)) + "/image",
          value: "registry.internal/" + c.image})
`
	orderMirrorBinding = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: mirror-$NS
  annotations: {argocd.argoproj.io/sync-wave: "-1"}
spec:
  policyName: mirror-$NS
  matchResources:
    namespaceSelector:
      matchLabels: {kubernetes.io/metadata.name: $NS}
`
	orderApplication = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: argocd}
spec:
  project: default
  destination: {server: https://kubernetes.default.svc, namespace: $NS}
  syncPolicy:
    automated: {selfHeal: true}
`
	orderKustomization = `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: shop, namespace: flux-system}
spec:
  interval: 10m
  path: ./
  prune: true
  sourceRef: {kind: GitRepository, name: shop}
`
)

var syncCases = []syncCase{
	{name: "namespace", objects: []string{orderNamespace, orderDeployment},
		server: []serverStage{{objects: []int{0}}, {objects: []int{1}}}, wantDrift: -1},
	{name: "namespace-flux", objects: []string{orderNamespace, orderDeployment}, settings: []string{orderKustomization},
		server: []serverStage{{objects: []int{0}}, {objects: []int{1}}}, wantDrift: -1},
	{name: "crd", objects: []string{orderNamespace, orderCRD, orderGadget},
		server: []serverStage{{objects: []int{0, 1}}, {objects: []int{2}}}, wantDrift: -1},
	// Argo CD applies wave -1 (the policy and its binding) before wave 0,
	// where the Namespace precedes the Deployment by kind: the Deployment
	// is stored with the mirrored image. Without the waves the policy, a
	// kind Argo CD does not rank, would come last.
	{name: "sync-wave", objects: []string{orderNamespace, orderDeployment, orderMirror, orderMirrorBinding},
		settings: []string{orderApplication},
		server: []serverStage{
			{objects: []int{2, 3}},
			{objects: []int{0}, probeObject: 1, probe: &admissionProbe{want: `
spec: {template: {spec: {containers: [{name: web, image: registry.internal/nginx:1.27}]}}}`}},
			{objects: []int{1}},
		},
		wantDrift: 1},
}

// TestPredictedSync: truce diff --strategy predicted on a repository that
// brings its own Namespace, CRD or admission policies says, for every
// object, what the server stores once the GitOps tool has applied the
// repository in its order: no rejection, and the fields Git sets that
// admission changes, with the stored values. Each case runs truce on the
// files in two orders; the answer must not depend on it.
func TestPredictedSync(t *testing.T) {
	s := server(t)
	ctx := t.Context()
	for _, tc := range syncCases {
		t.Run(tc.name, func(t *testing.T) {
			ns := "drift-order-" + tc.name
			docs := make([]*unstructured.Unstructured, len(tc.objects))
			for i, d := range tc.objects {
				docs[i] = parse(t, strings.ReplaceAll(d, "$NS", ns))
			}
			lc := applyInStages(ctx, t, s, docs, tc.server)
			stored := make([]*unstructured.Unstructured, len(docs))
			for i, d := range docs {
				got, err := lc.Get(ctx, cluster.RefOf(d))
				if err != nil {
					t.Fatalf("reading %s from the server: %v", cluster.RefOf(d), err)
				}
				stored[i] = got
				if drifted := len(gitDrift(d.Object, got.Object, "")) > 0; drifted != (i == tc.wantDrift) {
					t.Fatalf("the server stores %s with Git's fields changed: %v, the case expects %v (the case is wrong)",
						cluster.RefOf(d), drifted, i == tc.wantDrift)
				}
			}
			for _, reverse := range []bool{false, true} {
				t.Run(fmt.Sprintf("reverse=%v", reverse), func(t *testing.T) {
					got := predictSync(ctx, t, ns, tc, reverse)
					if len(got) != len(docs) {
						t.Fatalf("truce answered for %d objects, want %d", len(got), len(docs))
					}
					for i, d := range docs {
						o := got[i]
						ref := cluster.RefOf(d)
						if o.Kind != d.GetKind() || o.Name != d.GetName() {
							t.Fatalf("answer %d is for %s %s, want %s", i, o.Kind, o.Name, ref)
						}
						drifted := gitDrift(d.Object, stored[i].Object, "")
						wantStatus := "InSync"
						if len(drifted) > 0 {
							wantStatus = "Drifted"
						}
						want := jsonValue(t, drifted)
						if o.Status != wantStatus {
							t.Errorf("%s: truce says %s %v, the server stores it %s", ref, o.Status, o.Notes, wantStatus)
						}
						gotFields := map[string]any{}
						for _, f := range o.Fields {
							gotFields[f.Pointer] = f.Live
						}
						if d := cmp.Diff(want, jsonValue(t, gotFields)); d != "" {
							t.Errorf("%s: the fields Git sets that admission changes, and their stored values (-server +truce):\n%s", ref, d)
						}
					}
				})
			}
		})
	}
}

// applyInStages server-side applies docs to the server stage by stage,
// waiting after each for its CRDs to be served and its admission
// configuration in effect.
func applyInStages(ctx context.Context, t *testing.T, s *apiserver.Server, docs []*unstructured.Unstructured, stages []serverStage) *live.Cluster {
	t.Helper()
	lc := newLiveCluster(t, s)
	// No namespace: a CRD's kind is served once it lists cluster-wide.
	e := &env{srv: s, live: lc}
	for _, st := range stages {
		for _, i := range st.objects {
			if _, err := lc.Apply(ctx, docs[i].DeepCopy(), cluster.ApplyOptions{FieldManager: "drift-e2e-sync", Force: true}); err != nil {
				t.Fatalf("applying %s to the server: %v", cluster.RefOf(docs[i]), err)
			}
			if docs[i].GetKind() == "CustomResourceDefinition" {
				e.waitServed(ctx, t, docs[i])
			}
		}
		if st.probe != nil {
			waitForAdmission(ctx, t, s, lc, nil, docs[st.probeObject], *st.probe)
		}
	}
	return lc
}

// predictedObject is what truce diff -o json says of one object.
type predictedObject struct {
	Kind, Name, Status string
	Notes              []string
	Fields             []struct {
		Pointer string
		Live    any
	}
}

// predictSync writes the case's files to a directory, numbered in the
// order of its objects (or in reverse), and returns what truce diff
// --strategy predicted says of each object, in the order of the case's
// objects.
func predictSync(ctx context.Context, t *testing.T, ns string, tc syncCase, reverse bool) []predictedObject {
	t.Helper()
	dir := t.TempDir()
	write := func(name, doc string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(strings.ReplaceAll(doc, "$NS", ns)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i, d := range tc.objects {
		n := i
		if reverse {
			n = len(tc.objects) - 1 - i
		}
		write(fmt.Sprintf("%02d.yaml", n), d)
	}
	for i, d := range tc.settings {
		write(fmt.Sprintf("settings-%d.yaml", i), d)
	}
	var out, errOut bytes.Buffer
	code := cli.Execute(ctx, []string{"diff", dir, "--strategy", "predicted", "-o", "json",
		"--disable-admission-plugins", strings.Join(apiserver.DefaultDisabledAdmissionPlugins, ",")},
		strings.NewReader(""), &out, &errOut)
	if code == 2 {
		t.Fatalf("truce diff failed: %s", errOut.String())
	}
	var report struct{ Objects []predictedObject }
	if err := json.Unmarshal(out.Bytes(), &report); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	// The report follows the files; put it back in the case's order.
	got := report.Objects
	if reverse {
		for i, j := 0, len(got)-1; i < j; i, j = i+1, j-1 {
			got[i], got[j] = got[j], got[i]
		}
	}
	return got
}

// gitDrift returns the JSON pointers of the fields desired sets whose
// stored value differs, with the stored value (nil when absent): leaves of
// desired, and lists whose length differs, whole.
func gitDrift(desired, stored any, pointer string) map[string]any {
	out := map[string]any{}
	switch d := desired.(type) {
	case map[string]any:
		s, _ := stored.(map[string]any)
		for k, v := range d {
			key := strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
			for p, sv := range gitDrift(v, s[k], pointer+"/"+key) {
				out[p] = sv
			}
		}
		return out
	case []any:
		s, ok := stored.([]any)
		if !ok || len(s) != len(d) {
			out[pointer] = stored
			return out
		}
		for i := range d {
			for p, sv := range gitDrift(d[i], s[i], fmt.Sprintf("%s/%d", pointer, i)) {
				out[p] = sv
			}
		}
		return out
	}
	if !cmp.Equal(desired, stored) {
		out[pointer] = stored
	}
	return out
}

// newLiveCluster is the server through cluster/live.
func newLiveCluster(t *testing.T, s *apiserver.Server) *live.Cluster {
	t.Helper()
	lc, err := live.New(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return lc
}
