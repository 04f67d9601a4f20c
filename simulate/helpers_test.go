package simulate

import (
	"container/heap"
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/manifest"
)

// objects decodes "---"-separated YAML documents.
func objects(t *testing.T, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range strings.Split(docs, "\n---\n") {
		if strings.TrimSpace(d) == "" {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("decoding %q: %v", d, err)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

func desiredOf(t *testing.T, docs string) []Desired {
	t.Helper()
	var out []Desired
	for i, o := range objects(t, docs) {
		out = append(out, Desired{Object: o, Source: manifest.Source{File: "git.yaml", Line: i + 1}})
	}
	return out
}

// newCluster is an in-process cluster holding the given objects.
func newCluster(t *testing.T, docs string) *memory.Cluster {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	state, err := admission.NewState(objects(t, docs)...)
	if err != nil {
		t.Fatal(err)
	}
	c, err := memory.New(ctx, state, admission.Options{DisablePlugins: []string{"ServiceAccount"}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

func popEvent(q *queue) event { return heap.Pop(q).(event) }

func refOf(t *testing.T, apiVersion, kind, namespace, name string) cluster.Ref {
	t.Helper()
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		t.Fatal(err)
	}
	return cluster.Ref{GroupVersionKind: gv.WithKind(kind), Namespace: namespace, Name: name}
}
