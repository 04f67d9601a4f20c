package admission

import (
	"context"
	"fmt"
	"io"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	"k8s.io/apiserver/pkg/admission/plugin/policy/config"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/admission/plugin/policy/matching"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	apiservercel "k8s.io/apiserver/pkg/cel"
	"k8s.io/apiserver/pkg/cel/environment"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"

	"github.com/truce-dev/truce/schema"
)

// The two policy plugins below are upstream's (k8s.io/apiserver v0.37.2,
// policy/validating and policy/mutating NewPlugin), built through the seam
// upstream offers, generic.NewPlugin and generic.NewPolicySource's compile
// function, with that function looked up in a Cache first. Upstream's
// compile functions are unexported, so validatingPolicy and mutatingPolicy
// repeat them line for line; TestCacheSameResults compares every result
// with the upstream plugins', and TestUpstreamVersion fails when
// k8s.io/apiserver moves and they must be compared again.

func newValidatingPolicyPlugin(cache *Cache, sources *policySources, env string, configFile io.Reader) (*validating.Plugin, error) {
	cfg, err := config.LoadValidatingConfig(configFile)
	if err != nil {
		return nil, err
	}
	compile := func(p *validating.Policy) validating.Validator {
		key, err := policyKey("ValidatingAdmissionPolicy", p.Name, p.Spec, env)
		if err != nil {
			return validatingPolicy(p)
		}
		v, _ := cache.get(key, func() (any, error) { return validatingPolicy(p), nil })
		return v.(validating.Validator)
	}
	handler := k8sadmission.NewHandler(k8sadmission.Connect, k8sadmission.Create, k8sadmission.Delete, k8sadmission.Update)
	p := &validating.Plugin{Plugin: generic.NewPlugin(
		handler,
		func(f informers.SharedInformerFactory, client kubernetes.Interface, dynamicClient dynamic.Interface, restMapper meta.RESTMapper) generic.Source[validating.PolicyHook] {
			return generic.NewPolicySource(
				f.Admissionregistration().V1().ValidatingAdmissionPolicies().Informer(),
				sources.informer(f.Admissionregistration().V1().ValidatingAdmissionPolicyBindings().Informer()),
				validating.NewValidatingAdmissionPolicyAccessor,
				validating.NewValidatingAdmissionPolicyBindingAccessor,
				compile,
				f,
				dynamicClient,
				restMapper,
			)
		},
		func(a authorizer.UnconditionalAuthorizer, m *matching.Matcher, client kubernetes.Interface) generic.Dispatcher[validating.PolicyHook] {
			return validating.NewDispatcher(a, generic.NewPolicyMatcher(m))
		},
	)}
	p.SetEnabled(true)
	p.SetStaticManifestsDir(cfg.StaticManifestsDir)
	return p, nil
}

func newMutatingPolicyPlugin(cache *Cache, sources *policySources, registry *schema.Registry, env string, configFile io.Reader) (*mutating.Plugin, error) {
	cfg, err := config.LoadMutatingConfig(configFile)
	if err != nil {
		return nil, err
	}
	compile := func(p *mutating.Policy) mutating.PolicyEvaluator {
		key, err := policyKey("MutatingAdmissionPolicy", p.Name, p.Spec, env)
		if err != nil {
			return mutatingPolicy(p)
		}
		v, _ := cache.get(key, func() (any, error) { return mutatingPolicy(p), nil })
		return v.(mutating.PolicyEvaluator)
	}
	handler := k8sadmission.NewHandler(k8sadmission.Create, k8sadmission.Update, k8sadmission.Connect)
	p := &mutating.Plugin{}
	p.Plugin = generic.NewPlugin(
		handler,
		func(f informers.SharedInformerFactory, client kubernetes.Interface, dynamicClient dynamic.Interface, restMapper meta.RESTMapper) generic.Source[mutating.PolicyHook] {
			return generic.NewPolicySource(
				f.Admissionregistration().V1().MutatingAdmissionPolicies().Informer(),
				sources.informer(f.Admissionregistration().V1().MutatingAdmissionPolicyBindings().Informer()),
				mutating.NewMutatingAdmissionPolicyAccessor,
				mutating.NewMutatingAdmissionPolicyBindingAccessor,
				compile,
				f,
				dynamicClient,
				restMapper,
			)
		},
		func(a authorizer.UnconditionalAuthorizer, m *matching.Matcher, client kubernetes.Interface) generic.Dispatcher[mutating.PolicyHook] {
			return mutating.NewDispatcher(a, m, registryConverters{registry: registry})
		},
	)
	p.SetStaticManifestsDir(cfg.StaticManifestsDir)
	return p, nil
}

// registryConverters gives the MutatingAdmissionPolicy dispatcher the
// chain registry's type converters. Upstream's manager builds its own
// from the document the registry serves it (patch.typeConverterManager:
// the same managedfields.NewTypeConverter of the same bytes), but only
// for the group-versions its background poll of the document list has
// seen, every 5 s: until the first poll it knows none, and the dispatcher
// refuses the write. The registry's converters are there when the chain
// is, follow its CRDs at once, and are shared by every chain of a Cache,
// by the document's digest.
type registryConverters struct{ registry *schema.Registry }

func (r registryConverters) GetTypeConverter(gvk k8sschema.GroupVersionKind) managedfields.TypeConverter {
	tc, err := r.registry.TypeConverter(gvk.GroupVersion())
	if err != nil {
		// Upstream's answer for a group-version without a document:
		// the dispatcher says the kind is not found.
		return nil
	}
	return tc
}

