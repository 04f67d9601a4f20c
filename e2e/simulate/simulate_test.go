//go:build e2e

package simulate

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/manifest"
	sim "github.com/truce-dev/truce/simulate"
)

// caseLabel marks each case's namespace; the case's policy bindings select
// their namespace by it, so that cases running in parallel on the one
// server never see each other's policies.
const caseLabel = "e2e.truce.dev/simulate-case"

// namespaceDoc is a namespace of the case whose main namespace is
// caseNS.
func namespaceDoc(name, caseNS string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata:
  name: %s
  labels: {%s: %s}
`, name, caseLabel, caseNS)
}

// mirrorDocs is the image-mirror MutatingAdmissionPolicy of simulate's unit
// tests, named after the case and bound to its namespace only: it prefixes
// every container image of a Deployment with registry.internal/. The case's
// window namespace carries the same label, so the binding selects it too.
func mirrorDocs(ns string) string {
	return fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: mirror-%[1]s}
spec:
  failurePolicy: Fail
  reinvocationPolicy: IfNeeded
  matchConstraints:
    resourceRules:
    - apiGroups: ["apps"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["deployments"]
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: >
        Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
          containers: object.spec.template.spec.containers
            .filter(c, !c.image.startsWith("registry.internal/"))
            .map(c, Object.spec.template.spec.containers{name: c.name, image: "registry.internal/" + c.image})}}}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: mirror-%[1]s}
spec:
  policyName: mirror-%[1]s
  matchResources:
    namespaceSelector:
      matchLabels: {%[2]s: %[1]s}
`, ns, caseLabel)
}

