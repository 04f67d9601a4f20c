package admission

import (
	"container/list"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/cel/environment"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
)

// DefaultCacheSize is how many compiled policies a Cache made by NewCache(0)
// keeps: far more than a repository's distinct policies, far less memory
// than a process has (a compiled policy is tens of kilobytes).
const DefaultCacheSize = 4096

// Cache keeps compiled ValidatingAdmissionPolicies and
// MutatingAdmissionPolicies, and the structured-merge-diff type converters
// built from OpenAPI documents, by the content they were built from, so that
// chains built again and again for the same admission configuration (every
// simulation and every candidate fix of truce check) compile each policy
// once. Pass one through Options.Cache to every chain of a run; it is safe
// for concurrent use and keeps at most its size, dropping the least
// recently used. The zero Cache is not usable; a nil *Cache compiles every
// time, as kube-apiserver does.
type Cache struct {
	mu      sync.Mutex
	size    int
	order   *list.List // of *cacheEntry, most recently used first
	entries map[cacheKey]*list.Element
	hits    int
	misses  int

	// results are the admissions remembered for every chain built with
	// the cache (memo.go).
	resultsOnce sync.Once
	results     *memoStore
}

type cacheKey struct {
	kind   string
	digest [sha256.Size]byte
}

type cacheEntry struct {
	key   cacheKey
	value any
}

// NewCache returns a cache keeping up to size compiled policies
// (DefaultCacheSize when size <= 0).
func NewCache(size int) *Cache {
	if size <= 0 {
		size = DefaultCacheSize
	}
	return &Cache{size: size, order: list.New(), entries: map[cacheKey]*list.Element{}}
}

// CacheStats counts lookups answered from the cache and compilations.
type CacheStats struct {
	Hits, Misses, Len int
}

// Stats returns the cache's counters.
func (c *Cache) Stats() CacheStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return CacheStats{Hits: c.hits, Misses: c.misses, Len: c.order.Len()}
}

// get returns the value compiled for key, compiling it with compile when
// the cache does not hold it; a failed compilation is not kept.
// Compilation runs outside the lock: two chains compiling the same new
// policy at once both compile it, and either result is kept (they are
// equal).
func (c *Cache) get(key cacheKey, compile func() (any, error)) (any, error) {
	c.mu.Lock()
	if e, ok := c.entries[key]; ok {
		c.order.MoveToFront(e)
		c.hits++
		v := e.Value.(*cacheEntry).value
		c.mu.Unlock()
		return v, nil
	}
	c.misses++
	c.mu.Unlock()

	v, err := compile()
	if err != nil {
		return nil, err
	}

	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.entries[key]; ok {
		c.order.MoveToFront(e)
		return e.Value.(*cacheEntry).value, nil
	}
	c.entries[key] = c.order.PushFront(&cacheEntry{key: key, value: v})
	for c.order.Len() > c.size {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.entries, last.Value.(*cacheEntry).key)
	}
	return v, nil
}

// TypeConverter returns the type converter built from the OpenAPI
// document whose SHA-256 is digest, building it with build when the cache
// does not hold it (schema.ConverterCache). Converters are read-only once
// built, so chains share them.
func (c *Cache) TypeConverter(digest [sha256.Size]byte, build func() (managedfields.TypeConverter, error)) (managedfields.TypeConverter, error) {
	v, err := c.get(cacheKey{kind: "TypeConverter", digest: digest}, func() (any, error) { return build() })
	if err != nil {
		return nil, err
	}
	return v.(managedfields.TypeConverter), nil
}

// policyKey digests what upstream's compilePolicy reads: the policy's name
// (named in match-condition errors) and spec, and the CEL environment's
// inputs (compatibility version and feature gates). The object and params
// are typed dynamically at compile time, so CRD schemas are not inputs:
// what depends on them (the type converters of ApplyConfiguration) is
// built by each chain's dispatcher from its own schemas.
func policyKey(kind, name string, spec any, env string) (cacheKey, error) {
	b, err := json.Marshal(struct {
		Name string `json:"name"`
		Spec any    `json:"spec"`
		Env  string `json:"env"`
	}{name, spec, env})
	if err != nil {
		return cacheKey{}, fmt.Errorf("digesting %s %s: %w", kind, name, err)
	}
	return cacheKey{kind: kind, digest: sha256.Sum256(b)}, nil
}

// celEnvironment names the inputs of the CEL environment policies are
// compiled in, for the cache key: the compatibility version upstream
// compiles against and every feature gate's state.
func celEnvironment() string {
	gates := utilfeature.DefaultMutableFeatureGate.GetAll()
	state := make(map[string]bool, len(gates))
	for name := range gates {
		state[string(name)] = utilfeature.DefaultFeatureGate.Enabled(name)
	}
	b, _ := json.Marshal(state) // map keys are sorted: a stable digest
	return environment.DefaultCompatibilityVersion().String() + " " + string(b)
}
