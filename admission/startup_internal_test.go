package admission

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/pkg/apis/admissionregistration"

	"github.com/truce-dev/truce/admission/builtin"
)

// TestPolicySourcesSignal: the wrapped binding informer reports the policy
// source's AddEventHandler, which upstream's source makes right after
// storing its first compilation; until then wait blocks.
func TestPolicySourcesSignal(t *testing.T) {
	factory := informers.NewSharedInformerFactory(fake.NewSimpleClientset(), 0)
	s := &policySources{}
	inf := s.informer(factory.Admissionregistration().V1().ValidatingAdmissionPolicyBindings().Informer())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("wait before the source added its handlers = %v, want the context's deadline", err)
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{}); err != nil {
		t.Fatal(err)
	}
	if err := s.wait(context.Background()); err != nil {
		t.Fatalf("wait after the source added its handlers: %v", err)
	}
	if got := (*policySources)(nil).informer(inf); got != inf {
		t.Errorf("a chain without a Cache got a wrapped informer")
	}
}

// TestValidatedPoliciesStillFail: a policy the server refuses is refused by
// every chain sharing a cache, not only the first (failed validations are
// not remembered).
func TestValidatedPoliciesStillFail(t *testing.T) {
	bad := mustObject(t, `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: bad}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: ["v1"], operations: ["CREATE"], resources: ["configmaps"]}
  validations:
  - expression: "object.nosuchfunction("
`)
	c := NewCache(0)
	for i := range 2 {
		state, err := NewState(bad.DeepCopy())
		if err != nil {
			t.Fatal(err)
		}
		var invalid *InvalidObjectError
		if _, err := NewChain(context.Background(), state, Options{Cache: c}); !errors.As(err, &invalid) {
			t.Fatalf("chain %d: err = %v, want the policy refused", i, err)
		}
	}
}

// countingStrategy counts validations and fails those of policies named
// "bad".
type countingStrategy struct {
	builtin.Strategy
	calls int
}

func (s *countingStrategy) Validate(ctx context.Context, obj runtime.Object) field.ErrorList {
	s.calls++
	if obj.(*admissionregistration.ValidatingAdmissionPolicy).Name == "bad" {
		return field.ErrorList{field.Invalid(field.NewPath("spec"), nil, "bad")}
	}
	return nil
}

// TestValidatedPolicies: while the state is stored, a policy that passed
// is not validated again by a chain sharing the cache; one that failed, one
// with a paramKind, and any write once the chain has its authorizer are.
func TestValidatedPolicies(t *testing.T) {
	policy := func(name string, param bool) *admissionregistration.ValidatingAdmissionPolicy {
		p := &admissionregistration.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name + "-uid")}}
		if param {
			p.Spec.ParamKind = &admissionregistration.ParamKind{APIVersion: "v1", Kind: "ConfigMap"}
		}
		return p
	}
	for _, tc := range []struct {
		name       string
		policy     *admissionregistration.ValidatingAdmissionPolicy
		authorizer bool
		want       int
	}{
		{"valid", policy("good", false), false, 1},
		{"invalid", policy("bad", false), false, 3},
		{"paramKind", policy("good", true), false, 3},
		{"written", policy("good", false), true, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inner := &countingStrategy{}
			cache := NewCache(0)
			for i := range 3 {
				chain := &Chain{opts: Options{Cache: cache}}
				if tc.authorizer {
					chain.authz = stateAuthorizer
				}
				p := tc.policy.DeepCopy()
				p.UID = types.UID(fmt.Sprint(i)) // each create makes a new one
				errs := validatedPolicies(inner, "ValidatingAdmissionPolicy", chain).Validate(context.Background(), p)
				if (len(errs) > 0) != (tc.policy.Name == "bad") {
					t.Fatalf("errors %v", errs)
				}
			}
			if inner.calls != tc.want {
				t.Errorf("validated %d times in 3 chains, want %d", inner.calls, tc.want)
			}
		})
	}
}
