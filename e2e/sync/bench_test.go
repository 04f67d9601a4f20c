//go:build e2e

package sync

import (
	"context"
	"fmt"
	"net/http"
	"runtime/pprof"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/fluxcd/pkg/ssa"
	"github.com/fluxcd/pkg/ssa/normalize"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
)

// The benchmark's objects: half ConfigMaps, half small Deployments (no
// controller runs on the harness's server, so nothing else writes them and
// the steady state is steady), all labelled so that resetting a side's
// namespace deletes exactly them.
const (
	syncBenchConfigMaps  = 500
	syncBenchDeployments = 500
	syncBenchObjects     = syncBenchConfigMaps + syncBenchDeployments
	// syncBenchConcurrency is the objects handled at once on both sides:
	// reconcile.Options.Concurrency (truce's default) and
	// ResourceManager.SetConcurrency (kustomize-controller's
	// --concurrent-ssa default).
	syncBenchConcurrency = 4
	syncBenchLabel       = "sync.truce.dev/bench"
)

var (
	benchConfigMapGVK  = k8sschema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}
	benchDeploymentGVK = k8sschema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
)

// benchManifests is the Git side: syncBenchObjects objects in namespace
// ns, decoded as truce decodes a repository.
func benchManifests(b *testing.B, ns string) []manifest.Object {
	b.Helper()
	var docs strings.Builder
	for i := range syncBenchConfigMaps {
		fmt.Fprintf(&docs, `---
apiVersion: v1
kind: ConfigMap
metadata:
  name: settings-%04d
  namespace: %s
  labels: {app: shop, %s: "on"}
data:
  mode: blue
  replicas: "3"
  endpoint: https://shop-%04d.internal:8443/api
`, i, ns, syncBenchLabel, i)
	}
	for i := range syncBenchDeployments {
		fmt.Fprintf(&docs, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%04d
  namespace: %s
  labels: {app: web-%04d, %s: "on"}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web-%04d}
  template:
    metadata:
      labels: {app: web-%04d}
    spec:
      containers:
      - name: web
        image: nginx:1.27
        ports:
        - containerPort: 8080
        resources:
          requests: {cpu: 10m, memory: 16Mi}
`, i, ns, i, syncBenchLabel, i, i)
	}
	objs, err := manifest.Decode("bench.yaml", strings.NewReader(docs.String()), manifest.Options{})
	if err != nil {
		b.Fatal(err)
	}
	if len(objs) != syncBenchObjects {
		b.Fatalf("decoded %d objects, want %d", len(objs), syncBenchObjects)
	}
	return objs
}

// benchRequests counts a client's HTTP requests by what they do to the server.
type benchRequests struct {
	reads, dryRuns, writes atomic.Int64
}

type benchCount struct{ reads, dryRuns, writes int64 }

func (c benchCount) total() int64 { return c.reads + c.dryRuns + c.writes }

func (r *benchRequests) now() benchCount {
	return benchCount{r.reads.Load(), r.dryRuns.Load(), r.writes.Load()}
}

func (r *benchRequests) since(before benchCount) benchCount {
	n := r.now()
	return benchCount{n.reads - before.reads, n.dryRuns - before.dryRuns, n.writes - before.writes}
}

type benchTransport struct {
	next http.RoundTripper
	n    *benchRequests
}

func (t benchTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	switch {
	case req.Method == http.MethodGet || req.Method == http.MethodHead:
		t.n.reads.Add(1)
	case req.URL.Query().Get("dryRun") != "":
		t.n.dryRuns.Add(1)
	default:
		t.n.writes.Add(1)
	}
	return t.next.RoundTrip(req)
}

// benchSide is one contender: its own namespace, client and counters, so
// the sides never share objects or requests.
type benchSide struct {
	name      string
	namespace string
	objs      []manifest.Object
	reqs      *benchRequests
	// calls is the request count of the client the side goes through
	// (cluster/live's Calls for the live clients).
	calls func() int64
	// fresh starts a new sync (a new Reconciler or ResourceManager), as
	// after a restart; passes after it keep its memory.
	fresh func(b *testing.B)
	// pass runs one pass and says what the tool reports it did.
	pass func(ctx context.Context) (benchOutcome, error)

	// Totals of the timed passes.
	elapsed time.Duration
	passes  int64
	counted benchCount
	callsN  int64
}

// benchOutcome is what a tool reports about a pass.
type benchOutcome struct {
	objects, created, unchanged int
	// writes is truce's Result.Writes, and for ssa the objects it applied
	// (created or configured).
	writes int
}

// check fails b unless every object was created (first sync) or found
// unchanged without a write (steady state).
func (o benchOutcome) check(b *testing.B, side string, first bool) {
	b.Helper()
	switch {
	case o.objects != syncBenchObjects:
		b.Fatalf("%s: %d objects in the pass, want %d", side, o.objects, syncBenchObjects)
	case first && (o.created != syncBenchObjects || o.writes != syncBenchObjects):
		b.Fatalf("%s: first sync created %d objects with %d writes, want %d and %d", side, o.created, o.writes, syncBenchObjects, syncBenchObjects)
	case !first && (o.unchanged != syncBenchObjects || o.writes != 0):
		b.Fatalf("%s: steady state found %d objects unchanged and wrote %d, want %d and 0", side, o.unchanged, o.writes, syncBenchObjects)
	}
}

// benchConfig is the admin config without client-side rate limiting
// (the benchmark measures the tools, not a token bucket), counting requests
// into n.
func benchConfig(s *apiserver.Server, n *benchRequests) *rest.Config {
	cfg := s.RESTConfig()
	cfg.QPS, cfg.Burst = -1, 0
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return benchTransport{next: rt, n: n} })
	return cfg
}

func benchLiveSide(b *testing.B, s *apiserver.Server, name, ns string) (*benchSide, *live.Cluster) {
	b.Helper()
	side := &benchSide{name: name, namespace: ns, objs: benchManifests(b, ns), reqs: &benchRequests{}}
	lc, err := live.New(benchConfig(s, side.reqs))
	if err != nil {
		b.Fatal(err)
	}
	side.calls = lc.Calls
	return side, lc
}

// benchTruceSide is reconcile.Reconciler on cluster/live with the default
// options (server dry-run drift detection, force, no prune) at
// syncBenchConcurrency, state in a MemoryStore.
func benchTruceSide(b *testing.B, s *apiserver.Server) *benchSide {
	side, lc := benchLiveSide(b, s, "truce", "sync-bench-truce")
	src := reconcile.StaticSource{Revision: "main@sha1:bench", Objects: side.objs}
	var r *reconcile.Reconciler
	side.fresh = func(b *testing.B) {
		opts := reconcile.DefaultOptions()
		opts.Name, opts.Namespace = "bench", "truce-system"
		opts.Concurrency = syncBenchConcurrency
		var err error
		if r, err = reconcile.New(lc, src, &reconcile.MemoryStore{}, opts); err != nil {
			b.Fatal(err)
		}
	}
	side.pass = func(ctx context.Context) (benchOutcome, error) {
		res, err := r.Reconcile(ctx)
		if err != nil {
			return benchOutcome{}, err
		}
		if len(res.Errors) > 0 {
			return benchOutcome{}, fmt.Errorf("%d errors, first: %s", len(res.Errors), res.Errors[0])
		}
		return benchOutcome{objects: len(res.Objects), created: res.Count(reconcile.Created),
			unchanged: res.Count(reconcile.Unchanged), writes: res.Writes}, nil
	}
	return side
}

// benchFluxObjects are the side's objects as kustomize-controller hands them
// to ApplyAll: normalised (ssa's native-kind defaults) and labelled with the
// Kustomization that owns them.
func benchFluxObjects(b *testing.B, rm *ssa.ResourceManager, objs []manifest.Object) []*unstructured.Unstructured {
	b.Helper()
	out := make([]*unstructured.Unstructured, len(objs))
	for i, o := range objs {
		out[i] = o.Object.DeepCopy()
	}
	if err := normalize.UnstructuredList(out); err != nil {
		b.Fatal(err)
	}
	rm.SetOwnerLabels(out, "bench", "flux-system")
	return out
}

// benchSSASide is Flux's ResourceManager.ApplyAll with kustomize-controller's
// field manager and default apply options at syncBenchConcurrency, over c.
func benchSSASide(side *benchSide, c client.Client) {
	var rm *ssa.ResourceManager
	var objs []*unstructured.Unstructured
	side.fresh = func(b *testing.B) {
		rm = ssa.NewResourceManager(c, nil, ssa.Owner{Field: drift.FluxFieldManager, Group: "kustomize.toolkit.fluxcd.io"})
		rm.SetConcurrency(syncBenchConcurrency)
		objs = benchFluxObjects(b, rm, side.objs)
	}
	side.pass = func(ctx context.Context) (benchOutcome, error) {
		cs, err := rm.ApplyAll(ctx, append([]*unstructured.Unstructured(nil), objs...), ssa.DefaultApplyOptions())
		if err != nil {
			return benchOutcome{}, err
		}
		out := benchOutcome{objects: len(cs.Entries)}
		for _, e := range cs.Entries {
			switch e.Action {
			case ssa.CreatedAction:
				out.created++
				out.writes++
			case ssa.ConfiguredAction:
				out.writes++
			case ssa.UnchangedAction:
				out.unchanged++
			}
		}
		return out, nil
	}
}

// BenchmarkSync measures one sync pass of 1,000 objects (500 ConfigMaps,
// 500 Deployments) against the real kube-apiserver: truce's reconcile
// against Flux's own library (github.com/fluxcd/pkg/ssa,
// ResourceManager.ApplyAll, what kustomize-controller runs), both at
// concurrency 4, each side in its own namespace with its own client.
//
// "first-sync" creates everything (the side's objects are deleted before
// each of its passes, untimed); "steady-state" is a pass over objects
// already in sync, which must write nothing: no write request on any
// side, truce's Result.Writes is 0, every object is reported unchanged and
// no object's resourceVersion moves (checked after the timed passes).
//
// Sides: "ssa" is ApplyAll through cluster.ControllerClient over
// cluster/live, the adapter truce's own Flux drift and simulation use, so
// that it and "truce" go through the same client-go dynamic client and
// transport; "ssa-cr" is ApplyAll through a controller-runtime client made
// from the same rest config, as kustomize-controller runs it.
//
// The machine's load moves while a benchmark runs, so the sides are
// interleaved: one op is one pass of every side, the side that goes first
// rotating from op to op. Per side, <side>-ns/op is its time per pass,
// <side>-calls/op its requests per pass (cluster/live's Calls() for the
// live clients, the transport's count for ssa-cr) and <side>-writes/op the
// write requests among them (neither GET nor dry run); x-ssa and
// calls-x-ssa divide truce's time and requests by ssa's over the same ops.
// ns/op is the whole round. No test asserts a time.
//
//	go test -tags e2e -run '^$' -bench BenchmarkSync -benchtime 3x ./e2e/sync/
func BenchmarkSync(b *testing.B) {
	s := server(b)
	ctx := context.Background()

	ssaLive, lc := benchLiveSide(b, s, "ssa", "sync-bench-ssa")
	benchSSASide(ssaLive, cluster.ControllerClient(lc))
	cr := &benchSide{name: "ssa-cr", namespace: "sync-bench-ssa-cr", objs: benchManifests(b, "sync-bench-ssa-cr"), reqs: &benchRequests{}}
	crClient, err := client.New(benchConfig(s, cr.reqs), client.Options{})
	if err != nil {
		b.Fatal(err)
	}
	cr.calls = func() int64 { return cr.reqs.now().total() }
	benchSSASide(cr, crClient)
	sides := []*benchSide{ssaLive, cr, benchTruceSide(b, s)}

	for _, side := range sides {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: side.namespace}}
		if _, err := s.Clientset().CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			b.Fatal(err)
		}
	}
	// Discovery (and controller-runtime's mapper) are warm before any
	// timer: one untimed first sync per side.
	for _, side := range sides {
		side.fresh(b)
		benchReset(ctx, b, s, side)
		out, err := side.pass(ctx)
		if err != nil {
			b.Fatalf("%s: %v", side.name, err)
		}
		out.check(b, side.name, true)
	}

	for _, phase := range []struct {
		name  string
		first bool
	}{{"first-sync", true}, {"steady-state", false}} {
		b.Run(phase.name, func(b *testing.B) {
			before := map[string]map[string]string{}
			for _, side := range sides {
				side.elapsed, side.passes, side.counted, side.callsN = 0, 0, benchCount{}, 0
				if !phase.first {
					// A new sync whose first pass finds everything in
					// place, untimed.
					side.fresh(b)
					out, err := side.pass(ctx)
					if err != nil {
						b.Fatalf("%s: %v", side.name, err)
					}
					out.check(b, side.name, false)
					before[side.name] = benchResourceVersions(ctx, b, s, side.namespace)
				}
			}
			round := 0
			for b.Loop() {
				for i := range sides {
					side := sides[(round+i)%len(sides)]
					b.StopTimer()
					if phase.first {
						benchReset(ctx, b, s, side)
						side.fresh(b)
					}
					calls, reqs := side.calls(), side.reqs.now()
					labels := pprof.Labels("sync", phase.name+"/"+side.name)
					b.StartTimer()
					var out benchOutcome
					var err error
					start := time.Now()
					// The label marks the side's own goroutines (and those
					// they start) in a -cpuprofile, apart from the server's.
					pprof.Do(ctx, labels, func(ctx context.Context) { out, err = side.pass(ctx) })
					side.elapsed += time.Since(start)
					b.StopTimer()
					if err != nil {
						b.Fatalf("%s: %v", side.name, err)
					}
					out.check(b, side.name, phase.first)
					side.passes++
					side.callsN += side.calls() - calls
					r := side.reqs.since(reqs)
					side.counted.reads += r.reads
					side.counted.dryRuns += r.dryRuns
					side.counted.writes += r.writes
					b.StartTimer()
				}
				round++
			}
			b.StopTimer()
			for _, side := range sides {
				n := float64(side.passes)
				b.ReportMetric(float64(side.elapsed.Nanoseconds())/n, side.name+"-ns/op")
				b.ReportMetric(float64(side.callsN)/n, side.name+"-calls/op")
				b.ReportMetric(float64(side.counted.writes)/n, side.name+"-writes/op")
				b.Logf("%s: %.0f reads, %.0f dry runs, %.0f writes per pass", side.name,
					float64(side.counted.reads)/n, float64(side.counted.dryRuns)/n, float64(side.counted.writes)/n)
				if side.counted.total() != side.callsN {
					b.Fatalf("%s: %d requests counted by the transport, %d by the client", side.name, side.counted.total(), side.callsN)
				}
				if !phase.first {
					if side.counted.writes != 0 {
						b.Fatalf("%s: %d write requests in the steady state", side.name, side.counted.writes)
					}
					after := benchResourceVersions(ctx, b, s, side.namespace)
					for k, rv := range before[side.name] {
						if after[k] != rv {
							b.Fatalf("%s: %s moved from resourceVersion %s to %s in the steady state", side.name, k, rv, after[k])
						}
					}
				}
			}
			truce, ssaSide := sides[2], sides[0]
			b.ReportMetric(float64(truce.elapsed)/float64(ssaSide.elapsed), "x-ssa")
			b.ReportMetric(float64(truce.callsN)/float64(ssaSide.callsN), "calls-x-ssa")
		})
	}
}

// benchReset deletes the side's objects (untimed) and waits until they are
// gone.
func benchReset(ctx context.Context, b *testing.B, s *apiserver.Server, side *benchSide) {
	b.Helper()
	sel := metav1.ListOptions{LabelSelector: syncBenchLabel + "=on"}
	for _, gvk := range []k8sschema.GroupVersionKind{benchConfigMapGVK, benchDeploymentGVK} {
		m, err := s.ResourceFor(ctx, gvk)
		if err != nil {
			b.Fatal(err)
		}
		ri := s.Dynamic().Resource(m.Resource).Namespace(side.namespace)
		if err := ri.DeleteCollection(ctx, metav1.DeleteOptions{}, sel); err != nil {
			b.Fatal(err)
		}
		deadline := time.Now().Add(time.Minute)
		for {
			l, err := ri.List(ctx, sel)
			if err != nil {
				b.Fatal(err)
			}
			if len(l.Items) == 0 {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("%d %s left in %s after a minute", len(l.Items), m.Resource.Resource, side.namespace)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// benchResourceVersions maps each benchmark object of namespace ns to its
// resourceVersion.
func benchResourceVersions(ctx context.Context, b *testing.B, s *apiserver.Server, ns string) map[string]string {
	b.Helper()
	out := map[string]string{}
	sel := metav1.ListOptions{LabelSelector: syncBenchLabel + "=on"}
	for _, gvk := range []k8sschema.GroupVersionKind{benchConfigMapGVK, benchDeploymentGVK} {
		m, err := s.ResourceFor(ctx, gvk)
		if err != nil {
			b.Fatal(err)
		}
		l, err := s.Dynamic().Resource(m.Resource).Namespace(ns).List(ctx, sel)
		if err != nil {
			b.Fatal(err)
		}
		for _, it := range l.Items {
			out[gvk.Kind+"/"+it.GetName()] = it.GetResourceVersion()
		}
	}
	if len(out) != syncBenchObjects {
		b.Fatalf("%d benchmark objects in %s, want %d", len(out), ns, syncBenchObjects)
	}
	return out
}
