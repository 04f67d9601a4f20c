package lint

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"

	"github.com/truce-dev/truce/admission"
)

// podMutator runs the input's bound MutatingAdmissionPolicies over the Pod
// a workload's controller creates, as the API server does before its
// PodSecurity plugin (a validating one) looks at the Pod: a policy that
// sets a seccomp profile or drops capabilities makes a template that
// violates the level as written run fine.
type podMutator struct {
	chain *admission.Chain
}

// newPodMutator compiles the bound MutatingAdmissionPolicies of in, with
// the cluster the files are applied to (the repository's Namespaces, CRDs
// and parameter objects: what the policies select on and read); nil when
// there are none, or when they do not compile (the API server refuses
// those, which is not this rule's to say).
func newPodMutator(ctx context.Context, in *Input) *podMutator {
	a, err := splitForAdmission(in)
	if err != nil {
		return nil
	}
	objs := slices.Clone(a.base)
	for _, p := range a.policies {
		if bindings := a.bound(p); len(bindings) > 0 {
			objs = append(append(objs, p.Object), bindings...)
		}
	}
	if len(objs) == len(a.base) {
		return nil
	}
	state, err := admission.NewState(objs...)
	if err != nil {
		return nil
	}
	chain, err := admission.NewChain(ctx, state, in.chainOptions())
	if err != nil {
		return nil
	}
	return &podMutator{chain: chain}
}

func (m *podMutator) close() {
	if m != nil {
		m.chain.Close()
	}
}

// controllers are the service accounts of the kube-controller-manager
// controllers that create each workload kind's Pods: policies may match
// on the user.
var controllers = map[string]string{
	"Deployment":            "replicaset-controller",
	"ReplicaSet":            "replicaset-controller",
	"StatefulSet":           "statefulset-controller",
	"DaemonSet":             "daemon-set-controller",
	"ReplicationController": "replication-controller",
	"Job":                   "job-controller",
	"CronJob":               "job-controller",
}

// mutate returns the Pod the controller of workload creates from tmpl in
// namespace ns as mutating admission leaves it, and the policies that
// changed it; the template itself when nothing changed it.
func (m *podMutator) mutate(ctx context.Context, workload *unstructured.Unstructured, tmpl *corev1.PodTemplateSpec, ns string) (*corev1.Pod, []string, error) {
	pod := &corev1.Pod{ObjectMeta: *tmpl.ObjectMeta.DeepCopy(), Spec: *tmpl.Spec.DeepCopy()}
	pod.APIVersion, pod.Kind = "v1", "Pod"
	pod.Namespace, pod.Name = ns, workload.GetName()+"-truce-lint"
	if m == nil {
		return pod, nil, nil
	}
	body, err := json.Marshal(pod)
	if err != nil {
		return nil, nil, fmt.Errorf("encoding the pod of %s: %w", objectName(workload), err)
	}
	sa := controllers[workload.GetKind()]
	res, err := m.chain.Mutate(ctx, admission.Review{
		Operation: admission.Create, Kind: k8sschema.GroupVersionKind{Version: "v1", Kind: "Pod"},
		Resource: k8sschema.GroupVersionResource{Version: "v1", Resource: "pods"}, Namespace: ns, Name: pod.Name, Object: body,
		UserInfo: &user.DefaultInfo{Name: serviceaccount.MakeUsername("kube-system", sa),
			Groups: append(serviceaccount.MakeGroupNames("kube-system"), user.AllAuthenticated)},
		DryRun: true, Attribute: true,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("running mutating admission on the pod of %s: %w", objectName(workload), err)
	}
	if !res.Allowed || res.Object == nil {
		return pod, nil, nil
	}
	mutated := &corev1.Pod{}
	if err := json.Unmarshal(res.Object, mutated); err != nil {
		return nil, nil, fmt.Errorf("decoding the mutated pod of %s: %w", objectName(workload), err)
	}
	by := map[string]bool{}
	for _, c := range res.Changes {
		by[c.By] = true
	}
	names := make([]string, 0, len(by))
	for n := range by {
		names = append(names, n)
	}
	sort.Strings(names)
	return mutated, names, nil
}
