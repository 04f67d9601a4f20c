// Package gitsync is the GitSync custom resource (gitsyncs.truce.dev): the
// configuration a `truce sync` runs with, and what its last pass did, so
// that `kubectl get gitsync` answers "is it synced, at which revision, who
// is it fighting". Store keeps a reconcile.State in the object's status,
// which makes inventory and contested fields survive restarts and leader
// changes.
package gitsync

import (
	_ "embed"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
)

// CRDYAML is the CustomResourceDefinition of GitSync; deploy/sync/crd.yaml
// is the same file.
//
//go:embed crd.yaml
var CRDYAML []byte

// CRD returns CRDYAML decoded.
func CRD() (*unstructured.Unstructured, error) {
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(CRDYAML, &u.Object); err != nil {
		return nil, fmt.Errorf("decoding the GitSync CRD: %w", err)
	}
	return u, nil
}

// GVK and GVR name GitSync; GVK is reconcile.GitSyncGVK.
var (
	GVK = reconcile.GitSyncGVK
	GVR = schema.GroupVersionResource{Group: "truce.dev", Version: "v1alpha1", Resource: "gitsyncs"}
)

// Spec is what a sync runs with.
type Spec struct {
	Source SourceSpec `json:"source"`
	// Interval is empty for a single pass.
	Interval     string       `json:"interval,omitempty"`
	Prune        bool         `json:"prune"`
	Force        bool         `json:"force"`
	Drift        string       `json:"drift"`
	FieldManager string       `json:"fieldManager,omitempty"`
	Admission    []string     `json:"admission,omitempty"`
	Ignore       []IgnoreRule `json:"ignore,omitempty"`
	Loop         LoopSpec     `json:"loop"`
	Backoff      BackoffSpec  `json:"backoff"`
}

// SourceSpec is the Git source.
type SourceSpec struct {
	URL  string `json:"url"`
	Ref  string `json:"ref,omitempty"`
	Path string `json:"path,omitempty"`
}

// IgnoreRule is one ignore rule, shaped like a Flux spec.ignore entry.
type IgnoreRule struct {
	Paths                 []string `json:"paths,omitempty"`
	JQPathExpressions     []string `json:"jqPathExpressions,omitempty"`
	ManagedFieldsManagers []string `json:"managedFieldsManagers,omitempty"`
	Target                *Target  `json:"target,omitempty"`
	Tool                  string   `json:"tool,omitempty"`
	Source                string   `json:"source,omitempty"`
}

// LoopSpec is the loop breaker.
type LoopSpec struct {
	Threshold int    `json:"threshold"`
	Window    string `json:"window,omitempty"`
	// HumanFieldManagers are the field managers whose writes are people's
	// edits, kubectl first: reverted on every pass, never contested.
	HumanFieldManagers []string `json:"humanFieldManagers,omitempty"`
}

// BackoffSpec is the self-heal schedule.
type BackoffSpec struct {
	Initial string  `json:"initial"`
	Factor  float64 `json:"factor"`
	Max     string  `json:"max"`
}

// SpecFor describes a sync of src with opts, a pass every interval (zero:
// one pass) and the admission files of the offline prediction.
func SpecFor(src manifest.GitSource, opts reconcile.Options, interval time.Duration, admissionFiles []string) Spec {
	s := Spec{
		Source:       SourceSpec{URL: src.URL, Ref: src.Ref, Path: src.Path},
		Prune:        opts.Prune,
		Force:        opts.Force,
		Drift:        string(opts.Drift),
		FieldManager: opts.FieldManager,
		Admission:    admissionFiles,
		Loop: LoopSpec{Threshold: opts.Loop.Threshold,
			HumanFieldManagers: append([]string{reconcile.KubectlFieldManager}, opts.Loop.HumanFieldManagers...)},
		Backoff: BackoffSpec{Initial: opts.Backoff.Initial.String(), Factor: opts.Backoff.Factor,
			Max: opts.Backoff.Max.String()},
	}
	if interval > 0 {
		s.Interval = interval.String()
	}
	if opts.Loop.Window > 0 {
		s.Loop.Window = opts.Loop.Window.String()
	}
	for _, r := range opts.Rules {
		ir := IgnoreRule{
			Paths: r.JSONPointers, JQPathExpressions: r.JQPathExpressions,
			ManagedFieldsManagers: r.ManagedFieldsManagers, Tool: string(r.Tool), Source: r.String(),
		}
		if t := r.Target; !t.IsZero() {
			ir.Target = &Target{Group: t.Group, Version: t.Version, Kind: t.Kind, Name: t.Name, Namespace: t.Namespace,
				LabelSelector: t.LabelSelector, AnnotationSelector: t.AnnotationSelector}
		}
		s.Ignore = append(s.Ignore, ir)
	}
	return s
}

