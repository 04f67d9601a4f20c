package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/go-logr/logr"
	policiesv1beta1 "github.com/kyverno/api/api/policies.kyverno.io/v1beta1"
	"github.com/kyverno/kyverno/pkg/cel/engine"
	"github.com/kyverno/kyverno/pkg/cel/libs"
	"github.com/kyverno/kyverno/pkg/cel/matching"
	gpolcompiler "github.com/kyverno/kyverno/pkg/cel/policies/gpol/compiler"
	gpolengine "github.com/kyverno/kyverno/pkg/cel/policies/gpol/engine"
	"github.com/kyverno/kyverno/pkg/clients/dclient"
	engineapi "github.com/kyverno/kyverno/pkg/engine/api"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/restmapper"
)

func gpolKey(p policiesv1beta1.GeneratingPolicyLike) string {
	if p.GetNamespace() != "" {
		return p.GetNamespace() + "/" + p.GetName()
	}
	return p.GetName()
}

// gpolRule describes a GeneratingPolicy as one rule: its triggers are the
// kinds of its matchConstraints' resources, found through discovery.
func gpolRule(p policiesv1beta1.GeneratingPolicyLike, resources []*metav1.APIResourceList) protocol.BackgroundRule {
	r := protocol.BackgroundRule{Policy: gpolKey(p), Synchronize: p.GetSpec().SynchronizationEnabled(), CEL: true}
	r.Kinds = constraintKinds(p.GetMatchConstraints(), resources)
	for _, v := range p.GetVariables() {
		for _, lib := range []string{"http.", "image(", "imagedata.", "globalContext."} {
			if strings.Contains(v.Expression, lib) {
				r.Unpredictable = fmt.Sprintf("variable %q uses %s, which reaches outside the cluster", v.Name, strings.TrimRight(lib, ".("))
			}
		}
	}
	return r
}

// constraintKinds are the kinds of the resources a MatchResources' rules
// name, found through discovery, as "group/version/Kind".
func constraintKinds(mc admissionregistrationv1.MatchResources, resources []*metav1.APIResourceList) []string {
	var out []string
	seen := map[string]bool{}
	for _, rr := range mc.ResourceRules {
		for _, l := range resources {
			gv, err := schema.ParseGroupVersion(l.GroupVersion)
			if err != nil || !matchesAny(rr.APIGroups, gv.Group) || !matchesAny(rr.APIVersions, gv.Version) {
				continue
			}
			for _, res := range l.APIResources {
				if strings.Contains(res.Name, "/") || !matchesAny(rr.Resources, res.Name) {
					continue
				}
				k := gv.Group + "/" + gv.Version + "/" + res.Kind
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
		}
	}
	return out
}

func matchesAny(list []string, s string) bool {
	for _, x := range list {
		if x == "*" || x == s {
			return true
		}
	}
	return false
}

// runGeneratingPolicies runs the GeneratingPolicies for a trigger as
// Kyverno's CEL generate controller (pkg/background/gpol) processes an
// UpdateRequest: a request for the trigger, the policy compiled by
// Kyverno's compiler, gpolengine's Handle, whose generator library writes
// through client. It answers what each policy generated.
func runGeneratingPolicies(ctx context.Context, req *protocol.BackgroundRequest, gpols []policiesv1beta1.GeneratingPolicyLike, client dclient.Interface, kube kubernetes.Interface, trigger *unstructured.Unstructured) ([]*unstructured.Unstructured, []string) {
	var generated []*unstructured.Unstructured
	var errs []string
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	informers := kubeinformers.NewSharedInformerFactory(kube, 0)
	secretLister := informers.Core().V1().Secrets().Lister()
	informers.Start(ctx.Done())
	informers.WaitForCacheSync(ctx.Done())
	provider, err := libs.NewContextProvider(client, secretLister, offlineGlobalContext{}, restMapper, false)
	if err != nil {
		return nil, []string{fmt.Sprintf("kyverno's CEL context: %v", err)}
	}
	nsResolver := engine.NewNamespaceResolver(logr.Discard(), informers.Core().V1().Namespaces().Lister(), kube)
	gpolEngine := gpolengine.NewEngine(nsResolver, matching.NewMatcher())
	compiler := gpolcompiler.NewCompiler()
	gvk := trigger.GroupVersionKind()
	mapping, err := restMapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return nil, []string{fmt.Sprintf("the trigger's kind %s: %v", gvk, err)}
	}
	for _, p := range gpols {
		if req.Policy != "" && gpolKey(p) != req.Policy {
			continue
		}
		compiled, cerrs := compiler.Compile(p, nil)
		if len(cerrs) > 0 {
			errs = append(errs, fmt.Sprintf("%s: %v", gpolKey(p), cerrs.ToAggregate()))
			continue
		}
		workerCtx := provider.Clone()
		request := engine.Request(workerCtx, gvk, mapping.Resource, "", trigger.GetName(), trigger.GetNamespace(),
			admissionv1.Operation(req.Operation), authenticationv1.UserInfo{}, trigger, nil, false, nil)
		resp, err := gpolEngine.Handle(request, gpolengine.Policy{
			Policy:         engineapi.NewGeneratingPolicyFromLike(p).AsGeneratingPolicyLike(),
			CompiledPolicy: compiled,
		}, false)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", gpolKey(p), err))
			continue
		}
		for _, r := range resp.Policies {
			if r.Result == nil {
				continue
			}
			if s := r.Result.Status(); s == engineapi.RuleStatusError || s == engineapi.RuleStatusFail {
				errs = append(errs, fmt.Sprintf("%s: %s", gpolKey(p), r.Result.Message()))
				continue
			}
			generated = append(generated, r.Result.GeneratedResources()...)
		}
	}
	return generated, errs
}