// deployment is the Deployment in Git (and, named otherwise, the probe).
func deployment(ns, name, image string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: 2
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      containers:
      - {name: main, image: %[3]q}
`, ns, name, image)
}

// hpa is an HPA's controller (kube-controller-manager) holding the case's
// Deployment at 5 replicas, 15 s after each change.
func hpa(ns string) []sim.Writer {
	return []sim.Writer{&sim.FieldWriter{
		Type: "HorizontalPodAutoscaler", Manager: "kube-controller-manager",
		Target: sim.Selector{Group: "apps", Kind: "Deployment", Namespace: ns, Name: "web"},
		Set:    map[string]any{"/spec/replicas": int64(5)}, After: 15 * time.Second,
	}}
}

// argo is an Application named after the case's namespace.
func argo(configure func(*sim.ArgoCD)) func(string, []sim.Desired) sim.Tool {
	return func(ns string, d []sim.Desired) sim.Tool {
		a := &sim.ArgoCD{App: ns, Automated: true, Desired: d}
		configure(a)
		return a
	}
}

// argoIgnore is an Application's ignoreDifferences for Deployments'
// fields at the given pointers.
func argoIgnore(pointers ...string) *ignore.Set {
	set, err := ignore.Compile([]ignore.Rule{{Tool: ignore.ArgoCD, Field: "spec.ignoreDifferences[0]",
		Target: ignore.Target{Group: "apps", Kind: "Deployment"}, JSONPointers: pointers}}, ignore.Options{})
	if err != nil {
		panic(err)
	}
	return set
}

// fluxInterval is the Kustomization's spec.interval in the Flux cases (not
// simulate.DefaultFluxInterval, to show it is honoured).
const fluxInterval = 5 * time.Minute

// flux is a Kustomization named after the case's namespace, ignoring the
// Deployment's fields at the given pointers.
func flux(ignore ...string) func(string, []sim.Desired) sim.Tool {
	return func(ns string, d []sim.Desired) sim.Tool {
		f := &sim.Flux{Kustomization: ns, Namespace: "flux-system", Interval: fluxInterval, Desired: d}
		for _, p := range ignore {
			f.Rules = append(f.Rules, drift.FluxRule{Name: "spec.ignore " + p,
				IgnoreRule: jsondiff.IgnoreRule{Paths: []string{p}, Selector: &jsondiff.Selector{Kind: "Deployment"}}})
		}
		return f
	}
}

// simCase is one GitOps tool and its company in one namespace.
type simCase struct {
	name string
	// mirror puts the image-mirror policy in effect in the case's
	// namespace.
	mirror bool
	// tool returns a fresh tool (tools keep state between rounds) for the
	// case's namespace and Git.
	tool    func(ns string, desired []sim.Desired) sim.Tool
	writers func(ns string) []sim.Writer
	// want is the verdict for the Deployment; for a Loop, wantPeriod its
	// period and wantOther / wantOtherKind the other writer ("$NS" stands
	// for the namespace). An admission step cannot be observed on the
	// server, so there the other writer of an admission loop is checked by
	// kind only; memory names it.
	want          sim.Verdict
	wantPeriod    time.Duration
	wantOther     string
	wantOtherKind string
}

var cases = []simCase{
	{
		name: "mirror-argocd-selfheal", mirror: true,
		tool: argo(func(a *sim.ArgoCD) { a.SelfHeal = true }),
		want: sim.Loop, wantPeriod: sim.DefaultBackoff().Cap,
		wantOther: "MutatingAdmissionPolicy/mirror-$NS (binding mirror-$NS)", wantOtherKind: "admission",
	},
	{
		name: "mirror-argocd-no-selfheal", mirror: true,
		tool: argo(func(*sim.ArgoCD) {}),
		want: sim.OutOfSync,
	},
	{
		name: "mirror-flux", mirror: true,
		tool: flux(),
		want: sim.Synced,
	},
	{
		name: "hpa-argocd-selfheal",
		tool: argo(func(a *sim.ArgoCD) { a.SelfHeal = true }), writers: hpa,
		want: sim.Loop, wantPeriod: 15 * time.Second,
		wantOther: "kube-controller-manager", wantOtherKind: "controller",
	},
	{
		name: "hpa-flux",
		tool: flux(), writers: hpa,
		want: sim.Loop, wantPeriod: fluxInterval,
		wantOther: "kube-controller-manager", wantOtherKind: "controller",
	},
	{
		name: "hpa-flux-ignore-replicas",
		tool: flux("/spec/replicas"), writers: hpa,
		want: sim.Synced,
	},
	{
		name: "mirror-argocd-ssa-ssd-mutation-webhook", mirror: true,
		tool: argo(func(a *sim.ArgoCD) {
			a.SelfHeal, a.ServerSideApply, a.ServerSideDiff, a.IncludeMutationWebhook = true, true, true, true
		}),
		want: sim.Synced,
	},
	{
		name: "mirror-argocd-ssa-ssd", mirror: true,
		tool: argo(func(a *sim.ArgoCD) { a.SelfHeal, a.ServerSideApply, a.ServerSideDiff = true, true, true }),
		want: sim.Synced,
	},
	{
		name: "hpa-argocd-ignore-replicas",
		tool: argo(func(a *sim.ArgoCD) {
			a.SelfHeal, a.RespectIgnoreDifferences = true, true
			a.Rules = argoIgnore("/spec/replicas")
		}),
		writers: hpa,
		want:    sim.Synced,
	},
}

// runs numbers the cases' runs in this process.
var runs atomic.Int64

func TestSimulate(t *testing.T) {
	s := server(t)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runCase(t, s, tc)
		})
	}
}

// runCase sets up the case's namespace (and policy) on the server and on a
// fresh memory cluster, simulates on both and compares; for a Loop it then
// checks the predicted writes against the whole window on the server.
func runCase(t *testing.T, s *apiserver.Server, tc simCase) {
	ctx := t.Context()
	// A namespace of its own on every run, so that -count=N works on the
	// one server.
	ns := fmt.Sprintf("sim%d-%s", runs.Add(1), tc.name)
	wns := ns + "-window"
	docs := namespaceDoc(ns, ns)
	if tc.mirror {
		docs += "---\n" + mirrorDocs(ns)
	}
	objs := parseAll(t, docs)

	lc, err := live.New(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	onServer := objs
	if tc.want == sim.Loop {
		onServer = append(onServer, parse(t, namespaceDoc(wns, ns)))
	}
	if err := s.Apply(ctx, onServer...); err != nil {
		t.Fatal(err)
	}
	var copies []*unstructured.Unstructured
	for _, o := range objs {
		copies = append(copies, o.DeepCopy())
	}
	state, err := admission.NewState(copies...)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := memory.New(ctx, state, admission.Options{
		DisablePlugins:        apiserver.DefaultDisabledAdmissionPlugins,
		FieldValidation:       "Warn", // the server's default, as cluster/live sends none
		ServiceClusterIPRange: "10.0.0.0/16",
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	if tc.mirror {
		waitForMirror(ctx, t, lc, mc, ns)
	}

	memRes, memTime := simulate(ctx, t, "memory", mc, tc, ns, sim.Options{})
	liveRes, liveTime := simulate(ctx, t, "server", lc, tc, ns, sim.Options{})
	t.Logf("memory: %s, server: %s (%d writes simulated)", memTime.Round(time.Millisecond), liveTime.Round(time.Millisecond), len(liveRes.Writes))

	checkExpected(t, tc, ns, memRes, liveRes)
	if d := cmp.Diff(viewOf(liveRes), viewOf(memRes)); d != "" {
		t.Errorf("memory's simulation differs from the server's (-server +memory):\n%s", d)
	}
	compareStored(ctx, t, lc, mc, memRes)
	if t.Failed() {
		logRun(t, "server", liveRes)
		logRun(t, "memory", memRes)
	}
	if tc.want == sim.Loop {
		t.Run("window", func(t *testing.T) { checkWindow(ctx, t, lc, tc, wns, memRes) })
	}
}

// checkWindow compares the prediction with the whole window on the
// server: a run in a fresh namespace without a bound on the rounds, so that
// every write of the window is made rather than extrapolated from the
// cycle. The count of writes per object, the verdict and the loop's period
// must be memory's.
func checkWindow(ctx context.Context, t *testing.T, lc *live.Cluster, tc simCase, wns string, predicted *sim.Result) {
	if tc.mirror {
		waitForMirror(ctx, t, lc, nil, wns)
	}
	full, d := simulate(ctx, t, "server, whole window", lc, tc, wns, sim.Options{MaxRounds: math.MaxInt})
	t.Logf("server, whole window: %s (%d rounds, %d writes)", d.Round(time.Millisecond), len(full.Rounds), len(full.Writes))
	if full.Simulated != full.Window {
		t.Fatalf("simulated %s of %s", full.Simulated, full.Window)
	}
	if len(full.Objects) != len(predicted.Objects) {
		t.Fatalf("%d objects judged over the whole window, %d predicted", len(full.Objects), len(predicted.Objects))
	}
	for i, o := range full.Objects {
		p := predicted.Objects[i]
		if o.Verdict != p.Verdict || o.Writes != p.Writes {
			t.Errorf("%s: %s with %d writes in %s on the server; memory predicts %s with %d writes (%d made, the rest extrapolated from %s)",
				o.Ref.Name, o.Verdict, o.Writes, full.Window, p.Verdict, p.Writes, len(predicted.Writes), predicted.Simulated)
		}
		if o.Loop != nil && p.Loop != nil && o.Loop.Period != p.Loop.Period {
			t.Errorf("%s: loop period %s over the whole window, %s predicted", o.Ref.Name, o.Loop.Period, p.Loop.Period)
		}
	}
}

// simulate runs the case on c with a fresh tool and writers.
func simulate(ctx context.Context, t *testing.T, what string, c cluster.Cluster, tc simCase, ns string, opts sim.Options) (*sim.Result, time.Duration) {
	t.Helper()
	desired := []sim.Desired{{Object: parse(t, deployment(ns, "web", "nginx:1.27")), Source: manifest.Source{File: "git.yaml", Line: 1}}}
	var writers []sim.Writer
	if tc.writers != nil {
		writers = tc.writers(ns)
	}
	start := time.Now()
	res, err := sim.Run(ctx, c, tc.tool(ns, desired), writers, desired, opts)
	if err != nil {
		t.Fatalf("simulating on %s: %v", what, err)
	}
	return res, time.Since(start)
}

// checkExpected keeps the case honest: the server's run must come to the
// case's verdict (memory's is compared with the server's), and memory must
// name the other writer of a loop.
func checkExpected(t *testing.T, tc simCase, ns string, memRes, liveRes *sim.Result) {
	t.Helper()
	for _, r := range []struct {
		what string
		res  *sim.Result
	}{{"server", liveRes}, {"memory", memRes}} {
		if len(r.res.Objects) != 1 {
			t.Fatalf("%s: %d objects judged, want 1 (the Deployment)", r.what, len(r.res.Objects))
		}
		o := r.res.Objects[0]
		if o.Verdict != tc.want {
			t.Errorf("%s: verdict %s (%s), want %s", r.what, o.Verdict, o.Reason, tc.want)
			continue
		}
		if tc.want != sim.Loop {
			if o.Loop != nil {
				t.Errorf("%s: loop %+v on a %s verdict", r.what, *o.Loop, o.Verdict)
			}
			continue
		}
		if o.Loop == nil {
			t.Errorf("%s: Loop verdict without loop information", r.what)
			continue
		}
		if o.Loop.Period != tc.wantPeriod {
			t.Errorf("%s: loop period %s, want %s", r.what, o.Loop.Period, tc.wantPeriod)
		}
		if o.Loop.OtherKind != tc.wantOtherKind {
			t.Errorf("%s: the other writer is of kind %q (%s), want %q", r.what, o.Loop.OtherKind, o.Loop.Other, tc.wantOtherKind)
		}
		if want := strings.ReplaceAll(tc.wantOther, "$NS", ns); (r.what == "memory" || tc.wantOtherKind != "admission") && o.Loop.Other != want {
			t.Errorf("%s: the other writer is %q, want %q", r.what, o.Loop.Other, want)
		}
		// Offline, the admission step travels as data for the fixes.
		if r.what == "memory" && tc.wantOtherKind == "admission" && (o.Loop.OtherStep == nil || o.Loop.OtherStep.String() != o.Loop.Other) {
			t.Errorf("%s: the other writer's step is %v, want %q", r.what, o.Loop.OtherStep, o.Loop.Other)
		}
	}
}

// waitForMirror returns once the server applies the case's mirror policy:
// a server-side dry-run create of a probe Deployment in the case's
// namespace, repeated until its image comes back mirrored. Memory (if not
// nil) compiles its policies when it is built, so there the same dry run
// must mirror at once.
func waitForMirror(ctx context.Context, t *testing.T, lc *live.Cluster, mc *memory.Cluster, ns string) {
	t.Helper()
	const (
		timeout  = 60 * time.Second
		interval = 100 * time.Millisecond
		want     = "registry.internal/busybox:1.37"
	)
	probe := parse(t, deployment(ns, "mirror-probe", "busybox:1.37"))
	opts := cluster.WriteOptions{FieldManager: "simulate-e2e-probe", DryRun: true}
	image := func(c cluster.Cluster) (string, error) {
		out, err := c.Create(ctx, probe.DeepCopy(), opts)
		if err != nil {
			return "", err
		}
		cs, _, _ := unstructured.NestedSlice(out.Object, "spec", "template", "spec", "containers")
		if len(cs) != 1 {
			return "", fmt.Errorf("%d containers in the answer", len(cs))
		}
		img, _ := cs[0].(map[string]any)["image"].(string)
		return img, nil
	}
	start := time.Now()
	attempts := 0
	var got string
	var lastErr error
	err := wait.PollUntilContextTimeout(ctx, interval, timeout, true, func(context.Context) (bool, error) {
		attempts++
		got, lastErr = image(lc)
		return lastErr == nil && got == want, nil
	})
	if err != nil {
		t.Fatalf("the mirror policy is not in effect on the server after %s (%d dry runs): image %q, error %v", timeout, attempts, got, lastErr)
	}
	t.Logf("mirror policy in effect on the server after %s (%d probe dry runs)", time.Since(start).Round(time.Millisecond), attempts)
	if mc == nil {
		return
	}
	if got, err := image(mc); err != nil || got != want {
		t.Fatalf("the probe shows the mirror policy in effect on the server, not on memory: image %q, error %v", got, err)
	}
}

// resultView is what two runs of one case must share. Left out: the
// admission steps of each write and, for loops fought inside the tool's own
// request, the name of the step (the server does not say which admission
// step changed a request), and the Origin of drifted fields (the same).
type resultView struct {
	Tool, Settings    string
	Window, Simulated time.Duration
	Objects           []objectView
	Rounds            []roundView
	Writes            []writeView
}

type objectView struct {
	Ref     string
	InGit   bool
	Verdict sim.Verdict
	// Reason is compared except for admission loops, whose reason names the
	// other writer.
	Reason        string
	Writes        int
	Loop          *sim.LoopInfo
	Rejected      bool
	DriftStatus   drift.Status
	DriftFields   []fieldView
	Unpredictable []string
}

type fieldView struct {
	Pointer       string
	Desired, Live any
	Absent        [2]bool
	IgnoredBy     string
}

type roundView struct {
	At                         time.Duration
	Trigger                    string
	OutOfSync, Applied, Pruned []string
	Failed                     bool
}

type writeView struct {
	At      time.Duration
	Writer  string
	ByTool  bool
	Verb    string
	Ref     string
	Changed bool
	Fields  []fieldView
	Failed  bool
}

func viewOf(res *sim.Result) resultView {
	v := resultView{Tool: res.Tool, Settings: res.Settings, Window: res.Window, Simulated: res.Simulated}
	for _, o := range res.Objects {
		ov := objectView{Ref: o.Ref.String(), InGit: o.InGit, Verdict: o.Verdict, Reason: o.Reason, Writes: o.Writes,
			Rejected: o.Rejection != "", Unpredictable: o.Unpredictable}
		if o.Loop != nil {
			l := *o.Loop
			if l.OtherKind == "admission" {
				// The server's admission step is not observable there.
				l.Other, l.OtherStep, ov.Reason = "", nil, ""
			}
			ov.Loop = &l
		}
		if o.Drift != nil {
			ov.DriftStatus = o.Drift.Status
			ov.DriftFields = fieldsView(o.Drift.Fields)
		}
		v.Objects = append(v.Objects, ov)
	}
	for _, r := range res.Rounds {
		v.Rounds = append(v.Rounds, roundView{At: r.At, Trigger: r.Trigger,
			OutOfSync: refs(r.OutOfSync), Applied: refs(r.Applied), Pruned: refs(r.Pruned), Failed: len(r.Failed) > 0})
	}
	for _, w := range res.Writes {
		v.Writes = append(v.Writes, writeView{At: w.At, Writer: w.Writer, ByTool: w.ByTool, Verb: w.Verb,
			Ref: w.Ref.String(), Changed: w.Changed, Fields: fieldsView(w.Fields), Failed: w.Error != ""})
	}
	return v
}

func fieldsView(fs []drift.Field) []fieldView {
	var out []fieldView
	for _, f := range fs {
		out = append(out, fieldView{Pointer: f.Pointer, Desired: jsonValue(f.Desired), Live: jsonValue(f.Live),
			Absent: [2]bool{f.DesiredAbsent, f.LiveAbsent}, IgnoredBy: f.IgnoredBy})
	}
	return out
}

// jsonValue is v as a generic JSON value, so that int64 and float64 of the
// same number compare equal.
func jsonValue(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("unencodable %T: %v", v, err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return fmt.Sprintf("undecodable %s: %v", data, err)
	}
	return out
}

func refs(rs []cluster.Ref) []string {
	var out []string
	for _, r := range rs {
		out = append(out, r.String())
	}
	return out
}

// compareStored compares what both clusters store for the judged objects
// at the end of the window: labels, annotations and spec.
func compareStored(ctx context.Context, t *testing.T, lc *live.Cluster, mc *memory.Cluster, res *sim.Result) {
	t.Helper()
	for _, o := range res.Objects {
		l, lerr := lc.Get(ctx, o.Ref)
		m, merr := mc.Get(ctx, o.Ref)
		if (lerr == nil) != (merr == nil) {
			t.Errorf("stored %s: server: %v, memory: %v", o.Ref, lerr, merr)
			continue
		}
		if lerr != nil {
			continue
		}
		view := func(u *unstructured.Unstructured) any {
			return jsonValue(map[string]any{"labels": u.GetLabels(), "annotations": u.GetAnnotations(), "spec": u.Object["spec"]})
		}
		if d := cmp.Diff(view(l), view(m)); d != "" {
			t.Errorf("stored %s: memory differs from the server (-server +memory):\n%s", o.Ref, d)
		}
	}
}

// logRun logs a run's rounds and writes, for a failing case.
func logRun(t *testing.T, what string, res *sim.Result) {
	t.Helper()
	for _, o := range res.Objects {
		t.Logf("%s: %s %s: %s (writes %d, loop %+v)", what, o.Ref, o.Verdict, o.Reason, o.Writes, o.Loop)
	}
	for _, r := range res.Rounds {
		t.Logf("%s: round at %s (%s): out of sync %v, applied %v", what, r.At, r.Trigger, refs(r.OutOfSync), refs(r.Applied))
	}
	for _, w := range res.Writes {
		var fs []string
		for _, f := range w.Fields {
			fs = append(fs, fmt.Sprintf("%s: %v -> %v", f.Pointer, jsonValue(f.Desired), jsonValue(f.Live)))
		}
		t.Logf("%s: write at %s by %s (tool %v): %s %s changed=%v admission=%v error=%q fields=%v",
			what, w.At, w.Writer, w.ByTool, w.Verb, w.Ref, w.Changed, w.Admission, w.Error, fs)
	}
}

// parse decodes one YAML document as the API machinery decodes JSON
// (integers as int64).
func parse(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatalf("%v in\n%s", err, doc)
	}
	return u
}

// parseAll decodes "---"-separated YAML documents.
func parseAll(t testing.TB, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(doc) != "" {
			out = append(out, parse(t, doc))
		}
	}
	return out
}