// object renders the spec as an apply configuration of the GitSync
// namespace/name.
func (s Spec) object(namespace, name string) (*unstructured.Unstructured, error) {
	spec, err := toMap(s)
	if err != nil {
		return nil, fmt.Errorf("encoding the spec: %w", err)
	}
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(GVK)
	u.SetNamespace(namespace)
	u.SetName(name)
	return u, nil
}

// Target selects the objects of an ignore rule (see ignore.Target).
type Target struct {
	Group              string `json:"group,omitempty"`
	Version            string `json:"version,omitempty"`
	Kind               string `json:"kind,omitempty"`
	Name               string `json:"name,omitempty"`
	Namespace          string `json:"namespace,omitempty"`
	LabelSelector      string `json:"labelSelector,omitempty"`
	AnnotationSelector string `json:"annotationSelector,omitempty"`
}

// Status is the GitSync status.
type Status struct {
	ObservedGeneration    int64              `json:"observedGeneration,omitempty"`
	Source                string             `json:"source,omitempty"`
	LastAttemptedRevision string             `json:"lastAttemptedRevision,omitempty"`
	LastAppliedRevision   string             `json:"lastAppliedRevision,omitempty"`
	LastSyncTime          *metav1.Time       `json:"lastSyncTime,omitempty"`
	Counts                Counts             `json:"counts"`
	Contested             []ContestedField   `json:"contested,omitempty"`
	ManualEdits           ManualEdits        `json:"manualEdits"`
	Inventory             *Inventory         `json:"inventory,omitempty"`
	Conditions            []metav1.Condition `json:"conditions,omitempty"`
}

// Counts are the objects of the last pass by action, and the contested
// fields.
type Counts struct {
	Applied   int `json:"applied"`
	Unchanged int `json:"unchanged"`
	Pruned    int `json:"pruned"`
	Failed    int `json:"failed"`
	Contested int `json:"contested"`
}

// ManualEdits counts the fields people edited outside Git that truce
// wrote back, since the GitSync was created, and shows the last one.
type ManualEdits struct {
	Reverted int         `json:"reverted"`
	Last     *ManualEdit `json:"last,omitempty"`
}

// ManualEdit is a reconcile.ManualEdit as the status shows it.
type ManualEdit struct {
	Object ObjectRef   `json:"object"`
	Field  string      `json:"field"`
	Writer Writer      `json:"writer"`
	Git    any         `json:"git,omitempty"`
	Live   any         `json:"live,omitempty"`
	Time   metav1.Time `json:"time"`
}

// ObjectRef names an object as kubectl does.
type ObjectRef struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name"`
}

// ContestedField is a reconcile.Contest as the status shows it.
type ContestedField struct {
	Object    ObjectRef   `json:"object"`
	Source    string      `json:"source,omitempty"`
	Field     string      `json:"field"`
	Writer    Writer      `json:"writer"`
	Git       any         `json:"git,omitempty"`
	Live      any         `json:"live,omitempty"`
	Changes   int         `json:"changes"`
	Since     metav1.Time `json:"since"`
	Fix       Fix         `json:"fix"`
	Revision  string      `json:"revision,omitempty"`
	Admission string      `json:"admission,omitempty"`
	Effect    string      `json:"effect,omitempty"`
}

// Writer is the other side of a contested field.
type Writer struct {
	Manager   string `json:"manager,omitempty"`
	Operation string `json:"operation,omitempty"`
	Admission string `json:"admission,omitempty"`
}

// Fix is the recommended fix.
type Fix struct {
	Kind        string `json:"kind,omitempty"`
	Description string `json:"description,omitempty"`
}

// Inventory lists the applied objects in apply order, as Flux's
// Kustomization inventory does.
type Inventory struct {
	Entries []InventoryEntry `json:"entries"`
}

// InventoryEntry is one applied object: ID "namespace_name_group_kind"
// and the API version applied.
type InventoryEntry struct {
	ID      string `json:"id"`
	Version string `json:"v"`
}
