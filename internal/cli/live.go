package cli

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/admission/kubectl"
	"github.com/truce-dev/truce/manifest"
)

// warningCollector keeps the warnings of the request in flight.
type warningCollector struct {
	mu    sync.Mutex
	items []string
}

func (w *warningCollector) HandleWarningHeader(code int, agent, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.items = append(w.items, text)
}

func (w *warningCollector) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := append([]string{}, w.items...)
	w.items = nil
	return out
}

// admitLive sends each write to a real cluster as a server-side dry run, so
// the offline answer can be compared with the live one.
func admitLive(ctx context.Context, o *admitOptions, verb kubectl.Options, writes []manifest.Object) ([]*admission.Result, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = o.kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: o.kubeContext}).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("loading kubeconfig: %w", err)
	}
	cfg = rest.CopyConfig(cfg)
	if o.user != "" {
		cfg.Impersonate = rest.ImpersonationConfig{UserName: o.user, Groups: o.groups}
	}
	warnings := &warningCollector{}
	cfg.WarningHandler = warnings
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	var results []*admission.Result
	for _, w := range writes {
		obj := w.Object.DeepCopy()
		gvk := obj.GroupVersionKind()
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", w.Source, err)
		}
		var ri dynamic.ResourceInterface = client.Resource(mapping.Resource)
		ns := ""
		if mapping.Scope.Name() == meta.RESTScopeNameNamespace {
			ns = obj.GetNamespace()
			if ns == "" {
				ns = metav1.NamespaceDefault
			}
			ri = client.Resource(mapping.Resource).Namespace(ns)
		}
		res := &admission.Result{
			Source: w.Source.String(), APIVersion: obj.GetAPIVersion(), Kind: obj.GetKind(),
			Namespace: ns, Name: obj.GetName(), AuditAnnotations: map[string]string{}, Changes: []admission.Change{},
		}
		res.Operation = admission.Create
		live, err := ri.Get(ctx, obj.GetName(), metav1.GetOptions{})
		switch {
		case err == nil:
			res.Operation = admission.Update
		case apierrors.IsNotFound(err):
			live = nil
		default:
			return nil, fmt.Errorf("%s: reading the live object: %w", w.Source, err)
		}
		warnings.take()
		if err := sendLive(ctx, ri, o, verb, obj, live, res); err != nil {
			return nil, fmt.Errorf("%s: %w", w.Source, err)
		}
		res.Warnings = warnings.take()
		results = append(results, res)
	}
	return results, nil
}

// sendLive sends the request of kubectl's command as a server-side dry
// run: kubectl apply's create or patch (the same computation as offline),
// a server-side apply, or kubectl create and replace.
func sendLive(ctx context.Context, ri dynamic.ResourceInterface, o *admitOptions, verb kubectl.Options, obj, live *unstructured.Unstructured, res *admission.Result) error {
	dryRun := []string{metav1.DryRunAll}
	create := func(obj *unstructured.Unstructured, manager string) error {
		out, err := ri.Create(ctx, obj, metav1.CreateOptions{DryRun: dryRun, FieldValidation: o.fieldValidation, FieldManager: manager})
		return fillLive(res, out, err)
	}
	patch := func(pt types.PatchType, data []byte, manager string, force *bool) error {
		out, err := ri.Patch(ctx, obj.GetName(), pt, data, metav1.PatchOptions{DryRun: dryRun, FieldValidation: o.fieldValidation, FieldManager: manager, Force: force})
		return fillLive(res, out, err)
	}
	manager := func(def string) string {
		if o.fieldManager != "" {
			return o.fieldManager
		}
		return def
	}
	switch verb.Verb {
	case kubectl.Apply:
		a, err := kubectl.ClientSideApply(obj, live)
		if err != nil {
			return err
		}
		switch {
		case a.Create:
			return create(a.Object, manager(kubectl.ClientSideApplyManager))
		case a.Unchanged:
			res.Allowed, res.Object = true, live.Object
			res.Notes = append(res.Notes, "unchanged: the patch is empty, so kubectl apply sends no request")
			return nil
		}
		return patch(a.PatchType, a.Patch, manager(kubectl.ClientSideApplyManager), nil)
	case kubectl.ServerSideApply:
		data, err := obj.MarshalJSON()
		if err != nil {
			return err
		}
		force := verb.ForceConflicts
		return patch(types.ApplyPatchType, data, manager(kubectl.ServerSideApplyManager), &force)
	}
	if live == nil {
		return create(obj, o.fieldManagerFor(admission.Create))
	}
	obj.SetResourceVersion(live.GetResourceVersion())
	out, err := ri.Update(ctx, obj, metav1.UpdateOptions{DryRun: dryRun, FieldValidation: o.fieldValidation, FieldManager: o.fieldManagerFor(admission.Update)})
	return fillLive(res, out, err)
}

func fillLive(res *admission.Result, out interface{ UnstructuredContent() map[string]any }, err error) error {
	var status apierrors.APIStatus
	switch {
	case err == nil:
		res.Allowed = true
		res.Object = out.UnstructuredContent()
		return nil
	case errors.As(err, &status):
		s := status.Status()
		res.Code, res.Reason, res.Message = s.Code, string(s.Reason), s.Message
		return nil
	default:
		return err
	}
}
