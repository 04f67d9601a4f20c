package reconcile

import (
	"context"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/truce-dev/truce/cluster"
)

func TestIsHuman(t *testing.T) {
	opts := LoopOptions{HumanFieldManagers: []string{"k9s", "Lens"}}
	for manager, want := range map[string]bool{
		"kubectl":                   true, // kubectl scale, kubectl apply --server-side
		"kubectl-edit":              true,
		"kubectl-patch":             true,
		"kubectl-client-side-apply": true,
		"kubectl.1.32":              true, // a versioned binary's user agent
		"k9s":                       true,
		"Lens":                      true,
		"Lens-desktop":              true, // by prefix, as Flux matches its managers
		"lens":                      false,
		"hpa-controller":            false,
		"kube-controller-manager":   false,
		"argocd-controller":         false,
		"truce":                     false,
		"":                          false,
	} {
		if got := opts.IsHuman(manager); got != want {
			t.Errorf("IsHuman(%q) = %v, want %v", manager, got, want)
		}
	}
	if (LoopOptions{}).IsHuman("k9s") {
		t.Error("k9s is a person's only when named")
	}
}

// edit changes the ConfigMap's mode as manager, with an update (kubectl
// edit, patch, client-side apply and the tools named by
// HumanFieldManagers write so).
func edit(t *testing.T, c cluster.Cluster, manager, value string) {
	t.Helper()
	ctx := context.Background()
	live, err := c.Get(ctx, cluster.Ref{GroupVersionKind: cmGVK, Namespace: "shop", Name: "settings"})
	must(t, err)
	live.Object["data"] = map[string]any{"mode": value}
	_, err = c.Update(ctx, live, cluster.WriteOptions{FieldManager: manager})
	must(t, err)
}

func modeOf(t *testing.T, c cluster.Cluster) any {
	t.Helper()
	live, err := c.Get(context.Background(), cluster.Ref{GroupVersionKind: cmGVK, Namespace: "shop", Name: "settings"})
	must(t, err)
	return live.Object["data"].(map[string]any)["mode"]
}

// A person's edits are written back on every pass, far beyond the loop
// breaker's threshold, each counted by an Event, the metric and the
// status; an automated writer's are contested at the threshold.
func TestPeopleAreRevertedNeverContested(t *testing.T) {
	c := newCluster(t, shopNamespace)
	opts := DefaultOptions()
	opts.Loop.HumanFieldManagers = []string{"k9s"}
	rec := &events{}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics(reg)
	must(t, err)
	store := &MemoryStore{}
	src := &StaticSource{Revision: "main@sha1:1", Objects: decode(t, config)}
	r, err := New(c, sourceFunc{src}, store, opts, WithRecorder(rec), WithMetrics(m))
	must(t, err)
	runPass(t, r)

	people := []string{"kubectl-edit", "kubectl-patch", "kubectl", "kubectl-client-side-apply", "k9s", "kubectl-edit"}
	for i, manager := range people {
		edit(t, c, manager, "green")
		res := runPass(t, r)
		if len(res.Contested) != 0 || res.Writes != 1 || res.Objects[0].Action != Configured {
			t.Fatalf("edit %d by %s: want it written back, not contested: writes %d, %+v", i+1, manager, res.Writes, res.Objects)
		}
		want := ManualEdit{Ref: res.Objects[0].Ref, Pointer: "/data/mode", Writer: Writer{Manager: manager, Operation: "Update"}, Git: "blue", Live: "green"}
		if len(res.Reverted) != 1 || res.Reverted[0] != want || len(res.Objects[0].Reverted) != 1 {
			t.Fatalf("edit %d: reverted %+v, want %+v", i+1, res.Reverted, want)
		}
		if got := modeOf(t, c); got != "blue" {
			t.Fatalf("edit %d: mode %v after the pass, want Git's blue", i+1, got)
		}
		if st := store.Last(); len(st.Reverted) != 1 || len(st.State.Contested) != 0 {
			t.Fatalf("edit %d: status %+v", i+1, st)
		}
	}
	var reverted []string
	for _, ev := range rec.got {
		if strings.Contains(ev, ReasonEditedOutsideGit) {
			reverted = append(reverted, ev)
		}
	}
	if len(reverted) != len(people) {
		t.Fatalf("%d %s Events, want %d:\n%s", len(reverted), ReasonEditedOutsideGit, len(people), strings.Join(rec.got, "\n"))
	}
	if want := "Warning EditedOutsideGit ConfigMap/shop/settings: /data/mode was edited outside Git by field manager kubectl-patch (Update): " +
		`truce reverted it to Git's value "blue" (it was "green")`; reverted[1] != want {
		t.Errorf("Event %q, want %q", reverted[1], want)
	}
	if got := testutil.ToFloat64(m.reverted.WithLabelValues("kubectl-edit")); got != 2 {
		t.Errorf("truce_sync_manual_edits_reverted_total{manager=kubectl-edit} = %v, want 2", got)
	}
	if got := testutil.CollectAndCount(m.reverted); got != 5 {
		t.Errorf("truce_sync_manual_edits_reverted_total has %d managers, want 5", got)
	}

	// An automated writer of the same field is contested at the
	// threshold, the people's edits before it not counted.
	for i := 1; i <= opts.Loop.Threshold; i++ {
		edit(t, c, "config-operator", "green")
		res := runPass(t, r)
		if contested := len(res.Contested) > 0; contested != (i == opts.Loop.Threshold) {
			t.Fatalf("change %d by config-operator: contested %+v", i, res.Contested)
		}
		if len(res.Reverted) != 0 {
			t.Fatalf("change %d by config-operator counted as a person's: %+v", i, res.Reverted)
		}
	}
	con := store.Last().State.Contested
	if len(con) != 1 || con[0].Writer != (Writer{Manager: "config-operator", Operation: "Update"}) || con[0].Changes != 3 {
		t.Fatalf("contest %+v", con)
	}
	if got := modeOf(t, c); got != "green" {
		t.Fatalf("mode %v, want the operator's green kept", got)
	}
}

// In a dry run a person's edit is reported, not written back nor counted.
func TestDryRunReportsPeoplesEdits(t *testing.T) {
	c := newCluster(t, shopNamespace)
	r, _ := newReconciler(t, c, config, DefaultOptions())
	runPass(t, r)
	edit(t, c, "kubectl-edit", "green")
	opts := DefaultOptions()
	opts.DryRun = true
	rec := &events{}
	dry, _ := newReconciler(t, c, config, opts, WithRecorder(rec))
	res := runPass(t, dry)
	if len(res.Reverted) != 1 || res.Writes != 0 || len(rec.got) != 0 || modeOf(t, c) != "green" {
		t.Fatalf("dry run: reverted %+v, writes %d, events %v, mode %v", res.Reverted, res.Writes, rec.got, modeOf(t, c))
	}
}
