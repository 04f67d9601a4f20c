package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
)

// ControllerClient adapts a Cluster to controller-runtime's client, for
// libraries written against it: Flux's github.com/fluxcd/pkg/ssa, which
// truce uses to reproduce Flux exactly. It handles unstructured objects;
// server-side apply is the only patch type, and subresources, DeleteAllOf
// and apply configurations are refused with an error.
func ControllerClient(c Cluster) client.Client {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	return &ctrlClient{c: c, scheme: scheme}
}

type ctrlClient struct {
	c      Cluster
	scheme *runtime.Scheme
}

var errUnsupported = fmt.Errorf("not supported by truce's cluster adapter")

func asUnstructured(obj runtime.Object) (*unstructured.Unstructured, error) {
	u, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("%T: only unstructured objects are %w", obj, errUnsupported)
	}
	return u, nil
}

func (a *ctrlClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	u, err := asUnstructured(obj)
	if err != nil {
		return err
	}
	got, err := a.c.Get(ctx, Ref{GroupVersionKind: u.GroupVersionKind(), Namespace: key.Namespace, Name: key.Name})
	if err != nil {
		return err
	}
	u.Object = got.Object
	return nil
}

func (a *ctrlClient) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ul, ok := list.(*unstructured.UnstructuredList)
	if !ok {
		return fmt.Errorf("%T: only unstructured lists are %w", list, errUnsupported)
	}
	lo := &client.ListOptions{}
	lo.ApplyOptions(opts)
	gvk := ul.GroupVersionKind()
	gvk.Kind = strings.TrimSuffix(gvk.Kind, "List")
	items, err := a.c.List(ctx, gvk, lo.Namespace)
	if err != nil {
		return err
	}
	ul.Items = ul.Items[:0]
	for _, it := range items {
		if lo.LabelSelector != nil && !lo.LabelSelector.Matches(labels.Set(it.GetLabels())) {
			continue
		}
		ul.Items = append(ul.Items, *it)
	}
	return nil
}

func (a *ctrlClient) Apply(context.Context, runtime.ApplyConfiguration, ...client.ApplyOption) error {
	return fmt.Errorf("apply configurations are %w", errUnsupported)
}

func (a *ctrlClient) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	u, err := asUnstructured(obj)
	if err != nil {
		return err
	}
	co := &client.CreateOptions{}
	co.ApplyOptions(opts)
	got, err := a.c.Create(ctx, u, WriteOptions{FieldManager: co.FieldManager, DryRun: isDryRun(co.DryRun)})
	if err != nil {
		return err
	}
	u.Object = got.Object
	return nil
}

func (a *ctrlClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	u, err := asUnstructured(obj)
	if err != nil {
		return err
	}
	uo := &client.UpdateOptions{}
	uo.ApplyOptions(opts)
	got, err := a.c.Update(ctx, u, WriteOptions{FieldManager: uo.FieldManager, DryRun: isDryRun(uo.DryRun)})
	if err != nil {
		return err
	}
	u.Object = got.Object
	return nil
}

func (a *ctrlClient) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	u, err := asUnstructured(obj)
	if err != nil {
		return err
	}
	do := &client.DeleteOptions{}
	do.ApplyOptions(opts)
	return a.c.Delete(ctx, RefOf(u), DeleteOptions{DryRun: isDryRun(do.DryRun)})
}

func (a *ctrlClient) Patch(ctx context.Context, obj client.Object, patch client.Patch, opts ...client.PatchOption) error {
	u, err := asUnstructured(obj)
	if err != nil {
		return err
	}
	if patch.Type() != types.ApplyPatchType {
		return fmt.Errorf("patch type %s is %w", patch.Type(), errUnsupported)
	}
	data, err := patch.Data(obj)
	if err != nil {
		return fmt.Errorf("encoding the apply patch: %w", err)
	}
	applied := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &applied.Object); err != nil {
		return fmt.Errorf("decoding the apply patch: %w", err)
	}
	po := &client.PatchOptions{}
	po.ApplyOptions(opts)
	force := po.Force != nil && *po.Force
	got, err := a.c.Apply(ctx, applied, ApplyOptions{FieldManager: po.FieldManager, Force: force, DryRun: isDryRun(po.DryRun)})
	if err != nil {
		return err
	}
	u.Object = got.Object
	return nil
}

func (a *ctrlClient) DeleteAllOf(context.Context, client.Object, ...client.DeleteAllOfOption) error {
	return fmt.Errorf("DeleteAllOf is %w", errUnsupported)
}

func (a *ctrlClient) Status() client.SubResourceWriter { return noSubresource{} }

func (a *ctrlClient) SubResource(string) client.SubResourceClient { return noSubresource{} }

func (a *ctrlClient) Scheme() *runtime.Scheme { return a.scheme }

func (a *ctrlClient) RESTMapper() meta.RESTMapper { return a.c.RESTMapper() }

func (a *ctrlClient) GroupVersionKindFor(obj runtime.Object) (schema.GroupVersionKind, error) {
	return apiutil.GVKForObject(obj, a.scheme)
}

func (a *ctrlClient) IsObjectNamespaced(obj runtime.Object) (bool, error) {
	gvk, err := a.GroupVersionKindFor(obj)
	if err != nil {
		return false, err
	}
	return apiutil.IsGVKNamespaced(gvk, a.c.RESTMapper())
}

func isDryRun(values []string) bool {
	for _, v := range values {
		if v == metav1.DryRunAll {
			return true
		}
	}
	return false
}

// noSubresource refuses subresource requests, which truce's clusters do not
// serve.
type noSubresource struct{}

func (noSubresource) Get(context.Context, client.Object, client.Object, ...client.SubResourceGetOption) error {
	return fmt.Errorf("subresources are %w", errUnsupported)
}
func (noSubresource) Create(context.Context, client.Object, client.Object, ...client.SubResourceCreateOption) error {
	return fmt.Errorf("subresources are %w", errUnsupported)
}
func (noSubresource) Update(context.Context, client.Object, ...client.SubResourceUpdateOption) error {
	return fmt.Errorf("subresources are %w", errUnsupported)
}
func (noSubresource) Patch(context.Context, client.Object, client.Patch, ...client.SubResourcePatchOption) error {
	return fmt.Errorf("subresources are %w", errUnsupported)
}
func (noSubresource) Apply(context.Context, runtime.ApplyConfiguration, ...client.SubResourceApplyOption) error {
	return fmt.Errorf("subresources are %w", errUnsupported)
}
