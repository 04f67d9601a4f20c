package admission

import (
	"crypto/sha256"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
)

func TestCacheBounded(t *testing.T) {
	key := func(s string) cacheKey { return cacheKey{kind: "k", digest: sha256.Sum256([]byte(s))} }
	compiles := 0
	compile := func(v string) func() (any, error) { return func() (any, error) { compiles++; return v, nil } }
	c := NewCache(2)
	steps := []struct {
		key, want    string
		wantCompiles int
	}{
		{"a", "a", 1},
		{"b", "b", 2},
		{"a", "a", 2}, // hit: a becomes the most recently used
		{"c", "c", 3}, // evicts b, the least recently used
		{"a", "a", 3},
		{"b", "b", 4}, // b was evicted: compiled again
	}
	for i, s := range steps {
		if got, _ := c.get(key(s.key), compile(s.key)); got != s.want || compiles != s.wantCompiles {
			t.Fatalf("step %d: got %v after %d compilations, want %v after %d", i, got, compiles, s.want, s.wantCompiles)
		}
		if n := c.Stats().Len; n > 2 {
			t.Fatalf("step %d: cache holds %d entries, bound is 2", i, n)
		}
	}
	if s := c.Stats(); s.Hits != 2 || s.Misses != 4 {
		t.Errorf("stats %+v, want 2 hits and 4 misses", s)
	}
}

// TestUpstreamVersion guards the copies of upstream's compile functions in
// policycompile.go: when k8s.io/apiserver moves, compare them with the new
// release's validating/plugin.go and mutating/compilation.go and update
// this version.
func TestUpstreamVersion(t *testing.T) {
	// The file upstream's validating plugin was compiled from names the
	// module version (k8s.io/apiserver@vX.Y.Z/...), with or without -trimpath.
	file, _ := runtime.FuncForPC(reflect.ValueOf(validating.NewValidator).Pointer()).FileLine(0)
	if !strings.Contains(file, "k8s.io/apiserver@v0.37.2/") {
		t.Fatalf("upstream's validating plugin comes from %s; policycompile.go copies k8s.io/apiserver v0.37.2's compilePolicy functions", file)
	}
}