// Run has nothing to refresh: the registry invalidates its converters
// when its CRDs change.
func (registryConverters) Run(context.Context) {}

// validatingPolicy is upstream's validating.compilePolicy.
func validatingPolicy(policy *validating.Policy) validating.Validator {
	hasParam := policy.Spec.ParamKind != nil
	optionalVars := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: true}
	expressionOptionalVars := plugincel.OptionalVariableDeclarations{HasParams: hasParam, HasAuthorizer: false}
	failurePolicy := policy.Spec.FailurePolicy
	var matcher matchconditions.Matcher
	matchConditions := policy.Spec.MatchConditions
	filterCompiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return validating.NewValidator(nil, nil, nil, nil, failurePolicy, err)
	}
	filterCompiler.CompileAndStoreVariables(variables(policy.Spec.Variables), optionalVars, environment.StoredExpressions)
	if len(matchConditions) > 0 {
		matchExpressionAccessors := make([]plugincel.ExpressionAccessor, len(matchConditions))
		for i := range matchConditions {
			matchExpressionAccessors[i] = (*matchconditions.MatchCondition)(&matchConditions[i])
		}
		matcher = matchconditions.NewMatcher(filterCompiler.CompileCondition(matchExpressionAccessors, optionalVars, environment.StoredExpressions), failurePolicy, "policy", "validate", policy.Name)
	}
	validations := make([]plugincel.ExpressionAccessor, len(policy.Spec.Validations))
	messages := make([]plugincel.ExpressionAccessor, len(policy.Spec.Validations))
	for i, v := range policy.Spec.Validations {
		validations[i] = &validating.ValidationCondition{Expression: v.Expression, Message: v.Message, Reason: v.Reason}
		if v.MessageExpression != "" {
			messages[i] = &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression}
		}
	}
	annotations := make([]plugincel.ExpressionAccessor, len(policy.Spec.AuditAnnotations))
	for i, a := range policy.Spec.AuditAnnotations {
		annotations[i] = &validating.AuditAnnotationCondition{Key: a.Key, ValueExpression: a.ValueExpression}
	}
	return validating.NewValidator(
		filterCompiler.CompileCondition(validations, optionalVars, environment.StoredExpressions),
		matcher,
		filterCompiler.CompileCondition(annotations, optionalVars, environment.StoredExpressions),
		filterCompiler.CompileCondition(messages, expressionOptionalVars, environment.StoredExpressions),
		failurePolicy,
		nil,
	)
}

// mutatingPolicy is upstream's mutating.compilePolicy.
func mutatingPolicy(policy *mutating.Policy) mutating.PolicyEvaluator {
	opts := plugincel.OptionalVariableDeclarations{HasParams: policy.Spec.ParamKind != nil, HasAuthorizer: true}
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(environment.DefaultCompatibilityVersion()))
	if err != nil {
		return mutating.PolicyEvaluator{Error: &apiservercel.Error{
			Type:   apiservercel.ErrorTypeInternal,
			Detail: fmt.Sprintf("failed to initialize CEL compiler: %v", err),
		}}
	}
	var vars []plugincel.NamedExpressionAccessor
	if policy.Spec.Variables != nil {
		vars = variables(policy.Spec.Variables)
	}
	compiler.CompileAndStoreVariables(vars, opts, environment.StoredExpressions)
	var matcher matchconditions.Matcher
	matchConditions := policy.Spec.MatchConditions
	if len(matchConditions) > 0 {
		matchExpressionAccessors := make([]plugincel.ExpressionAccessor, len(matchConditions))
		for i := range matchConditions {
			matchExpressionAccessors[i] = (*matchconditions.MatchCondition)(&matchConditions[i])
		}
		matcher = matchconditions.NewMatcher(compiler.CompileCondition(matchExpressionAccessors, opts, environment.StoredExpressions), policy.Spec.FailurePolicy, "policy", "validate", policy.Name)
	}
	var patchers []patch.Patcher
	patchOptions := opts
	patchOptions.HasPatchTypes = true
	for _, m := range policy.Spec.Mutations {
		switch m.PatchType {
		case admissionregistrationv1.PatchTypeJSONPatch:
			if m.JSONPatch != nil {
				accessor := &patch.JSONPatchCondition{Expression: m.JSONPatch.Expression}
				patchers = append(patchers, patch.NewJSONPatcher(compiler.CompileMutatingEvaluator(accessor, patchOptions, environment.StoredExpressions)))
			}
		case admissionregistrationv1.PatchTypeApplyConfiguration:
			if m.ApplyConfiguration != nil {
				accessor := &patch.ApplyConfigurationCondition{Expression: m.ApplyConfiguration.Expression}
				patchers = append(patchers, patch.NewApplyConfigurationPatcher(compiler.CompileMutatingEvaluator(accessor, patchOptions, environment.StoredExpressions)))
			}
		}
	}
	return mutating.PolicyEvaluator{Matcher: matcher, Mutators: patchers, CompositedCompiler: compiler}
}

func variables(vs []admissionregistrationv1.Variable) []plugincel.NamedExpressionAccessor {
	out := make([]plugincel.NamedExpressionAccessor, len(vs))
	for i, v := range vs {
		out[i] = &validating.Variable{Name: v.Name, Expression: v.Expression}
	}
	return out
}
