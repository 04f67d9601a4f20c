//go:build e2e

package drift

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
)

// TestManagedFieldsOrderAcrossSeconds reproduces on purpose what made the
// mutating-admission-policy case fail now and then: the server lists
// managedFields Update entries by second, then by manager, so the same two
// writes are listed in a different order when a second ends between them
// on one cluster and not on the other. The comparison must accept that, and
// still hold each cluster to the server's order for its own times.
func TestManagedFieldsOrderAcrossSeconds(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	e := newEnv(ctx, t, s, "drift-", testCase{name: "managedfields-order"})
	// The later writer's name sorts first.
	create := step{op: opCreate, manager: "kubectl-create", object: configMap}
	update := step{op: opUpdate, manager: "config-bot", object: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {mode: safe}\n"}
	obj := e.object(ctx, t, configMap)
	ref := cluster.RefOf(obj)
	write := func(c cluster.Cluster, st step) {
		t.Helper()
		if _, err := runStep(ctx, c, st, e.object(ctx, t, st.object)); err != nil {
			t.Fatalf("%s by %s: %v", st.op, st.manager, err)
		}
	}

	// The server: the two writes in different seconds.
	write(e.live, create)
	waitNextSecond(ctx, t, time.Now())
	write(e.live, update)
	liveObj, err := e.live.Get(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}

	// Memory: both in one second, right after a second starts (again if a
	// slow machine let the second end in between).
	var memObj *unstructured.Unstructured
	for attempt := 0; ; attempt++ {
		waitNextSecond(ctx, t, time.Now())
		write(e.mem, create)
		write(e.mem, update)
		if memObj, err = e.mem.Get(ctx, ref); err != nil {
			t.Fatal(err)
		}
		if secondsOf(memObj) == 1 {
			break
		}
		if attempt == 4 {
			t.Fatalf("could not write twice within one second on memory: %s", managedTimes(memObj))
		}
		if err := e.mem.Delete(ctx, ref, cluster.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	// The premise: the raw orders differ.
	if got, want := managers(liveObj), []string{"kubectl-create", "config-bot"}; !cmp.Equal(got, want) {
		t.Fatalf("server lists %v (%s), want %v", got, managedTimes(liveObj), want)
	}
	if got, want := managers(memObj), []string{"config-bot", "kubectl-create"}; !cmp.Equal(got, want) {
		t.Fatalf("memory lists %v (%s), want %v", got, managedTimes(memObj), want)
	}
	// The comparison: equal, each in the server's order.
	compareObjects(t, "stored "+ref.String(), liveObj, memObj)

	// And an order the server never produces is caught.
	swapped := liveObj.DeepCopy()
	mfs := swapped.GetManagedFields()
	mfs[0], mfs[1] = mfs[1], mfs[0]
	swapped.SetManagedFields(mfs)
	if inServerOrder(swapped) {
		t.Errorf("managedFields %s pass the order check", managedTimes(swapped))
	}
}

// managers lists the managers of obj's managedFields, in order.
func managers(obj *unstructured.Unstructured) []string {
	var out []string
	for _, mf := range obj.GetManagedFields() {
		out = append(out, mf.Manager)
	}
	return out
}

// secondsOf counts the distinct seconds of obj's managedFields times.
func secondsOf(obj *unstructured.Unstructured) int {
	seen := map[int64]bool{}
	for _, mf := range obj.GetManagedFields() {
		if mf.Time != nil {
			seen[mf.Time.Unix()] = true
		}
	}
	return len(seen)
}
