//go:build e2e

package differential

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/e2e/apiserver"
)

// The admission benchmark's configuration: issue 18's shape, 10
// MutatingAdmissionPolicies (ApplyConfiguration, one label each) and 10
// ValidatingAdmissionPolicies on Deployments, bound to the benchmark's
// objects only so that nothing else on a shared server is touched.
const (
	speedNamespace = "speed-bench"
	speedPolicies  = 10
)

func speedConfig(tb testing.TB) []*unstructured.Unstructured {
	out := []*unstructured.Unstructured{speedObject(tb, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+speedNamespace+"}")}
	selector := "matchResources: {objectSelector: {matchLabels: {speed.truce.dev/bench: \"on\"}}}"
	for i := range speedPolicies {
		out = append(out,
			speedObject(tb, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: speed-label-%d}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  failurePolicy: Fail
  reinvocationPolicy: Never
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"speed-%d": "set"}}}'`, i, i)),
			speedObject(tb, fmt.Sprintf("apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {name: speed-label-%d}\nspec: {policyName: speed-label-%d, %s}", i, i, selector)),
			speedObject(tb, fmt.Sprintf(`apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: speed-replicas-%d}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: object.spec.replicas <= %d`, i, 100+i)),
			speedObject(tb, fmt.Sprintf("apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicyBinding\nmetadata: {name: speed-replicas-%d}\nspec: {policyName: speed-replicas-%d, validationActions: [Deny], %s}", i, i, selector)),
		)
	}
	return out
}

