package admission

import (
	"fmt"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/apis/apps"
	"k8s.io/kubernetes/pkg/apis/autoscaling"
	api "k8s.io/kubernetes/pkg/apis/core"
	deploymentstorage "k8s.io/kubernetes/pkg/registry/apps/deployment/storage"
	replicasetstorage "k8s.io/kubernetes/pkg/registry/apps/replicaset/storage"
	statefulsetstorage "k8s.io/kubernetes/pkg/registry/apps/statefulset/storage"
	rcstorage "k8s.io/kubernetes/pkg/registry/core/replicationcontroller/storage"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/truce-dev/truce/schema"
)

// scaleTarget is one kind's scale subresource as its registry serves it:
// the parent seen as a Scale, the new replicas written back, the replicas
// path per version for the ScaleHandler, and whether the registry runs
// autoscaling's ValidateScaleUpdate (the built-in ScaleRESTs do; the CR
// scale does not, the CR's schema validates the new replicas).
type scaleTarget struct {
	mappings managedfields.ResourcePathMappings
	// validator is the registry's ScaleREST as ValidateScaleUpdate's
	// GroupVersionKindProvider; nil for custom resources.
	validator rest.GroupVersionKindProvider
	// toScale is the registry's scaleFromX; found is false when a custom
	// resource has no value at specReplicasPath.
	toScale     func(obj runtime.Object) (scale *autoscaling.Scale, found bool, err error)
	setReplicas func(obj runtime.Object, replicas int32) error
}

// builtinScales are the built-in kinds kube-apiserver serves a scale
// subresource for, with their registries' replicas path mappings.
var builtinScales = map[k8sschema.GroupResource]scaleTarget{
	{Group: "apps", Resource: "deployments"}: {
		mappings:  deploymentstorage.ReplicasPathMappings(),
		validator: &deploymentstorage.ScaleREST{},
		toScale:   typedScale(scaleFromDeployment),
		setReplicas: typedReplicas(func(d *apps.Deployment, n int32) {
			d.Spec.Replicas = n
		}),
	},
	{Group: "apps", Resource: "replicasets"}: {
		mappings:  replicasetstorage.ReplicasPathMappings(),
		validator: &replicasetstorage.ScaleREST{},
		toScale:   typedScale(scaleFromReplicaSet),
		setReplicas: typedReplicas(func(rs *apps.ReplicaSet, n int32) {
			rs.Spec.Replicas = n
		}),
	},
	{Group: "apps", Resource: "statefulsets"}: {
		mappings:  statefulsetstorage.ReplicasPathMappings(),
		validator: &statefulsetstorage.ScaleREST{},
		toScale:   typedScale(scaleFromStatefulSet),
		setReplicas: typedReplicas(func(ss *apps.StatefulSet, n int32) {
			ss.Spec.Replicas = n
		}),
	},
	{Group: "", Resource: "replicationcontrollers"}: {
		mappings:  rcstorage.ReplicasPathMappings(),
		validator: &rcstorage.ScaleREST{},
		toScale: typedScale(func(rc *api.ReplicationController) (*autoscaling.Scale, error) {
			return scaleFromRC(rc), nil
		}),
		setReplicas: typedReplicas(func(rc *api.ReplicationController, n int32) {
			rc.Spec.Replicas = &n
		}),
	},
}

// scaleTargetFor returns the scale subresource of a resource; false when
// the server serves none for it.
func scaleTargetFor(r *schema.Resource) (scaleTarget, bool) {
	if r.CRD == nil {
		t, ok := builtinScales[r.GVR.GroupResource()]
		return t, ok
	}
	var scale *apiextensionsv1.CustomResourceSubresourceScale
	for _, v := range r.CRD.Spec.Versions {
		if v.Name == r.GVR.Version && v.Subresources != nil {
			scale = v.Subresources.Scale
		}
	}
	if scale == nil {
		return scaleTarget{}, false
	}
	var selectorPath string
	if scale.LabelSelectorPath != nil {
		selectorPath = *scale.LabelSelectorPath
	}
	return scaleTarget{
		mappings: crReplicasPaths(r.CRD),
		toScale: func(obj runtime.Object) (*autoscaling.Scale, bool, error) {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return nil, false, fmt.Errorf("custom resource decoded as %T", obj)
			}
			return scaleFromCustomResource(u, scale.SpecReplicasPath, scale.StatusReplicasPath, selectorPath)
		},
		setReplicas: func(obj runtime.Object, replicas int32) error {
			u, ok := obj.(*unstructured.Unstructured)
			if !ok {
				return fmt.Errorf("custom resource decoded as %T", obj)
			}
			return unstructured.SetNestedField(u.Object, int64(replicas), splitReplicasPath(scale.SpecReplicasPath)...)
		},
	}, true
}

func typedScale[T runtime.Object](f func(T) (*autoscaling.Scale, error)) func(runtime.Object) (*autoscaling.Scale, bool, error) {
	return func(obj runtime.Object) (*autoscaling.Scale, bool, error) {
		t, ok := obj.(T)
		if !ok {
			return nil, false, fmt.Errorf("stored object decoded as %T", obj)
		}
		s, err := f(t)
		return s, true, err
	}
}

func typedReplicas[T runtime.Object](f func(T, int32)) func(runtime.Object, int32) error {
	return func(obj runtime.Object, n int32) error {
		t, ok := obj.(T)
		if !ok {
			return fmt.Errorf("stored object decoded as %T", obj)
		}
		f(t, n)
		return nil
	}
}

