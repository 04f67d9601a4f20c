package flux

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

// objectKey names a ConfigMap or Secret the way Flux looks it up.
type objectKey struct{ kind, namespace, name string }

func (k objectKey) String() string { return k.kind + "/" + k.namespace + "/" + k.name }

// lookup finds the ConfigMaps and Secrets named by keys among objects, as
// the typed objects the API server would return for them: a Secret's
// stringData is folded into data, as the API server does on write. When an
// object occurs several times the last one wins, like applying them in
// order. Conversion errors never quote a Secret's contents.
func lookup(objects []*unstructured.Unstructured, keys map[objectKey]bool) (map[objectKey]client.Object, error) {
	found := make(map[objectKey]client.Object)
	for _, u := range objects {
		if u == nil || u.GetAPIVersion() != "v1" {
			continue
		}
		key := objectKey{u.GetKind(), u.GetNamespace(), u.GetName()}
		if !keys[key] {
			continue
		}
		switch key.kind {
		case "ConfigMap":
			var cm corev1.ConfigMap
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &cm); err != nil {
				return nil, fmt.Errorf("the ConfigMap %s/%s is not a valid ConfigMap: %w", key.namespace, key.name, err)
			}
			found[key] = &cm
		case "Secret":
			var s corev1.Secret
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &s); err != nil {
				// The converter's message may quote data; say only where.
				return nil, fmt.Errorf("the Secret %s/%s is not a valid Secret (its data must be base64 strings)", key.namespace, key.name)
			}
			if len(s.StringData) > 0 {
				if s.Data == nil {
					s.Data = make(map[string][]byte, len(s.StringData))
				}
				for k, v := range s.StringData {
					s.Data[k] = []byte(v)
				}
				s.StringData = nil
			}
			found[key] = &s
		}
	}
	return found, nil
}

// worldClient is a controller-runtime client that serves the found
// objects, standing in for the cluster fluxcd/pkg/kustomize reads
// substituteFrom from.
func worldClient(found map[objectKey]client.Object) (c client.Client, err error) {
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	objs := make([]client.Object, 0, len(found))
	for _, o := range found {
		o.SetResourceVersion("")
		objs = append(objs, o)
	}
	defer func() {
		// The fake client panics on objects it cannot track.
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("cannot serve the ConfigMaps and Secrets: %v", r)
		}
	}()
	return fake.NewClientBuilder().WithScheme(scheme).WithObjects(objs...).Build(), nil
}
