package loadgen

import (
	"context"
	"testing"
)

// BenchmarkNoop measures the floor: the corpus against NoopHandler over
// Serve's TLS set-up (HTTP/2), 16 requests in flight, one operation one
// request. The load generator runs in the same process, so its own work
// (building and checking requests) is part of the time, as it is for every
// target it measures.
func BenchmarkNoop(b *testing.B) {
	ctx := context.Background()
	bodies, err := Requests(ctx)
	if err != nil {
		b.Fatal(err)
	}
	const concurrency = 16
	srv, err := Serve(NoopHandler(), ServeOptions{Concurrency: concurrency})
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := srv.Close(ctx); err != nil {
			b.Error(err)
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	res, err := Run(ctx, Config{
		Client: srv.Client, URL: srv.URL, Bodies: bodies,
		Concurrency: concurrency, Requests: b.N, Warmup: min(b.N, 200),
	})
	if err != nil {
		b.Fatal(err)
	}
	if res.Errors != 0 {
		b.Fatalf("%d errors: %q", res.Errors, res.ErrorMessages)
	}
	b.ReportMetric(res.Throughput, "req/s")
	b.ReportMetric(float64(res.P50.Nanoseconds()), "p50-ns")
	b.ReportMetric(float64(res.P99.Nanoseconds()), "p99-ns")
}
