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

// ClientSideApply returns the object kubectl apply (client-side, as Argo
// CD's default sync runs it) asks the server to store when applying config
// over live: live patched with the three-way merge of the previous
// last-applied configuration, config and live, computed by kubectl's own
// patcher (admission/kubectl). changed is false when the patch is empty and
// kubectl sends nothing.
func ClientSideApply(config, live *unstructured.Unstructured) (patched *unstructured.Unstructured, changed bool, err error) {
	a, err := kubectl.ClientSideApply(config, live)
	if err != nil {
		return nil, false, err
	}
	return a.Patched, !a.Unchanged, nil
}
