//go:build e2e

package drift

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/openapi"
	"k8s.io/kube-openapi/pkg/spec3"

	"github.com/truce-dev/truce/cluster"
	tdrift "github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/drift/argocd"
	"github.com/truce-dev/truce/drift/ignore"
)

// argoCase is what a case expects of Argo CD's two diffs. Whatever it
// expects, every strategy must come out the same on the server and on the
// memory cluster; a nil expectation is just not checked against a value.
//
// The expectations follow gitops-engine's algorithms, which truce
// reimplements (drift/argocd): the legacy diff compares Git with the live
// object three-way through the last-applied-configuration annotation
// (two-way without it), so a mutation of a field Git sets always shows.
// The server-side diff compares the forced dry run of argocd-controller
// with the live object; without IncludeMutationWebhook, fields of the dry
// run that argocd-controller does not own take their live value. The
// server records managedFields before mutating admission, so a field Git
// sets is owned by argocd-controller even when a policy rewrote it: the
// mutation shows with neither setting, and IncludeMutationWebhook only
// matters for fields admission adds or changes that Git does not set.
type argoCase struct {
	// rules are ignoreDifferences rules (Tool ignore.ArgoCD), for every
	// strategy.
	rules []ignore.Rule
	// legacy is drift.ArgoLegacy.
	legacy *argoWant
	// ssd is drift.ArgoServerSide without IncludeMutationWebhook (Argo
	// CD's default), ssdWebhook with IncludeMutationWebhook=true.
	ssd, ssdWebhook *argoWant
}

// argoWant is one strategy's expected status and non-ignored fields.
type argoWant struct {
	status tdrift.Status
	fields []string
}

// expect is an argoWant; fields are the drifted, non-ignored pointers.
func expect(status tdrift.Status, fields ...string) *argoWant {
	return &argoWant{status: status, fields: fields}
}

// argo is Argo CD's field manager for its syncs and server-side dry runs.
const argo = argocd.ServerSideDiffManager

func TestArgo(t *testing.T) {
	s := server(t)
	ctx := context.Background()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			skipIfKnown(t, tc)
			e := newEnv(ctx, t, s, "drift-argo-", tc)
			e.runHistory(ctx, t, tc.steps)
			e.checkStored(ctx, t, tc.desired, tc.wantStored)
			e.compareDryRunApply(ctx, t, tc.desired, argo)
			e.checkArgo(ctx, t, tc)
		})
	}
}

// argoStrategy builds one of Argo CD's diffs for a cluster.
type argoStrategy struct {
	name string
	want *argoWant
	new  func(c cluster.Cluster, rules *ignore.Set, tcs tdrift.TypeConverters) tdrift.Strategy
}

