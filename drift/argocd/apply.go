package argocd

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission/kubectl"
)

// WithLastApplied returns a copy of config carrying the
// last-applied-configuration annotation kubectl apply writes when it
// creates an object (Argo CD's sync runs kubectl's apply code).
func WithLastApplied(config *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	a, err := kubectl.ClientSideApply(config, nil)
	if err != nil {
		return nil, err
	}
	return a.Object, nil
}