func speedDeployment(tb testing.TB, i int) *unstructured.Unstructured {
	return speedObject(tb, fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%05d
  namespace: %s
  labels: {app: web, speed.truce.dev/bench: "on"}
spec:
  replicas: %d
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: web, image: "nginx:1.%d"}`, i, speedNamespace, 1+i%5, i%30))
}

func speedObject(tb testing.TB, doc string) *unstructured.Unstructured {
	tb.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		tb.Fatalf("%v\n%s", err, doc)
	}
	return &unstructured.Unstructured{Object: m}
}

// cpu is the process's user and system CPU time so far; kube-apiserver and
// etcd run in this process, so a phase's share is the difference.
func cpu() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// phase is what one side of the comparison measured.
type phase struct {
	wall, cpu time.Duration
	latencies []time.Duration
}

func (p phase) report(b *testing.B, name string) {
	n := len(p.latencies)
	slices.Sort(p.latencies)
	b.ReportMetric(float64(n)/p.wall.Seconds(), name+"-writes/s")
	b.ReportMetric(float64(p.latencies[n/2].Microseconds())/1000, name+"-p50-ms")
	b.ReportMetric(float64(p.latencies[n*99/100].Microseconds())/1000, name+"-p99-ms")
	b.ReportMetric(float64(p.cpu.Microseconds())/1000/float64(n), name+"-cpu-ms/write")
}

// run answers writes objects with workers at once, each through do.
func runPhase(objs []*unstructured.Unstructured, workers int, do func(*unstructured.Unstructured) error) (phase, error) {
	lat := make([]time.Duration, len(objs))
	next := make(chan int)
	errs := make(chan error, workers)
	var wg sync.WaitGroup
	startCPU, start := cpu(), time.Now()
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				t := time.Now()
				if err := do(objs[i]); err != nil {
					errs <- fmt.Errorf("%s: %w", objs[i].GetName(), err)
					return
				}
				lat[i] = time.Since(t)
			}
		}()
	}
	for i := range objs {
		select {
		case next <- i:
		case err := <-errs:
			close(next)
			wg.Wait()
			return phase{}, err
		}
	}
	close(next)
	wg.Wait()
	select {
	case err := <-errs:
		return phase{}, err
	default:
	}
	return phase{wall: time.Since(start), cpu: cpu() - startCPU, latencies: lat}, nil
}

// BenchmarkAdmitVsServer answers the same server-side dry-run creates of
// SPEED_WRITES Deployments (default 1000) through kube-apiserver v1.37.2
// (HTTPS, 4 clients at once, as in issue 18) and through truce's
// admission chain (one writer, then one per core as `truce admit` admits
// writes that commute), in one run, with the 20 policies above: writes/s,
// p50/p99 per write, CPU per write (the server's includes etcd's), and
// truce's start-up (building the chain). The chain remembers nothing
// (NoMemo): the second phase would otherwise be answered from memory.
// Each side's answer for the first object is checked first, so that a
// policy that stopped acting fails the benchmark rather than flattering it.
//
//	go test -tags e2e -run '^$' -bench AdmitVsServer -benchtime 1x ./e2e/differential/
func BenchmarkAdmitVsServer(b *testing.B) {
	writes := 1000
	if v := os.Getenv("SPEED_WRITES"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 100 {
			b.Fatalf("SPEED_WRITES=%q: want a number ≥ 100", v)
		}
		writes = n
	}
	ctx := context.Background()
	s, err := apiserver.Shared(ctx, nil)
	if err != nil {
		b.Fatal(err)
	}
	config := speedConfig(b)
	if err := s.Apply(ctx, config...); err != nil {
		b.Fatal(err)
	}
	objs := make([]*unstructured.Unstructured, writes)
	for i := range objs {
		objs[i] = speedDeployment(b, i)
	}
	deployments := s.Dynamic().Resource(schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}).Namespace(speedNamespace)
	serverCreate := func(o *unstructured.Unstructured) (*unstructured.Unstructured, error) {
		return deployments.Create(ctx, o.DeepCopy(), metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}, FieldValidation: "Strict"})
	}
	labelled := func(o *unstructured.Unstructured) bool {
		labels := o.GetLabels()
		for i := range speedPolicies {
			if labels[fmt.Sprintf("speed-%d", i)] != "set" {
				return false
			}
		}
		return true
	}
	// The server's policy source picks the policies up within its
	// refresh interval.
	if err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		got, err := serverCreate(objs[0])
		return err == nil && labelled(got), nil
	}); err != nil {
		b.Fatalf("the server never applied the %d policies: %v", speedPolicies, err)
	}

	buildStart := time.Now()
	state, err := admission.NewState(config...)
	if err != nil {
		b.Fatal(err)
	}
	chain, err := admission.NewChain(ctx, state, admission.Options{DisablePlugins: apiserver.DefaultDisabledAdmissionPlugins, FieldValidation: "Strict", NoMemo: true})
	if err != nil {
		b.Fatal(err)
	}
	defer chain.Close()
	startup := time.Since(buildStart)
	truceAdmit := func(o *unstructured.Unstructured) (*admission.Result, error) {
		return chain.Admit(ctx, admission.Request{Object: o.DeepCopy()})
	}
	if res, err := truceAdmit(objs[0]); err != nil || !res.Allowed || !labelled(&unstructured.Unstructured{Object: res.Object}) {
		b.Fatalf("truce did not apply the %d policies: %v %+v", speedPolicies, err, res)
	}

	b.ResetTimer()
	for b.Loop() {
		server, err := runPhase(objs, 4, func(o *unstructured.Unstructured) error {
			_, err := serverCreate(o)
			return err
		})
		if err != nil {
			b.Fatal("server: ", err)
		}
		truce, err := runPhase(objs, 1, func(o *unstructured.Unstructured) error {
			res, err := truceAdmit(o)
			if err == nil && !res.Allowed {
				err = fmt.Errorf("denied: %s", res.Message)
			}
			return err
		})
		if err != nil {
			b.Fatal("truce: ", err)
		}
		// Dry runs commit nothing, so they commute: truce admit admits
		// such writes on every core (AdmitInOrder), as the server serves
		// its four clients at once.
		parallel, err := runPhase(objs, runtime.GOMAXPROCS(0), func(o *unstructured.Unstructured) error {
			res, err := truceAdmit(o)
			if err == nil && !res.Allowed {
				err = fmt.Errorf("denied: %s", res.Message)
			}
			return err
		})
		if err != nil {
			b.Fatal("truce, parallel: ", err)
		}
		server.report(b, "server")
		truce.report(b, "truce")
		parallel.report(b, "truce-parallel")
		b.ReportMetric(server.wall.Seconds()/truce.wall.Seconds(), "truce-x-server-throughput")
		b.ReportMetric(server.wall.Seconds()/parallel.wall.Seconds(), "truce-parallel-x-server-throughput")
		b.ReportMetric(float64(startup.Microseconds())/1000, "truce-startup-ms")
	}
}
