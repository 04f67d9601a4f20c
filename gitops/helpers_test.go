package gitops

import (
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/manifest"
)

func object(t testing.TB, source, doc string) Object {
	t.Helper()
	b, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("fixture %s: %v", source, err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatalf("fixture %s: %v", source, err)
	}
	return Object{Position: at(t, source), Unstructured: u}
}

// at is "file:line" as a position.
func at(t testing.TB, source string) manifest.Source {
	t.Helper()
	i := strings.LastIndex(source, ":")
	line, err := strconv.Atoi(source[i+1:])
	if i < 0 || err != nil {
		t.Fatalf("fixture source %q: want file:line", source)
	}
	return manifest.Source{File: source[:i], Line: line}
}
