package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"

	"github.com/truce-dev/truce/internal/benchrepo"
)

// benchRepo writes the benchmark's repository (benchrepo.Write) of n
// objects to a temporary directory, or to $TRUCE_BENCH_REPO.
func benchRepo(b testing.TB, n int) string {
	b.Helper()
	dir := b.TempDir()
	if keep := os.Getenv("TRUCE_BENCH_REPO"); keep != "" {
		dir = keep
	}
	if err := benchrepo.Write(dir, n); err != nil {
		b.Fatal(err)
	}
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
