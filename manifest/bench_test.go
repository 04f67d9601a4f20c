package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// benchManifests returns a realistic multi-document stream: n Deployments,
// Services and ConfigMaps, about 1.3 KiB per triple.
func benchManifests(n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: app-%[1]d
  namespace: prod
  labels: {app: app-%[1]d, tier: backend}
spec:
  replicas: 3
  selector:
    matchLabels: {app: app-%[1]d}
  template:
    metadata:
      labels: {app: app-%[1]d}
    spec:
      containers:
      - name: app
        image: registry.example.com/app:1.%[1]d.0
        ports: [{containerPort: 8080, protocol: TCP}]
        env:
        - {name: LOG_LEVEL, value: info}
        - {name: FEATURE_X, value: "true"}
        resources:
          requests: {cpu: 100m, memory: 128Mi}
          limits: {cpu: "1", memory: 512Mi}
---
apiVersion: v1
kind: Service
metadata:
  name: app-%[1]d
  namespace: prod
spec:
  selector: {app: app-%[1]d}
  ports:
  - port: 80
    targetPort: 8080
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-%[1]d-config
  namespace: prod
data:
  config.yaml: |
    listen: :8080
    upstreams: [a, b, c]
`, i)
	}
	return []byte(b.String())
}

func BenchmarkDecode(b *testing.B) {
	yamlIn := benchManifests(100)
	objs, err := Decode("bench.yaml", bytes.NewReader(yamlIn), Options{})
	if err != nil || len(objs) != 300 {
		b.Fatalf("setup: %d objects, %v", len(objs), err)
	}
	var jsonIn bytes.Buffer
	for _, o := range objs {
		if err := json.Indent(&jsonIn, o.Raw, "", "  "); err != nil {
			b.Fatal(err)
		}
		jsonIn.WriteByte('\n')
	}
	for _, in := range []struct {
		name string
		data []byte
	}{{"yaml", yamlIn}, {"json", jsonIn.Bytes()}} {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode("bench", bytes.NewReader(in.data), Options{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeLarge decodes one file of 3,000 documents (about 1 MB)
// with the sections decoded on every core (workers=0, GOMAXPROCS) and one
// after the other (workers=1, the baseline: how Decode worked before).
//
//	go test -run '^$' -bench DecodeLarge -benchmem ./manifest/
func BenchmarkDecodeLarge(b *testing.B) {
	in := benchManifests(1000)
	for _, workers := range []int{1, 0} {
		b.Run(fmt.Sprintf("workers=%d", workers), func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				objs, err := decodeWith(in, Options{}, workers)
				if err != nil || len(objs) != 3000 {
					b.Fatalf("%d objects, %v", len(objs), err)
				}
			}
		})
	}
}

// BenchmarkRetained reports the heap the decoded objects keep alive
// (retained-B/object) and the peak transient heap of decoding them
// (alloc-B/object), the figures DefaultMaxDocuments and the byte limits are
// set from: go test ./manifest -run '^$' -bench Retained -benchtime 1x
func BenchmarkRetained(b *testing.B) {
	const triples = 10000 // 30,000 objects
	in := benchManifests(triples)
	opts := Options{MaxDocuments: 3 * triples, MaxTotalBytes: 1 << 30, MaxFileBytes: 1 << 30}
	for b.Loop() {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		objs, err := Decode("bench.yaml", bytes.NewReader(in), opts)
		if err != nil {
			b.Fatal(err)
		}
		runtime.ReadMemStats(&after)
		peak := after.TotalAlloc - before.TotalAlloc
		runtime.GC()
		runtime.ReadMemStats(&after)
		n := float64(len(objs))
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "retained-B/object")
		b.ReportMetric(float64(peak)/n, "alloc-B/object")
		b.ReportMetric(float64(len(in))/n, "input-B/object")
		runtime.KeepAlive(objs)
	}
}
