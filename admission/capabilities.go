package admission

import (
	"fmt"

	"k8s.io/kubernetes/pkg/capabilities"
)

// SetAllowPrivileged sets kube-apiserver's --allow-privileged for every
// chain in this process. Kubernetes' own Pod validation reads it from
// k8s.io/kubernetes/pkg/capabilities, which is process-wide and set once,
// as in kube-apiserver; a process that never sets it admits with the
// flag's default, false. Setting it again to the value it has is allowed;
// to another value (after a chain admitted a Pod, or an in-process
// kube-apiserver started, with the other) it is an error naming both.
func SetAllowPrivileged(allow bool) error {
	capabilities.Setup(allow, 0)
	if got := capabilities.Get().AllowPrivileged; got != allow {
		return fmt.Errorf("--allow-privileged=%t: this process already admits with --allow-privileged=%t (kube-apiserver's setting is process-wide)", allow, got)
	}
	return nil
}
