package builtin

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/rest"
	"k8s.io/kubernetes/pkg/registry/apps/controllerrevision"
	"k8s.io/kubernetes/pkg/registry/apps/daemonset"
	"k8s.io/kubernetes/pkg/registry/apps/deployment"
	"k8s.io/kubernetes/pkg/registry/apps/replicaset"
	"k8s.io/kubernetes/pkg/registry/apps/statefulset"
	"k8s.io/kubernetes/pkg/registry/autoscaling/horizontalpodautoscaler"
	"k8s.io/kubernetes/pkg/registry/batch/cronjob"
	"k8s.io/kubernetes/pkg/registry/batch/job"
	"k8s.io/kubernetes/pkg/registry/coordination/lease"
	"k8s.io/kubernetes/pkg/registry/core/configmap"
	"k8s.io/kubernetes/pkg/registry/core/endpoint"
	"k8s.io/kubernetes/pkg/registry/core/event"
	"k8s.io/kubernetes/pkg/registry/core/limitrange"
	"k8s.io/kubernetes/pkg/registry/core/namespace"
	"k8s.io/kubernetes/pkg/registry/core/node"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolume"
	"k8s.io/kubernetes/pkg/registry/core/persistentvolumeclaim"
	"k8s.io/kubernetes/pkg/registry/core/pod"
	"k8s.io/kubernetes/pkg/registry/core/podtemplate"
	"k8s.io/kubernetes/pkg/registry/core/replicationcontroller"
	"k8s.io/kubernetes/pkg/registry/core/resourcequota"
	"k8s.io/kubernetes/pkg/registry/core/secret"
	"k8s.io/kubernetes/pkg/registry/core/serviceaccount"
	"k8s.io/kubernetes/pkg/registry/discovery/endpointslice"
	"k8s.io/kubernetes/pkg/registry/networking/ingress"
	"k8s.io/kubernetes/pkg/registry/networking/ingressclass"
	"k8s.io/kubernetes/pkg/registry/networking/networkpolicy"
	"k8s.io/kubernetes/pkg/registry/policy/poddisruptionbudget"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrole"
	"k8s.io/kubernetes/pkg/registry/rbac/clusterrolebinding"
	"k8s.io/kubernetes/pkg/registry/rbac/role"
	"k8s.io/kubernetes/pkg/registry/rbac/rolebinding"
	"k8s.io/kubernetes/pkg/registry/scheduling/priorityclass"
	"k8s.io/kubernetes/pkg/registry/storage/storageclass"
)

// Strategy is what the generic registry store of a resource runs on a write:
// PrepareForCreate/Update, validation, canonicalisation and warnings.
type Strategy interface {
	rest.RESTCreateStrategy
	rest.RESTUpdateStrategy
}

// strategies are the upstream registry strategies of the resources truce
// validates exactly like kube-apiserver. A resource missing here is still
// decoded, defaulted and admitted, but only its ObjectMeta is validated, and
// results say so.
var strategies = map[schema.GroupResource]Strategy{
	{Group: "", Resource: "configmaps"}:                                   configmap.Strategy,
	{Group: "", Resource: "endpoints"}:                                    endpoint.Strategy,
	{Group: "", Resource: "events"}:                                       event.Strategy,
	{Group: "", Resource: "limitranges"}:                                  limitrange.Strategy,
	{Group: "", Resource: "namespaces"}:                                   namespace.Strategy,
	{Group: "", Resource: "nodes"}:                                        node.Strategy,
	{Group: "", Resource: "persistentvolumes"}:                            persistentvolume.Strategy,
	{Group: "", Resource: "persistentvolumeclaims"}:                       persistentvolumeclaim.Strategy,
	{Group: "", Resource: "pods"}:                                         pod.Strategy,
	{Group: "", Resource: "podtemplates"}:                                 podtemplate.Strategy,
	{Group: "", Resource: "replicationcontrollers"}:                       replicationcontroller.Strategy,
	{Group: "", Resource: "resourcequotas"}:                               resourcequota.Strategy,
	{Group: "", Resource: "secrets"}:                                      secret.Strategy,
	{Group: "", Resource: "serviceaccounts"}:                              serviceaccount.Strategy,
	{Group: "apps", Resource: "controllerrevisions"}:                      controllerrevision.Strategy,
	{Group: "apps", Resource: "daemonsets"}:                               daemonset.Strategy,
	{Group: "apps", Resource: "deployments"}:                              deployment.Strategy,
	{Group: "apps", Resource: "replicasets"}:                              replicaset.Strategy,
	{Group: "apps", Resource: "statefulsets"}:                             statefulset.Strategy,
	{Group: "autoscaling", Resource: "horizontalpodautoscalers"}:          horizontalpodautoscaler.Strategy,
	{Group: "batch", Resource: "cronjobs"}:                                cronjob.Strategy,
	{Group: "batch", Resource: "jobs"}:                                    job.Strategy,
	{Group: "coordination.k8s.io", Resource: "leases"}:                    lease.Strategy,
	{Group: "discovery.k8s.io", Resource: "endpointslices"}:               endpointslice.Strategy,
	{Group: "networking.k8s.io", Resource: "ingresses"}:                   ingress.Strategy,
	{Group: "networking.k8s.io", Resource: "ingressclasses"}:              ingressclass.Strategy,
	{Group: "networking.k8s.io", Resource: "networkpolicies"}:             networkpolicy.Strategy,
	{Group: "policy", Resource: "poddisruptionbudgets"}:                   poddisruptionbudget.Strategy,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterroles"}:        clusterrole.Strategy,
	{Group: "rbac.authorization.k8s.io", Resource: "clusterrolebindings"}: clusterrolebinding.Strategy,
	{Group: "rbac.authorization.k8s.io", Resource: "roles"}:               role.Strategy,
	{Group: "rbac.authorization.k8s.io", Resource: "rolebindings"}:        rolebinding.Strategy,
	{Group: "scheduling.k8s.io", Resource: "priorityclasses"}:             priorityclass.Strategy,
	{Group: "storage.k8s.io", Resource: "storageclasses"}:                 storageclass.Strategy,
}

// StrategyFor returns the upstream registry strategy for a resource.
func StrategyFor(gr schema.GroupResource) (Strategy, bool) {
	s, ok := strategies[gr]
	return s, ok
}
