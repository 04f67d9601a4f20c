package simulate

import (
	"context"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
)

// Selector picks objects by group, kind, namespace and name; empty fields
// match anything.
type Selector struct {
	Group     string `json:"group,omitempty"`
	Version   string `json:"version,omitempty"`
	Kind      string `json:"kind"`
	Namespace string `json:"namespace,omitempty"`
	Name      string `json:"name,omitempty"`
}

// Matches reports whether ref is selected.
func (s Selector) Matches(ref cluster.Ref) bool {
	return (s.Group == "" || s.Group == ref.Group) && s.Kind == ref.Kind &&
		(s.Namespace == "" || s.Namespace == ref.Namespace) && (s.Name == "" || s.Name == ref.Name)
}

func (s Selector) String() string {
	k := s.Kind
	if s.Group != "" {
		k += "." + s.Group
	}
	switch {
	case s.Namespace != "" && s.Name != "":
		return k + " " + s.Namespace + "/" + s.Name
	case s.Name != "":
		return k + " " + s.Name
	case s.Namespace != "":
		return k + " in " + s.Namespace
	}
	return "every " + k
}

// FieldWriter is a controller that owns some fields of objects it
// watches and sets them whenever they differ: an HPA (/spec/replicas),
// cert-manager's cainjector (caBundle), an operator owning a ConfigMap key,
// Kyverno's background controller mutating existing objects.
type FieldWriter struct {
	// Type is the kind of controller, for reports ("HorizontalPodAutoscaler",
	// "CAInjector", "Operator", "KyvernoMutateExisting").
	Type string
	// Manager is its field manager; Operation "Update" (default) or
	// "Apply" (server-side apply of just its fields, forced).
	Manager   string
	Operation string
	Target    Selector
	// Set maps JSON pointers to the values the controller writes. A list
	// index in a pointer names an existing item.
	Set map[string]any
	// After is how long after a change of its target the controller writes.
	After time.Duration
	// Every, when set, makes the controller act on its own schedule (a
	// trigger or background scan) instead of on changes of its target.
	Every time.Duration
	// Source is where the writer was declared or detected (file:line).
	Source string
}

// Name implements Writer.
func (w *FieldWriter) Name() string { return w.Manager }

// Describe implements Writer.
func (w *FieldWriter) Describe() string {
	keys := make([]string, 0, len(w.Set))
	for p := range w.Set {
		keys = append(keys, p)
	}
	sort.Strings(keys)
	return fmt.Sprintf("%s %q writes %s of %s", w.Type, w.Manager, strings.Join(keys, ", "), w.Target)
}

// Watches implements Writer.
func (w *FieldWriter) Watches(ref cluster.Ref) bool { return w.Every == 0 && w.Target.Matches(ref) }

// Delay implements Writer.
func (w *FieldWriter) Delay() time.Duration { return w.After }

// Period implements periodic.
func (w *FieldWriter) Period() time.Duration { return w.Every }

// Act implements Writer.
func (w *FieldWriter) Act(ctx context.Context, c cluster.Cluster) error {
	objs, err := listSelected(ctx, c, w.Target)
	if err != nil {
		return err
	}
	for _, live := range objs {
		want := live.DeepCopy()
		keys := make([]string, 0, len(w.Set))
		for p := range w.Set {
			keys = append(keys, p)
		}
		sort.Strings(keys)
		for _, p := range keys {
			setAt(want.Object, p, w.Set[p])
		}
		if reflect.DeepEqual(want.Object, live.Object) {
			continue
		}
		if w.Operation == "Apply" {
			patch := &unstructured.Unstructured{Object: map[string]any{}}
			patch.SetAPIVersion(live.GetAPIVersion())
			patch.SetKind(live.GetKind())
			patch.SetName(live.GetName())
			patch.SetNamespace(live.GetNamespace())
			for _, p := range keys {
				if !setAt(patch.Object, p, w.Set[p]) {
					return fmt.Errorf("%s: %s cannot be applied as a partial object (it goes through a list)", w.Describe(), p)
				}
			}
			_, err = c.Apply(ctx, patch, cluster.ApplyOptions{FieldManager: w.Manager, Force: true})
		} else {
			_, err = c.Update(ctx, want, cluster.WriteOptions{FieldManager: w.Manager})
		}
		if err != nil && !isAPIError(err) {
			return err
		}
	}
	return nil
}

// Generator is Kyverno's generate rule: it creates a copy of a source
// object (clone, labels and annotations included) in other namespaces, or
// an object from data; with Synchronize it reverts edits to what it
// generated and recreates it when deleted.
type Generator struct {
	Manager string
	// Clone is the source object; Namespaces are where copies go.
	Clone      Selector
	Namespaces []string
	// Data, instead of Clone, is the object to generate.
	Data        *unstructured.Unstructured
	Synchronize bool
	After       time.Duration
	Source      string

	generated map[cluster.Ref]bool
}

