package drift

import (
	"context"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
)

// benchObjects returns n distinct Deployments.
func benchObjects(b *testing.B, n int) []*unstructured.Unstructured {
	out := make([]*unstructured.Unstructured, n)
	base := object(b, web)
	for i := range out {
		o := base.DeepCopy()
		o.SetName(fmt.Sprintf("web-%05d", i))
		out[i] = o
	}
	return out
}

// benchStrategy measures one object's drift per operation, over a pool of
// objects applied beforehand (except for predicted, which needs none), and
// reports the requests each object costs.
func benchStrategy(b *testing.B, name string, applied bool, newStrategy func(c *memory.Cluster) Strategy) {
	b.Run(name, func(b *testing.B) {
		ctx := context.Background()
		c := newMemory(b, object(b, mirror[0]), object(b, mirror[1]))
		objs := benchObjects(b, 10000)
		if applied {
			objs = objs[:200]
			for _, o := range objs {
				if _, err := c.Apply(ctx, o, cluster.ApplyOptions{FieldManager: "bench", Force: true}); err != nil {
					b.Fatal(err)
				}
			}
		}
		s := newStrategy(c)
		calls := c.Calls()
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := s.Diff(ctx, objs[i%len(objs)]); err != nil {
				b.Fatal(err)
			}
		}
		b.StopTimer()
		b.ReportMetric(float64(c.Calls()-calls)/float64(b.N), "requests/object")
	})
}

// BenchmarkDrift compares the strategies against the in-process cluster,
// with an image-mirroring MutatingAdmissionPolicy in the write path. The
// dry-run strategies' requests are answered in-process here; against a real
// server each is a round trip (see docs/BENCHMARKS.md).
func BenchmarkDrift(b *testing.B) {
	benchStrategy(b, "predicted", false, func(c *memory.Cluster) Strategy { return &Predicted{Admitter: c} })
	benchStrategy(b, "flux", true, func(c *memory.Cluster) Strategy { return &Flux{Cluster: c} })
	benchStrategy(b, "argocd-ssd", true, func(c *memory.Cluster) Strategy {
		return NewArgoServerSide(c, false, nil, typeConverters(c), Tracking{}, false)
	})
	benchStrategy(b, "argocd-legacy", true, func(c *memory.Cluster) Strategy {
		return NewArgoLegacy(c, nil, typeConverters(c), Tracking{}, false)
	})
}
