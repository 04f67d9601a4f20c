package admission

import (
	"fmt"

	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/truce-dev/truce/admission/builtin"
	"github.com/truce-dev/truce/schema"
)

// DefaultFieldManager is the manager recorded in managedFields for writes
// that name none; the server takes the client's user agent, and truce is
// the client here.
const DefaultFieldManager = "truce"

// The field managers kubectl sends when its --field-manager is not given,
// for the two commands that make the writes truce admit makes
// (k8s.io/kubectl/pkg/cmd/create and cmd/replace).
const (
	// KubectlCreate is kubectl create's: a CREATE.
	KubectlCreate = "kubectl-create"
	// KubectlReplace is kubectl replace's: an UPDATE that PUTs the whole
	// object.
	KubectlReplace = "kubectl-replace"
)

// KubectlFieldManager is the field manager kubectl sends by default for a
// write of op made as truce admit makes it: kubectl create for a CREATE,
// kubectl replace for an UPDATE.
func KubectlFieldManager(op Operation) string {
	if op == Update {
		return KubectlReplace
	}
	return KubectlCreate
}

// fieldManagerFor returns the managedFields bookkeeping of a resource, built
// the way the server's endpoint installer (built-ins, and
// CustomResourceDefinitions in the apiextensions-apiserver) and the CRD
// handler (custom resources) build it: the resource's type converter, its
// scheme's conversion, defaulting and creation, and the strategy's reset
// fields.
func (c *Chain) fieldManagerFor(r *schema.Resource, strategy builtin.Strategy) (*managedfields.FieldManager, error) {
	c.fmMu.Lock()
	defer c.fmMu.Unlock()
	if fm, ok := c.fieldManagers[r.GVR]; ok {
		return fm, nil
	}
	tc, err := c.registry.TypeConverter(r.GVR.GroupVersion())
	if err != nil {
		return nil, fmt.Errorf("type information for %s: %w", r.GVR.GroupVersion(), err)
	}
	resetFields := map[fieldpath.APIVersion]fieldpath.Filter{}
	if rs, ok := strategy.(rest.ResetFieldsStrategy); ok {
		resetFields = fieldpath.NewExcludeFilterSetMap(rs.GetResetFields())
	}
	var fm *managedfields.FieldManager
	if r.CRD == nil {
		hub := k8sschema.GroupVersion{Group: r.GVR.Group, Version: runtime.APIVersionInternal}
		s := schemeFor(r.GVR.Group)
		fm, err = managedfields.NewDefaultFieldManager(tc, runtime.UnsafeObjectConvertor(s), s, s, r.GVK(), hub, "", resetFields)
	} else {
		cr, crErr := c.customResourceFor(r)
		if crErr != nil {
			return nil, crErr
		}
		fm, err = managedfields.NewDefaultCRDFieldManager(tc, convertor{}, crDefaulter{cr}, creater{c.registry},
			r.GVK(), r.GVR.GroupVersion(), "", resetFields)
	}
	if err != nil {
		return nil, fmt.Errorf("field manager for %s: %w", r.GVR, err)
	}
	c.fieldManagers[r.GVR] = fm
	return fm, nil
}

// crDefaulter applies a custom resource's structural defaults, as the CRD
// handler's unstructuredDefaulter does after an apply merge.
type crDefaulter struct{ cr *customResource }

func (d crDefaulter) Default(obj runtime.Object) {
	u, ok := obj.(runtime.Unstructured)
	if !ok || d.cr.structural == nil {
		return
	}
	structuraldefaulting.Default(u.UnstructuredContent(), d.cr.structural)
}

// emptyLive is what the handlers start a create from: a new, empty object
// of the request's versioned kind.
func emptyLive(r *schema.Resource) (runtime.Object, error) {
	if r.CRD != nil {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(r.GVK())
		return u, nil
	}
	return schemeFor(r.GVR.Group).New(r.GVK())
}

// managerAndLive returns the resource's field manager and the object a
// write starts from: a copy of the stored one (the field manager strips
// its managedFields), or a new versioned object for a create, as the
// handlers do.
func (c *Chain) managerAndLive(r *schema.Resource, strategy builtin.Strategy, old runtime.Object) (*managedfields.FieldManager, runtime.Object, error) {
	fm, err := c.fieldManagerFor(r, strategy)
	if err != nil {
		return nil, nil, err
	}
	if old != nil {
		return fm, old.DeepCopyObject(), nil
	}
	live, err := emptyLive(r)
	return fm, live, err
}

// trackFields records the write's manager in managedFields before mutating
// admission runs, like the create and update handlers: changes admission
// makes afterwards are not attributed to any manager.
func (c *Chain) trackFields(w writeRequest, strategy builtin.Strategy, obj, old runtime.Object) (runtime.Object, error) {
	return c.recordFields(w.resource, strategy, obj, old, w.manager())
}

// recordFields updates obj's managedFields for a write by manager: the
// stored entries of old (none for a create) updated with the fields the
// write sets or changes, as the handlers' FieldManager.UpdateNoErrors does.
func (c *Chain) recordFields(r *schema.Resource, strategy builtin.Strategy, obj, old runtime.Object, manager string) (runtime.Object, error) {
	fm, live, err := c.managerAndLive(r, strategy, old)
	if err != nil {
		return nil, err
	}
	return fm.UpdateNoErrors(live, obj, manager), nil
}

// applyPatch merges a server-side apply configuration into the live object
// (or into a new one), as the patch handler's applyPatcher does.
func (c *Chain) applyPatch(w writeRequest, strategy builtin.Strategy, old runtime.Object) (runtime.Object, error) {
	if w.fieldManager == "" {
		return nil, apierrors.NewBadRequest("PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch")
	}
	fm, live, err := c.managerAndLive(w.resource, strategy, old)
	if err != nil {
		return nil, err
	}
	return fm.Apply(live, w.in.DeepCopy(), w.fieldManager, w.force)
}

func (w writeRequest) manager() string {
	if w.fieldManager == "" {
		return DefaultFieldManager
	}
	return w.fieldManager
}