// crReplicasPaths is the CRD handler's replicasPathInCustomResource
// (apiextensions-apiserver pkg/apiserver/customresource_handler.go,
// built inline there): per served version, specReplicasPath as a field
// path, nil for a version without a scale subresource.
func crReplicasPaths(crd *apiextensionsv1.CustomResourceDefinition) managedfields.ResourcePathMappings {
	m := managedfields.ResourcePathMappings{}
	for _, v := range crd.Spec.Versions {
		gv := k8sschema.GroupVersion{Group: crd.Spec.Group, Version: v.Name}.String()
		if v.Subresources == nil || v.Subresources.Scale == nil {
			m[gv] = nil
			continue
		}
		path := fieldpath.Path{}
		for _, element := range splitReplicasPath(v.Subresources.Scale.SpecReplicasPath) {
			s := element
			path = append(path, fieldpath.PathElement{FieldName: &s})
		}
		m[gv] = path
	}
	return m
}

// The registries' views of their kinds through the scale subresource,
// unexported upstream; each is a copy of the function it is named after.

// scaleFromDeployment is k8s.io/kubernetes/pkg/registry/apps/deployment/
// storage's.
func scaleFromDeployment(d *apps.Deployment) (*autoscaling.Scale, error) {
	return scaleFromSelector(d.ObjectMeta, d.Spec.Replicas, d.Status.Replicas, d.Spec.Selector)
}

// scaleFromReplicaSet is k8s.io/kubernetes/pkg/registry/apps/replicaset/
// storage's.
func scaleFromReplicaSet(rs *apps.ReplicaSet) (*autoscaling.Scale, error) {
	return scaleFromSelector(rs.ObjectMeta, rs.Spec.Replicas, rs.Status.Replicas, rs.Spec.Selector)
}

// scaleFromStatefulSet is k8s.io/kubernetes/pkg/registry/apps/statefulset/
// storage's.
func scaleFromStatefulSet(ss *apps.StatefulSet) (*autoscaling.Scale, error) {
	return scaleFromSelector(ss.ObjectMeta, ss.Spec.Replicas, ss.Status.Replicas, ss.Spec.Selector)
}

// scaleFromSelector is the body the three apps registries' scaleFromX
// share: the metadata a Scale carries, the replicas and the selector as a
// string.
func scaleFromSelector(m metav1.ObjectMeta, spec, status int32, sel *metav1.LabelSelector) (*autoscaling.Scale, error) {
	selector, err := metav1.LabelSelectorAsSelector(sel)
	if err != nil {
		return nil, err
	}
	return &autoscaling.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID,
			ResourceVersion: m.ResourceVersion, CreationTimestamp: m.CreationTimestamp},
		Spec:   autoscaling.ScaleSpec{Replicas: spec},
		Status: autoscaling.ScaleStatus{Replicas: status, Selector: selector.String()},
	}, nil
}

// scaleFromRC is k8s.io/kubernetes/pkg/registry/core/
// replicationcontroller/storage's (its selector is a plain map).
func scaleFromRC(rc *api.ReplicationController) *autoscaling.Scale {
	var replicas int32
	if rc.Spec.Replicas != nil {
		// Defaulting sets it on every stored controller; upstream
		// dereferences it unchecked.
		replicas = *rc.Spec.Replicas
	}
	return &autoscaling.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: rc.Name, Namespace: rc.Namespace, UID: rc.UID,
			ResourceVersion: rc.ResourceVersion, CreationTimestamp: rc.CreationTimestamp},
		Spec:   autoscaling.ScaleSpec{Replicas: replicas},
		Status: autoscaling.ScaleStatus{Replicas: rc.Status.Replicas, Selector: labels.SelectorFromSet(rc.Spec.Selector).String()},
	}
}

// splitReplicasPath is apiextensions-apiserver pkg/registry/
// customresource's: the path split at periods, the leading one ignored.
func splitReplicasPath(replicasPath string) []string {
	return strings.Split(strings.TrimPrefix(replicasPath, "."), ".")
}

// scaleFromCustomResource is apiextensions-apiserver pkg/registry/
// customresource's, answering the internal Scale the chain works with (the
// CR's autoscaling/v1 Scale holds the same fields); found is false when
// specReplicasPath holds no value.
func scaleFromCustomResource(cr *unstructured.Unstructured, specReplicasPath, statusReplicasPath, labelSelectorPath string) (*autoscaling.Scale, bool, error) {
	specReplicas, foundSpecReplicas, err := unstructured.NestedInt64(cr.UnstructuredContent(), splitReplicasPath(specReplicasPath)...)
	if err != nil {
		return nil, false, err
	}
	statusReplicas, _, err := unstructured.NestedInt64(cr.UnstructuredContent(), splitReplicasPath(statusReplicasPath)...)
	if err != nil {
		return nil, false, err
	}
	var labelSelector string
	if len(labelSelectorPath) > 0 {
		if labelSelector, _, err = unstructured.NestedString(cr.UnstructuredContent(), splitReplicasPath(labelSelectorPath)...); err != nil {
			return nil, false, err
		}
	}
	return &autoscaling.Scale{
		ObjectMeta: metav1.ObjectMeta{Name: cr.GetName(), Namespace: cr.GetNamespace(), UID: cr.GetUID(),
			ResourceVersion: cr.GetResourceVersion(), CreationTimestamp: cr.GetCreationTimestamp()},
		Spec:   autoscaling.ScaleSpec{Replicas: int32(specReplicas)},
		Status: autoscaling.ScaleStatus{Replicas: int32(statusReplicas), Selector: labelSelector},
	}, foundSpecReplicas, nil
}