// Name implements Writer.
func (g *Generator) Name() string { return g.Manager }

// Describe implements Writer.
func (g *Generator) Describe() string {
	sync := "without synchronize"
	if g.Synchronize {
		sync = "with synchronize"
	}
	if g.Data != nil {
		return fmt.Sprintf("KyvernoGenerate %q generates %s %s (%s)", g.Manager, g.Data.GetKind(), nsName(g.Data), sync)
	}
	return fmt.Sprintf("KyvernoGenerate %q clones %s into %s (%s)", g.Manager, g.Clone, strings.Join(g.Namespaces, ", "), sync)
}

// Watches implements Writer: the source, and what it generated.
func (g *Generator) Watches(ref cluster.Ref) bool {
	if g.Data != nil {
		return ref == cluster.RefOf(g.Data)
	}
	return g.Clone.Matches(ref) || g.generated[ref]
}

// Delay implements Writer.
func (g *Generator) Delay() time.Duration { return g.After }

// Creates implements creator.
func (g *Generator) Creates() []schema.GroupVersionKind {
	if g.Data != nil {
		return []schema.GroupVersionKind{g.Data.GroupVersionKind()}
	}
	v := g.Clone.Version
	if v == "" {
		v = "v1"
	}
	return []schema.GroupVersionKind{{Group: g.Clone.Group, Version: v, Kind: g.Clone.Kind}}
}

// Act implements Writer.
func (g *Generator) Act(ctx context.Context, c cluster.Cluster) error {
	if g.generated == nil {
		g.generated = map[cluster.Ref]bool{}
	}
	var wants []*unstructured.Unstructured
	if g.Data != nil {
		wants = append(wants, g.Data.DeepCopy())
	} else {
		sources, err := listSelected(ctx, c, g.Clone)
		if err != nil {
			return err
		}
		for _, src := range sources {
			for _, ns := range g.Namespaces {
				cp := src.DeepCopy()
				cp.SetNamespace(ns)
				cp.SetResourceVersion("")
				cp.SetUID("")
				cp.SetManagedFields(nil)
				cp.SetCreationTimestamp(metav1.Time{})
				cp.SetGeneration(0)
				labels := cp.GetLabels()
				if labels == nil {
					labels = map[string]string{}
				}
				labels["generate.kyverno.io/source-namespace"] = src.GetNamespace()
				cp.SetLabels(labels)
				wants = append(wants, cp)
			}
		}
	}
	for _, want := range wants {
		ref := cluster.RefOf(want)
		live, err := c.Get(ctx, ref)
		switch {
		case apierrors.IsNotFound(err):
			if g.generated[ref] && !g.Synchronize {
				// Without synchronize a deleted copy stays deleted.
				continue
			}
			g.generated[ref] = true
			if _, err := c.Create(ctx, want, cluster.WriteOptions{FieldManager: g.Manager}); err != nil && !isAPIError(err) {
				return err
			}
		case err != nil:
			return fmt.Errorf("reading %s: %w", ref, err)
		case g.Synchronize:
			g.generated[ref] = true
			updated := live.DeepCopy()
			for k, v := range want.Object {
				if k == "metadata" || k == "status" {
					continue
				}
				updated.Object[k] = v
			}
			updated.SetLabels(mergeStrings(live.GetLabels(), want.GetLabels()))
			if reflect.DeepEqual(updated.Object, live.Object) {
				continue
			}
			if _, err := c.Update(ctx, updated, cluster.WriteOptions{FieldManager: g.Manager}); err != nil && !isAPIError(err) {
				return err
			}
		}
	}
	return nil
}

func mergeStrings(a, b map[string]string) map[string]string {
	if len(a) == 0 && len(b) == 0 {
		return nil
	}
	out := map[string]string{}
	for k, v := range a {
		out[k] = v
	}
	for k, v := range b {
		out[k] = v
	}
	return out
}

func nsName(u *unstructured.Unstructured) string {
	if u.GetNamespace() == "" {
		return u.GetName()
	}
	return u.GetNamespace() + "/" + u.GetName()
}

// listSelected lists the live objects a selector picks.
func listSelected(ctx context.Context, c cluster.Cluster, s Selector) ([]*unstructured.Unstructured, error) {
	gvk := schema.GroupVersionKind{Group: s.Group, Version: s.Version, Kind: s.Kind}
	if gvk.Version == "" {
		m, err := c.RESTMapper().RESTMapping(gvk.GroupKind())
		if err != nil {
			return nil, nil
		}
		gvk.Version = m.GroupVersionKind.Version
	}
	objs, err := c.List(ctx, gvk, s.Namespace)
	if err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("listing %s: %w", s, err)
	}
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if s.Matches(cluster.RefOf(o)) {
			out = append(out, o)
		}
	}
	return out, nil
}
