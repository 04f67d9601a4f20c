package admission

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func mustObject(tb testing.TB, doc string) *unstructured.Unstructured {
	tb.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		tb.Fatalf("decoding test object: %v", err)
	}
	return u
}

const benchDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: default
spec:
  replicas: 3
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: nginx
        image: nginx:1.27
`

// benchPolicies returns n MutatingAdmissionPolicies (each setting its own
// label with an ApplyConfiguration) and n ValidatingAdmissionPolicies (each
// checking the replica count), all bound to Deployments.
func benchPolicies(tb testing.TB, n int) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for i := range n {
		out = append(out,
			mustObject(tb, fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: label-%d}
spec:
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{metadata: Object.metadata{labels: {"bench-%d": "yes"}}}'
`, i, i)),
			mustObject(tb, fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: label-%d}
spec: {policyName: label-%d}
`, i, i)),
			mustObject(tb, fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: replicas-%d}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}
  validations:
  - expression: object.spec.replicas <= %d
`, i, 100+i)),
			mustObject(tb, fmt.Sprintf(`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: replicas-%d}
spec: {policyName: replicas-%d, validationActions: [Deny]}
`, i, i)),
		)
	}
	return out
}

func benchChain(b *testing.B, policies int, opts Options) *Chain {
	b.Helper()
	state, err := NewState(benchPolicies(b, policies)...)
	if err != nil {
		b.Fatal(err)
	}
	chain, err := NewChain(context.Background(), state, opts)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(chain.Close)
	return chain
}

// BenchmarkAdmit measures writes per second through a compiled chain: the
// baseline has no policies (decoding, defaulting, built-in plugins and
// validation only); the other runs 10 MAPs and 10 VAPs on every write.
// The chains admit every write afresh (NoMemo): the same write repeated
// is otherwise answered from memory, which "remembered" measures.
func BenchmarkAdmit(b *testing.B) {
	for _, n := range []int{0, 10} {
		for _, remembered := range []bool{false, true} {
			name := fmt.Sprintf("policies=%d", 2*n)
			if remembered {
				name += "/remembered"
			}
			b.Run(name, func(b *testing.B) {
				chain := benchChain(b, n, Options{NoMemo: !remembered})
				req := Request{Object: mustObject(b, benchDeployment)}
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for b.Loop() {
					res, err := chain.Admit(ctx, req)
					if err != nil {
						b.Fatal(err)
					}
					if !res.Allowed {
						b.Fatalf("denied: %s", res.Message)
					}
				}
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "writes/s")
			})
		}
	}
}

// BenchmarkCompile measures building a chain: informers, plugin
// initialisation and compiling every policy once; "cached" builds each
// chain with a Cache shared by all of them, as truce check does, so that
// policies are compiled in the first iteration only.
func BenchmarkCompile(b *testing.B) {
	for _, n := range []int{0, 10} {
		for _, cached := range []bool{false, true} {
			name := fmt.Sprintf("policies=%d", 2*n)
			opts := Options{}
			if cached {
				name += "/cached"
				opts.Cache = NewCache(0)
			}
			b.Run(name, func(b *testing.B) {
				objs := benchPolicies(b, n)
				b.ReportAllocs()
				for b.Loop() {
					state, err := NewState(objs...)
					if err != nil {
						b.Fatal(err)
					}
					chain, err := NewChain(context.Background(), state, opts)
					if err != nil {
						b.Fatal(err)
					}
					chain.Close()
				}
			})
		}
	}
}
