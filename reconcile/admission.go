package reconcile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
)

// Predictor predicts, without a request to the API server, what applying
// payload over live (nil: a create) would store, and which admission step
// changed which field.
type Predictor interface {
	Predict(ctx context.Context, live, payload *unstructured.Unstructured, opts cluster.ApplyOptions) (*unstructured.Unstructured, []admission.Change, error)
}

// AdmissionView is the admission configuration as the reconciler sees it:
// a digest (a change lifts contests) and an offline replay (to name the
// policy that changed a field inside truce's own write).
type AdmissionView interface {
	Predictor
	Digest(ctx context.Context) (string, error)
}

// contextKinds are read besides the admission configuration, for what it
// matches and types: namespaces (selectors) and CRDs (custom resources).
var contextKinds = []schema.GroupVersionKind{
	{Version: "v1", Kind: "Namespace"},
	{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
}

// OfflineAdmission runs truce's admission chain in process over an
// admission configuration: either the one a cluster holds now
// (ClusterAdmission, read with lists on each use and recompiled only when
// it changed) or a fixed one (FixedAdmission, e.g. the repository's).
type OfflineAdmission struct {
	config func(ctx context.Context) (admissionConfig, error)
	opts   admission.Options

	mu sync.Mutex
	// assumed are namespaces predictions needed that the configuration
	// does not hold: they are added bare, as the cluster would have them
	// with only their name label.
	assumed map[string]bool
	key     string
	mem     *memory.Cluster
	close   context.CancelFunc
}

type admissionConfig struct {
	admission []*unstructured.Unstructured // digested
	context   []*unstructured.Unstructured // namespaces, CRDs
}

// ClusterAdmission replays the admission configuration c holds.
func ClusterAdmission(c cluster.Cluster) *OfflineAdmission {
	return &OfflineAdmission{config: func(ctx context.Context) (admissionConfig, error) {
		var cfg admissionConfig
		for _, gvk := range admission.ConfigurationKinds {
			objs, err := c.List(ctx, gvk, "")
			if err != nil && !apierrors.IsNotFound(err) && !isNoMatch(err) {
				return cfg, fmt.Errorf("listing %ss: %w", gvk.Kind, err)
			}
			cfg.admission = append(cfg.admission, objs...)
		}
		for _, gvk := range contextKinds {
			objs, err := c.List(ctx, gvk, "")
			if err != nil {
				return cfg, fmt.Errorf("listing %ss: %w", gvk.Kind, err)
			}
			cfg.context = append(cfg.context, objs...)
		}
		return cfg, nil
	}}
}

// FixedAdmission predicts with the given objects: admission
// configuration, and the namespaces and CRDs it needs.
func FixedAdmission(objs []*unstructured.Unstructured) *OfflineAdmission {
	var cfg admissionConfig
	for _, o := range objs {
		if isAdmissionKind(o) {
			cfg.admission = append(cfg.admission, o)
		} else {
			cfg.context = append(cfg.context, o)
		}
	}
	return &OfflineAdmission{config: func(context.Context) (admissionConfig, error) { return cfg, nil }}
}

func isAdmissionKind(o *unstructured.Unstructured) bool {
	return admission.IsConfigurationKind(o.GroupVersionKind().GroupKind())
}

func isNoMatch(err error) bool {
	return err != nil && (apierrors.IsNotFound(err) || isMetaNoMatch(err))
}

// Digest implements AdmissionView: a digest of what the admission objects
// say (not of their metadata).
func (a *OfflineAdmission) Digest(ctx context.Context) (string, error) {
	cfg, err := a.config(ctx)
	if err != nil {
		return "", err
	}
	return digest(cfg.admission), nil
}

func digest(objs []*unstructured.Unstructured) string {
	lines := make([]string, 0, len(objs))
	for _, o := range objs {
		c := o.DeepCopy()
		meta := map[string]any{"name": c.GetName(), "namespace": c.GetNamespace(), "labels": c.GetLabels()}
		c.Object["metadata"] = meta
		delete(c.Object, "status")
		delete(c.Object, "apiVersion")
		b, _ := json.Marshal(c.Object)
		lines = append(lines, string(b))
	}
	sort.Strings(lines)
	h := sha256.New()
	for _, l := range lines {
		h.Write([]byte(l))
		h.Write([]byte{'\n'})
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

// Predict implements Predictor.
func (a *OfflineAdmission) Predict(ctx context.Context, live, payload *unstructured.Unstructured, opts cluster.ApplyOptions) (*unstructured.Unstructured, []admission.Change, error) {
	cfg, err := a.config(ctx)
	if err != nil {
		return nil, nil, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if ns := payload.GetNamespace(); ns != "" && !hasNamespace(cfg.context, ns) {
		if a.assumed == nil {
			a.assumed = map[string]bool{}
		}
		a.assumed[ns] = true
	}
	for ns := range a.assumed {
		if !hasNamespace(cfg.context, ns) {
			cfg.context = append(cfg.context, bareNamespace(ns))
		}
	}
	key := digest(cfg.admission) + "/" + digest(cfg.context)
	if a.mem == nil || a.key != key {
		if err := a.rebuild(cfg); err != nil {
			return nil, nil, err
		}
		a.key = key
	}
	st := a.mem.Chain().State()
	gk := payload.GroupVersionKind().GroupKind()
	if live != nil {
		if err := st.Put(live.DeepCopy()); err != nil {
			return nil, nil, fmt.Errorf("preparing the prediction of %s: %w", cluster.RefOf(payload), err)
		}
		defer st.Delete(gk, live.GetNamespace(), live.GetName())
	} else {
		st.Delete(gk, payload.GetNamespace(), payload.GetName())
	}
	res, err := a.mem.Admit(ctx, admission.Request{Object: payload, FieldManager: opts.FieldManager, Apply: true, Force: opts.Force})
	if err != nil {
		return nil, nil, err
	}
	if !res.Allowed {
		return nil, res.Changes, &apierrors.StatusError{ErrStatus: metav1.Status{
			Status: metav1.StatusFailure, Code: res.Code, Reason: metav1.StatusReason(res.Reason), Message: res.Message, Details: res.Details}}
	}
	return &unstructured.Unstructured{Object: res.Object}, res.Changes, nil
}

func (a *OfflineAdmission) rebuild(cfg admissionConfig) error {
	objs := make([]*unstructured.Unstructured, 0, len(cfg.admission)+len(cfg.context))
	for _, o := range append(append([]*unstructured.Unstructured{}, cfg.context...), cfg.admission...) {
		c := o.DeepCopy()
		c.SetManagedFields(nil)
		objs = append(objs, c)
	}
	state, err := admission.NewState(objs...)
	if err != nil {
		return fmt.Errorf("building the offline admission chain: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	mem, err := memory.New(ctx, state, a.opts)
	if err != nil {
		cancel()
		return fmt.Errorf("building the offline admission chain: %w", err)
	}
	if a.close != nil {
		a.close()
	}
	a.mem, a.close = mem, cancel
	return nil
}

// Close releases the offline chain.
func (a *OfflineAdmission) Close() {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.close != nil {
		a.close()
		a.mem, a.close = nil, nil
	}
}

func hasNamespace(objs []*unstructured.Unstructured, name string) bool {
	for _, o := range objs {
		if o.GetKind() == "Namespace" && o.GroupVersionKind().Group == "" && o.GetName() == name {
			return true
		}
	}
	return false
}

func bareNamespace(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"kubernetes.io/metadata.name": name}},
	}}
}
