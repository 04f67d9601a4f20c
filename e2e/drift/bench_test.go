//go:build e2e

package drift

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/cluster/memory"
	tdrift "github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/e2e/apiserver"
)

// The benchmark's namespace, admission policy and objects: those of
// drift/bench_test.go's BenchmarkDrift (an image-mirroring
// MutatingAdmissionPolicy, Deployments applied beforehand), the binding
// narrowed to the benchmark's objects so that it touches nothing else on the
// shared server.
const (
	benchNamespace = "drift-bench"
	benchPolicy    = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: drift-bench-mirror}
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
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: drift-bench-mirror}
spec:
  policyName: drift-bench-mirror
  matchResources:
    objectSelector:
      matchLabels: {drift.truce.dev/bench: "on"}
`
	benchDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: drift-bench
  labels: {app: web, drift.truce.dev/bench: "on"}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`
	// benchObjects is how many distinct Deployments the strategies cycle
	// through (BenchmarkDrift's pool for the dry-run strategies).
	benchObjects = 200
)

// BenchmarkDriftLive measures one object's drift per operation, per
// strategy, against the real kube-apiserver (through cluster/live, which
// counts the HTTP requests it makes), next to predicted (the offline
// admission chain, no request) and the same strategies against
// cluster/memory, all in one run: "x-predicted" is a strategy's time per
// object over predicted's in that run. Before the timer each strategy's
// answer for the pool is checked (so that a benchmark whose policy stopped
// acting fails; every tenth object) and discovery, type information and the
// policy are warm.
//
//	go test -tags e2e -run '^$' -bench BenchmarkDriftLive -benchtime 300x ./e2e/drift/
func BenchmarkDriftLive(b *testing.B) {
	s := server(b)
	ctx := context.Background()

	var prereqs []*unstructured.Unstructured
	prereqs = append(prereqs, parse(b, "apiVersion: v1\nkind: Namespace\nmetadata: {name: "+benchNamespace+"}"))
	for _, doc := range splitDocs(benchPolicy) {
		prereqs = append(prereqs, parse(b, doc))
	}
	if err := s.Apply(ctx, prereqs...); err != nil {
		b.Fatal(err)
	}
	lc, err := live.New(s.RESTConfig())
	if err != nil {
		b.Fatal(err)
	}
	newMemory := func() *memory.Cluster {
		state, err := admission.NewState(prereqs...)
		if err != nil {
			b.Fatal(err)
		}
		mc, err := memory.New(ctx, state, admission.Options{
			DisablePlugins:        apiserver.DefaultDisabledAdmissionPlugins,
			FieldValidation:       fieldValidation,
			ServiceClusterIPRange: "10.0.0.0/16",
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(mc.Close)
		return mc
	}
	// predicted sees every object as a create, as in BenchmarkDrift; the
	// other memory cluster holds the pool, like the server.
	unapplied, applied := newMemory(), newMemory()
	mirrored := "spec: {template: {spec: {containers: [{name: web, image: registry.internal/nginx:1.27}]}}}\n"
	probe := parse(b, benchDeployment)
	probe.SetName("probe")
	waitForAdmission(ctx, b, s, lc, applied, probe, admissionProbe{want: mirrored})

	base := parse(b, benchDeployment)
	objs := make([]*unstructured.Unstructured, benchObjects)
	for i := range objs {
		objs[i] = base.DeepCopy()
		objs[i].SetName(fmt.Sprintf("web-%05d", i))
		for _, c := range []cluster.Cluster{lc, applied} {
			if _, err := c.Apply(ctx, objs[i].DeepCopy(), cluster.ApplyOptions{FieldManager: "bench", Force: true}); err != nil {
				b.Fatal(err)
			}
		}
	}

	liveTypes := serverTypeConverters(ctx, s.Clientset().Discovery().OpenAPIV3())
	memTypes := func(gv k8sschema.GroupVersion) (managedfields.TypeConverter, error) {
		return applied.Chain().Registry().TypeConverter(gv)
	}
	var predictedPerObject time.Duration
	run := func(name string, c cluster.CallCounter, st tdrift.Strategy, want tdrift.Status) {
		b.Run(name, func(b *testing.B) {
			for i := 0; i < len(objs); i += 10 {
				o := objs[i]
				got, err := st.Diff(ctx, o)
				if err != nil {
					b.Fatal(err)
				}
				if got.Status != want {
					b.Fatalf("%s of %s: %s %v, want %s", st.Name(), o.GetName(), got.Status, got.Fields, want)
				}
			}
			calls := c.Calls()
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if _, err := st.Diff(ctx, objs[i%len(objs)]); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(c.Calls()-calls)/float64(b.N), "requests/object")
			perObject := b.Elapsed() / time.Duration(b.N)
			if name == "predicted" {
				predictedPerObject = perObject
			} else if predictedPerObject > 0 {
				b.ReportMetric(float64(perObject)/float64(predictedPerObject), "x-predicted")
			}
		})
	}
	// Every strategy sees the image mirror: predicted and the legacy diff
	// (two-way: no last-applied configuration) as drift, the dry runs on
	// both sides as none.
	run("predicted", unapplied, &tdrift.Predicted{Admitter: unapplied}, tdrift.Drifted)
	for _, side := range []struct {
		name string
		c    interface {
			cluster.Cluster
			cluster.CallCounter
		}
		types tdrift.TypeConverters
	}{{"live", lc, liveTypes}, {"memory", applied, memTypes}} {
		run("argocd-legacy/"+side.name, side.c, tdrift.NewArgoLegacy(side.c, nil, side.types, tdrift.Tracking{}, false), tdrift.Drifted)
		run("argocd-ssd/"+side.name, side.c, tdrift.NewArgoServerSide(side.c, false, nil, side.types, tdrift.Tracking{}, false), tdrift.InSync)
		run("argocd-ssd-include-mutation-webhook/"+side.name, side.c, tdrift.NewArgoServerSide(side.c, true, nil, side.types, tdrift.Tracking{}, false), tdrift.InSync)
		run("flux/"+side.name, side.c, &tdrift.Flux{Cluster: side.c}, tdrift.InSync)
	}
}