// checkArgo runs Argo CD's legacy diff and its server-side diff (with and
// without IncludeMutationWebhook) on the server and on the memory cluster,
// and asserts that both give the same status and fields (pointers, values,
// origins, ignore rules), and what the case expects.
func (e *env) checkArgo(ctx context.Context, t *testing.T, tc testCase) {
	t.Helper()
	var rules *ignore.Set
	if len(tc.argo.rules) > 0 {
		var err error
		if rules, err = ignore.Compile(tc.argo.rules, ignore.Options{}); err != nil {
			t.Fatalf("the case's ignore rules: %v", err)
		}
	}
	liveTypes := serverTypeConverters(ctx, e.srv.Clientset().Discovery().OpenAPIV3())
	memTypes := func(gv k8sschema.GroupVersion) (managedfields.TypeConverter, error) {
		return e.mem.Chain().Registry().TypeConverter(gv)
	}
	desired := e.object(ctx, t, tc.desired)
	for _, st := range []argoStrategy{
		{name: "argocd-legacy", want: tc.argo.legacy, new: func(c cluster.Cluster, rules *ignore.Set, tcs tdrift.TypeConverters) tdrift.Strategy {
			return tdrift.NewArgoLegacy(c, rules, tcs, tdrift.Tracking{}, false)
		}},
		{name: "argocd-ssd", want: tc.argo.ssd, new: func(c cluster.Cluster, rules *ignore.Set, tcs tdrift.TypeConverters) tdrift.Strategy {
			return tdrift.NewArgoServerSide(c, false, rules, tcs, tdrift.Tracking{}, false)
		}},
		{name: "argocd-ssd-include-mutation-webhook", want: tc.argo.ssdWebhook, new: func(c cluster.Cluster, rules *ignore.Set, tcs tdrift.TypeConverters) tdrift.Strategy {
			return tdrift.NewArgoServerSide(c, true, rules, tcs, tdrift.Tracking{}, false)
		}},
	} {
		t.Run(st.name, func(t *testing.T) {
			liveRes, err := st.new(e.live, rules, liveTypes).Diff(ctx, desired.DeepCopy())
			if err != nil {
				t.Fatalf("%s on the server: %v", st.name, err)
			}
			memRes, err := st.new(e.mem, rules, memTypes).Diff(ctx, desired.DeepCopy())
			if err != nil {
				t.Fatalf("%s on memory: %v", st.name, err)
			}
			t.Logf("%s on the server: %s %v %v", st.name, liveRes.Status, pointers(liveRes, true), liveRes.Notes)
			if memRes.Status != liveRes.Status {
				t.Errorf("%s: %s on memory, %s on the server", st.name, memRes.Status, liveRes.Status)
			}
			if d := cmp.Diff(pointers(liveRes, false), pointers(memRes, false)); d != "" {
				t.Errorf("%s: drifted fields differ (-server +memory):\n%s", st.name, d)
			}
			if d := cmp.Diff(jsonValue(t, liveRes.Fields), jsonValue(t, memRes.Fields)); d != "" {
				t.Errorf("%s: fields (values, origins, ignore rules) differ (-server +memory):\n%s", st.name, d)
			}
			if d := cmp.Diff(liveRes.Notes, memRes.Notes); d != "" {
				t.Errorf("%s: notes differ (-server +memory):\n%s", st.name, d)
			}
			if st.want == nil {
				return
			}
			if liveRes.Status != st.want.status {
				t.Errorf("%s on the server says %s, the case expects %s", st.name, liveRes.Status, st.want.status)
			}
			if d := cmp.Diff(st.want.fields, pointers(liveRes, false)); d != "" {
				t.Errorf("%s on the server: non-ignored fields differ from the case's (-want +got):\n%s", st.name, d)
			}
		})
	}
}

// openAPITimeout bounds the wait for the server to publish the OpenAPI
// document of a group version.
const openAPITimeout = 30 * time.Second

// serverTypeConverters types objects as Argo CD does for its server-side
// diff: from the server's own OpenAPI v3 documents (built as the
// MutatingAdmissionPolicy plugin builds them), one per group version, read
// on first use. The memory cluster's strategies use truce's schema registry
// instead, so the two sides share no type information.
func serverTypeConverters(ctx context.Context, client openapi.Client) tdrift.TypeConverters {
	var (
		mu    sync.Mutex
		cache = map[k8sschema.GroupVersion]managedfields.TypeConverter{}
	)
	return func(gv k8sschema.GroupVersion) (managedfields.TypeConverter, error) {
		mu.Lock()
		defer mu.Unlock()
		if tc, ok := cache[gv]; ok {
			return tc, nil
		}
		path := "apis/" + gv.String()
		if gv.Group == "" {
			path = "api/" + gv.Version
		}
		// The server publishes a new CRD's document a moment after it
		// serves the CRD's resources.
		var doc openapi.GroupVersion
		var lastErr error
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, openAPITimeout, true, func(context.Context) (bool, error) {
			paths, err := client.Paths()
			if err != nil {
				lastErr = err
				return false, nil
			}
			doc = paths[path]
			return doc != nil, nil
		})
		if err != nil {
			return nil, fmt.Errorf("the server has no OpenAPI document for %s after %s (last error: %v)", gv, openAPITimeout, lastErr)
		}
		data, err := doc.Schema(runtime.ContentTypeJSON)
		if err != nil {
			return nil, fmt.Errorf("reading the server's OpenAPI document for %s: %w", gv, err)
		}
		var spec spec3.OpenAPI
		if err := json.Unmarshal(data, &spec); err != nil {
			return nil, fmt.Errorf("decoding the server's OpenAPI document for %s: %w", gv, err)
		}
		if spec.Components == nil {
			return nil, fmt.Errorf("the server's OpenAPI document for %s has no schemas", gv)
		}
		tc, err := managedfields.NewTypeConverter(spec.Components.Schemas, false)
		if err != nil {
			return nil, fmt.Errorf("typing %s from the server's OpenAPI: %w", gv, err)
		}
		cache[gv] = tc
		return tc, nil
	}
}
