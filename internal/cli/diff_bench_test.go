package cli

import (
	"fmt"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// BenchmarkDiffPredicted is truce diff --strategy predicted of a generated
// repository (benchRepo: Deployments, ConfigMaps and Services in equal
// parts, the 20 policies in the in-process cluster given with -c) at
// several sizes. ns/object and cpu-ns/object (the process's user and
// system time, which other work on the machine inflates less than the
// wall time) should not grow with the size.
//
//	go test -run '^$' -bench 'BenchmarkDiffPredicted' -benchtime 1x ./internal/cli/
func BenchmarkDiffPredicted(b *testing.B) {
	for _, n := range []int{2000, 10000, 20000} {
		b.Run(fmt.Sprintf("objects=%d", n), func(b *testing.B) {
			dir := benchRepo(b, n)
			b.ReportAllocs()
			cpu := cpuTime()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				_, errOut, code := runTruce(b, "diff", filepath.Join(dir, "objects.yaml"), "-c", filepath.Join(dir, "policies.yaml"),
					"--strategy", "predicted", "-o", "json")
				if code != exitFound {
					b.Fatalf("exit %d: %s", code, errOut)
				}
			}
			b.StopTimer()
			objects := float64(b.N * n)
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/objects, "ns/object")
			b.ReportMetric(float64((cpuTime()-cpu).Nanoseconds())/objects, "cpu-ns/object")
		})
	}
}

// cpuTime is the user and system time the process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
