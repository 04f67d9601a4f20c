package schema

import (
	"crypto/sha256"
	"testing"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
)

// countingCache is a ConverterCache that counts what it builds.
type countingCache struct {
	built map[[sha256.Size]byte]managedfields.TypeConverter
}

func (c *countingCache) TypeConverter(digest [sha256.Size]byte, build func() (managedfields.TypeConverter, error)) (managedfields.TypeConverter, error) {
	if tc, ok := c.built[digest]; ok {
		return tc, nil
	}
	tc, err := build()
	if err == nil {
		c.built[digest] = tc
	}
	return tc, err
}

func TestShareConverters(t *testing.T) {
	shared := &countingCache{built: map[[sha256.Size]byte]managedfields.TypeConverter{}}
	apps := k8sschema.GroupVersion{Group: "apps", Version: "v1"}
	var first managedfields.TypeConverter
	for i := range 2 {
		r, err := NewRegistry()
		if err != nil {
			t.Fatal(err)
		}
		r.ShareConverters(shared)
		tc, err := r.TypeConverter(apps)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = tc
		} else if tc != first {
			t.Errorf("the second registry built its own converter for %s", apps)
		}
	}
	if len(shared.built) != 1 {
		t.Errorf("%d converters built, want 1", len(shared.built))
	}
	if _, err := (&Registry{docs: newDocuments()}).TypeConverter(k8sschema.GroupVersion{Group: "none.example.com", Version: "v1"}); err == nil {
		t.Errorf("a group without a document has a converter")
	}
}
