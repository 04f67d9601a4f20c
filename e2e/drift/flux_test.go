//go:build e2e

package drift

import (
	"context"
	"encoding/json"
	"sort"
	"testing"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/jsondiff"
	"github.com/fluxcd/pkg/ssa/normalize"
	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/truce-dev/truce/cluster"
	tdrift "github.com/truce-dev/truce/drift"
)

// fluxCase is what a case expects of Flux, checked against Flux's own code
// run on the real server (so a case that stops showing what it is meant to
// fails even if truce agrees with the server).
type fluxCase struct {
	rules []tdrift.FluxRule
	// want is the expected status.
	want tdrift.Status
	// wantFields are the expected non-ignored field pointers (Drifted).
	wantFields []string
}

// fluxOwner is kustomize-controller's field owner.
var fluxOwner = ssa.Owner{Field: tdrift.FluxFieldManager, Group: "kustomize.toolkit.fluxcd.io"}

func TestFlux(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			skipIfKnown(t, tc)
			e := newEnv(ctx, t, s, "drift-", tc)
			e.runHistory(ctx, t, tc.steps)
			e.checkStored(ctx, t, tc.desired, tc.wantStored)
			e.compareDryRunApply(ctx, t, tc.desired, tdrift.FluxFieldManager)
			e.checkFlux(ctx, t, tc)
		})
	}
}

// compareDryRunApply asserts that a forced server-side apply dry run of
// desired by manager (kustomize-controller is what Flux sends,
// argocd-controller what Argo CD's server-side diff sends) returns the same
// object on both clusters, managedFields included, and stores nothing.
func (e *env) compareDryRunApply(ctx context.Context, t *testing.T, desired, manager string) {
	t.Helper()
	obj := e.object(ctx, t, desired)
	ref := cluster.RefOf(obj)
	liveBefore, memBefore := e.stored(ctx, t, "before the dry run", ref)
	opts := cluster.ApplyOptions{FieldManager: manager, Force: true, DryRun: true}
	liveOut, liveErr := e.live.Apply(ctx, obj.DeepCopy(), opts)
	memOut, memErr := e.mem.Apply(ctx, obj.DeepCopy(), opts)
	if liveErr != nil {
		t.Fatalf("dry-run apply of desired: server: %v", liveErr)
	}
	if memErr != nil {
		t.Fatalf("dry-run apply of desired: the server accepted it, memory answered: %v", memErr)
	}
	compareObjects(t, "dry-run apply of desired", liveOut, memOut)
	if (liveOut.GetResourceVersion() == "") != (memOut.GetResourceVersion() == "") {
		t.Errorf("dry-run apply of desired: resourceVersion %q on the server, %q on memory", liveOut.GetResourceVersion(), memOut.GetResourceVersion())
	}
	liveAfter, memAfter := e.stored(ctx, t, "after the dry run", ref)
	if liveBefore != nil {
		noOp(t, "dry run on the server", liveBefore, liveAfter)
		noOp(t, "dry run on memory", memBefore, memAfter)
	}
}

// checkFlux runs Flux's drift decision three ways: Flux's own code
// (fluxcd/pkg/ssa ResourceManager.Diff with a controller-runtime client of
// the server: the oracle), drift.Flux on the server and drift.Flux on the
// memory cluster; the three must agree.
func (e *env) checkFlux(ctx context.Context, t *testing.T, tc testCase) {
	t.Helper()
	desired := e.object(ctx, t, tc.desired)

	// The oracle, as kustomize-controller runs it: normalise, then Diff.
	oracleClient, err := client.New(e.srv.RESTConfig(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	obj := desired.DeepCopy()
	if err := normalize.Unstructured(obj); err != nil {
		t.Fatal(err)
	}
	rules := make([]jsondiff.IgnoreRule, len(tc.flux.rules))
	for i, r := range tc.flux.rules {
		rules[i] = r.IgnoreRule
	}
	entry, _, _, err := ssa.NewResourceManager(oracleClient, nil, fluxOwner).Diff(ctx, obj, ssa.DiffOptions{DriftIgnoreRules: rules})
	if err != nil {
		t.Fatalf("Flux's Diff on the server: %v", err)
	}
	oracle := statusOfAction(entry.Action)

	liveRes, err := (&tdrift.Flux{Cluster: e.live, Rules: tc.flux.rules}).Diff(ctx, desired.DeepCopy())
	if err != nil {
		t.Fatalf("drift.Flux on the server: %v", err)
	}
	memRes, err := (&tdrift.Flux{Cluster: e.mem, Rules: tc.flux.rules}).Diff(ctx, desired.DeepCopy())
	if err != nil {
		t.Fatalf("drift.Flux on memory: %v", err)
	}
	t.Logf("Flux: %s; drift.Flux on the server: %s %v", entry.Action, liveRes.Status, pointers(liveRes, true))

	if oracle != tc.flux.want {
		t.Errorf("Flux's own Diff on the server says %s (%s), the case expects %s", oracle, entry.Action, tc.flux.want)
	}
	if liveRes.Status != oracle {
		t.Errorf("drift.Flux on the server says %s, Flux's own Diff %s (%s)", liveRes.Status, oracle, entry.Action)
	}
	if d := cmp.Diff(tc.flux.wantFields, pointers(liveRes, false)); d != "" {
		t.Errorf("drift.Flux on the server: non-ignored fields differ from the case's (-want +got):\n%s", d)
	}
	if memRes.Status != liveRes.Status {
		t.Errorf("drift.Flux: %s on memory, %s on the server", memRes.Status, liveRes.Status)
	}
	if d := cmp.Diff(pointers(liveRes, false), pointers(memRes, false)); d != "" {
		t.Errorf("drift.Flux: non-ignored fields differ (-server +memory):\n%s", d)
	}
	if d := cmp.Diff(jsonValue(t, liveRes.Fields), jsonValue(t, memRes.Fields)); d != "" {
		t.Errorf("drift.Flux: fields (values, origins, ignore rules) differ (-server +memory):\n%s", d)
	}
}

// statusOfAction maps Flux's change-set action to a drift status.
func statusOfAction(a ssa.Action) tdrift.Status {
	switch a {
	case ssa.UnchangedAction:
		return tdrift.InSync
	case ssa.ConfiguredAction:
		return tdrift.Drifted
	case ssa.CreatedAction:
		return tdrift.Missing
	case ssa.SkippedAction:
		return tdrift.Excluded
	}
	return tdrift.Status("unexpected action " + a.String())
}

// pointers lists the pointers of o's fields, ignored ones only if
// withIgnored (then marked "(ignored by RULE)").
func pointers(o *tdrift.Object, withIgnored bool) []string {
	var out []string
	for _, f := range o.Fields {
		switch {
		case f.IgnoredBy == "":
			out = append(out, f.Pointer)
		case withIgnored:
			out = append(out, f.Pointer+" (ignored by "+f.IgnoredBy+")")
		}
	}
	sort.Strings(out)
	return out
}

// jsonValue is v as generic JSON values, so that numbers compare equal
// whatever Go type each side decoded them to.
func jsonValue(t *testing.T, v any) any {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// rule is a Flux ignore rule; sel may be nil (every object).
func rule(name string, sel *jsondiff.Selector, paths ...string) tdrift.FluxRule {
	return tdrift.FluxRule{Name: name, IgnoreRule: jsondiff.IgnoreRule{Paths: paths, Selector: sel}}
}
