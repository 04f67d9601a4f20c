package reconcile

import (
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
)

// TrackingAnnotation holds the id of the object as truce applied it:
// "<sync namespace>/<sync name>:<group>/<Kind>:<namespace>/<name>". An
// object is truce's to prune only when the id names the object itself: a
// copy another tool made (Kyverno generate with clone, a controller that
// copies annotations) carries the id of its source and is left alone,
// which label tracking cannot tell (Argo CD's tracking-label problem: a
// copy inherits app.kubernetes.io/instance and is pruned as the app's).
const TrackingAnnotation = "truce.dev/tracking-id"

// TrackingID is the id truce writes on ref for the sync namespace/name.
func TrackingID(namespace, name string, ref cluster.Ref) string {
	return fmt.Sprintf("%s/%s:%s/%s:%s/%s", namespace, name, ref.Group, ref.Kind, ref.Namespace, ref.Name)
}

// trackingOf returns obj's tracking id, "" without one.
func trackingOf(obj *unstructured.Unstructured) string {
	return obj.GetAnnotations()[TrackingAnnotation]
}

func setTracking(obj *unstructured.Unstructured, id string) {
	a := obj.GetAnnotations()
	if a == nil {
		a = map[string]string{}
	}
	a[TrackingAnnotation] = id
	obj.SetAnnotations(a)
}
