package admission

import (
	"context"
	"crypto/sha256"
	"encoding/json"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/apiserver/pkg/registry/rest"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"

	"github.com/truce-dev/truce/admission/builtin"
)

// Every chain stores its state again (storeState), validating each policy
// with its registry strategy, which compiles the policy's CEL expressions
// to check them: as costly as compiling the policy. While the state is
// stored the writer is system:masters, so a policy's verdict depends on its
// content alone (and, through its paramKind, on the chain's kinds: such
// policies are always validated). validatedPolicies remembers, in the
// chain's Cache, the policies that passed, so that the other chains of a
// command skip validating them again; a policy that fails is validated
// every time and reported as before.

// validatedPolicies wraps a policy strategy with that memory.
func validatedPolicies(s builtin.Strategy, kind string, c *Chain) builtin.Strategy {
	v := &validatedPolicy{Strategy: s, kind: kind, chain: c}
	if rs, ok := s.(rest.ResetFieldsStrategy); ok {
		return &validatedPolicyResetFields{validatedPolicy: v, reset: rs}
	}
	return v
}

type validatedPolicy struct {
	builtin.Strategy
	kind  string
	chain *Chain
}

// errorList carries a failed validation out of Cache.get, which keeps no
// failures.
type errorList struct{ errs field.ErrorList }

func (e *errorList) Error() string { return e.errs.ToAggregate().Error() }

func (v *validatedPolicy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	cache := v.chain.opts.Cache
	if cache == nil || v.chain.authz != nil {
		// Not storing the state: the writer's authorization counts.
		return v.Strategy.Validate(ctx, obj)
	}
	key, ok := validationKey(v.kind, obj, v.chain.celEnv)
	if !ok {
		return v.Strategy.Validate(ctx, obj)
	}
	_, err := cache.get(key, func() (any, error) {
		if errs := v.Strategy.Validate(ctx, obj); len(errs) > 0 {
			return nil, &errorList{errs}
		}
		return true, nil
	})
	if e, ok := err.(*errorList); ok {
		return e.errs
	}
	return nil
}

type validatedPolicyResetFields struct {
	*validatedPolicy
	reset rest.ResetFieldsStrategy
}

func (v *validatedPolicyResetFields) GetResetFields() map[fieldpath.APIVersion]*fieldpath.Set {
	return v.reset.GetResetFields()
}

// validationKey digests what a policy's validation reads: the whole object
// but the uid and creation time the create just made up. Policies with a
// paramKind have no key. env is celEnvironment().
func validationKey(kind string, obj runtime.Object, env string) (cacheKey, bool) {
	obj = obj.DeepCopyObject()
	acc, err := meta.Accessor(obj)
	if err != nil {
		return cacheKey{}, false
	}
	acc.SetUID("")
	acc.SetCreationTimestamp(metav1.Time{})
	b, err := json.Marshal(obj)
	if err != nil {
		return cacheKey{}, false
	}
	var spec struct {
		Spec struct {
			ParamKind any `json:"paramKind"`
		} `json:"spec"`
	}
	if json.Unmarshal(b, &spec) != nil || spec.Spec.ParamKind != nil {
		return cacheKey{}, false
	}
	return cacheKey{kind: "Validated" + kind, digest: sha256.Sum256(append(b, env...))}, true
}
