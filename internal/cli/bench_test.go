package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// benchRepo writes a repository of n objects (Deployments, ConfigMaps and
// Services in equal parts) and 20 admission policies: 10 mutating (one
// mirrors the images of team t0's Deployments, a field Git sets: those
// loop under Argo CD; the others add a label Git does not set) and 10
// validating (all pass). No GitOps settings: both tools are simulated.
func benchRepo(b testing.TB, n int) string {
	b.Helper()
	dir := b.TempDir()
	if keep := os.Getenv("TRUCE_BENCH_REPO"); keep != "" {
		dir = keep
	}
	var pol strings.Builder
	pol.WriteString("apiVersion: v1\nkind: Namespace\nmetadata: {name: bench}\n")
	for i := 0; i < 10; i++ {
		expr := fmt.Sprintf(`Object{metadata: Object.metadata{labels: {"policy-%d": "applied"}}}`, i)
		if i == 0 {
			expr = `Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: object.spec.template.spec.containers.filter(c, !c.image.startsWith("registry.internal/")).map(c, Object.spec.template.spec.containers{name: c.name, image: "registry.internal/" + c.image})}}}}`
		}
		fmt.Fprintf(&pol, `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: mutate-%[1]d}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    objectSelector: {matchLabels: {team: t%[1]d}}
    resourceRules:
    - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["deployments"]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: '%[2]s'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: mutate-%[1]d}
spec: {policyName: mutate-%[1]d}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: validate-%[1]d}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["deployments"]}
  validations:
  - expression: "object.spec.replicas <= %[3]d"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: validate-%[1]d}
spec: {policyName: validate-%[1]d, validationActions: [Deny]}
`, i, expr, 50+i)
	}
	write := func(name, data string) {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	write("policies.yaml", pol.String())
	var objs strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			objs.WriteString("---\n")
		}
		team := i % 10
		switch i % 3 {
		case 0:
			fmt.Fprintf(&objs, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app-%d, namespace: bench, labels: {team: t%d}}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: app-%d}}\n  template:\n    metadata: {labels: {app: app-%d}}\n    spec:\n      containers:\n      - {name: app, image: \"nginx:1.27\"}\n", i, team, i, i)
		case 1:
			fmt.Fprintf(&objs, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config-%d, namespace: bench}\ndata: {key: value-%d}\n", i, i)
		case 2:
			fmt.Fprintf(&objs, "apiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: bench}\nspec:\n  selector: {app: app-%d}\n  ports:\n  - {port: 80, targetPort: 8080}\n", i, i)
		}
	}
	write("objects.yaml", objs.String())
	return dir
}

func maxRSSMiB() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return float64(ru.Maxrss) / 1024
}

// BenchmarkCheck is truce check of 2,000 objects and 20 policies, fixes
// verified, next to truce admit of the same objects (one admission per
// object, the baseline). $TRUCE_BENCH_OBJECTS sets another size (to profile
// how the cost grows).
//
//	go test -run '^$' -bench 'BenchmarkCheck' -benchtime 1x ./internal/cli/
func BenchmarkCheck(b *testing.B) {
	for _, n := range []int{benchRepoSize()} {
		dir := benchRepo(b, n)
		b.Run(fmt.Sprintf("admit-baseline/objects=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_, errOut, code := runTruce(b, "admit", "-f", filepath.Join(dir, "objects.yaml"), "-c", filepath.Join(dir, "policies.yaml"), "-o", "json")
				if code == exitFailure {
					b.Fatal(errOut)
				}
			}
			b.ReportMetric(maxRSSMiB(), "maxRSS-MiB")
		})
		b.Run(fmt.Sprintf("check-no-verify/objects=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_, errOut, code := runTruce(b, "check", dir, "--format", "json", "--no-verify")
				if code != exitFound {
					b.Fatalf("exit %d: %s", code, errOut)
				}
			}
			b.ReportMetric(maxRSSMiB(), "maxRSS-MiB")
		})
		b.Run(fmt.Sprintf("check/objects=%d", n), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				_, errOut, code := runTruce(b, "check", dir, "--format", "json")
				if code != exitFound {
					b.Fatalf("exit %d: %s", code, errOut)
				}
			}
			b.ReportMetric(maxRSSMiB(), "maxRSS-MiB")
		})
	}
}

// benchRepoSize is $TRUCE_BENCH_OBJECTS, or 2,000 objects.
func benchRepoSize() int {
	if n, err := strconv.Atoi(os.Getenv("TRUCE_BENCH_OBJECTS")); err == nil && n > 0 {
		return n
	}
	return 2000
}

// TestWriteBenchRepo writes the benchmark's repository to $TRUCE_BENCH_REPO
// ($TRUCE_BENCH_OBJECTS objects, default 2,000),
// to run truce check on it by hand (skipped otherwise).
func TestWriteBenchRepo(t *testing.T) {
	if os.Getenv("TRUCE_BENCH_REPO") == "" {
		t.Skip("set TRUCE_BENCH_REPO=DIR to write the benchmark repository")
	}
	benchRepo(t, benchRepoSize())
}

// BenchmarkAdmitOne is the start-up of an admission chain: truce admit of
// one Deployment against the 20 policies of benchRepo, in a process that
// has already initialised its packages.
//
//	go test -run '^$' -bench 'BenchmarkAdmitOne' -benchtime 10x -cpuprofile cpu.prof ./internal/cli/
func BenchmarkAdmitOne(b *testing.B) {
	dir := benchRepo(b, 1)
	b.ReportAllocs()
	cpu := cpuTime()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		_, errOut, code := runTruce(b, "admit", "-f", filepath.Join(dir, "objects.yaml"), "-c", filepath.Join(dir, "policies.yaml"), "-o", "json")
		if code == exitFailure {
			b.Fatal(errOut)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/float64(b.N), "cpu-ns/op")
}
