package kyverno

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
)

// Kyverno's controller flags for turning policies into the API server's
// own admission policies, with the values its Helm chart (v1.19.1,
// features.generateValidatingAdmissionPolicy / …MutatingAdmissionPolicy)
// passes by default.
const (
	FlagGenerateValidatingAdmissionPolicy = "generateValidatingAdmissionPolicy"
	FlagGenerateMutatingAdmissionPolicy   = "generateMutatingAdmissionPolicy"

	DefaultGenerateValidatingAdmissionPolicy = true
	DefaultGenerateMutatingAdmissionPolicy   = false
)

// AdmissionPolicyFlags are Kyverno's --generateValidatingAdmissionPolicy and
// --generateMutatingAdmissionPolicy.
type AdmissionPolicyFlags struct {
	GenerateValidatingAdmissionPolicy bool
	GenerateMutatingAdmissionPolicy   bool
}

// installFlags are the flags of the Kyverno installation among objs: the
// container arguments of a Deployment that passes them (Kyverno's
// admission controller, kyverno-admission-controller in a Helm install),
// else the Helm chart's defaults. explicit (Options) wins over both.
func installFlags(objs []*unstructured.Unstructured, explicit *AdmissionPolicyFlags) (AdmissionPolicyFlags, error) {
	if explicit != nil {
		return *explicit, nil
	}
	flags := AdmissionPolicyFlags{
		GenerateValidatingAdmissionPolicy: DefaultGenerateValidatingAdmissionPolicy,
		GenerateMutatingAdmissionPolicy:   DefaultGenerateMutatingAdmissionPolicy,
	}
	for _, o := range objs {
		if o.GetKind() != "Deployment" || o.GroupVersionKind().Group != "apps" {
			continue
		}
		containers, _, _ := unstructured.NestedSlice(o.Object, "spec", "template", "spec", "containers")
		for _, c := range containers {
			m, _ := c.(map[string]any)
			args, _, _ := unstructured.NestedStringSlice(m, "args")
			for name, into := range map[string]*bool{
				FlagGenerateValidatingAdmissionPolicy: &flags.GenerateValidatingAdmissionPolicy,
				FlagGenerateMutatingAdmissionPolicy:   &flags.GenerateMutatingAdmissionPolicy,
			} {
				v, ok, err := flagValue(args, name)
				if err != nil {
					return flags, fmt.Errorf("the Kyverno installation (Deployment %s/%s): %w", o.GetNamespace(), o.GetName(), err)
				}
				if ok {
					*into = v
				}
			}
		}
	}
	return flags, nil
}

// flagValue finds --name=value, -name=value or --name value in args, as
// Go's flag package (which Kyverno's flags use) reads them.
func flagValue(args []string, name string) (bool, bool, error) {
	for i, a := range args {
		trimmed := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if trimmed == a {
			continue
		}
		key, value, hasValue := strings.Cut(trimmed, "=")
		if key != name {
			continue
		}
		if !hasValue {
			if i+1 >= len(args) {
				return false, false, fmt.Errorf("flag --%s without a value", name)
			}
			value = args[i+1]
		}
		b, err := strconv.ParseBool(value)
		if err != nil {
			return false, false, fmt.Errorf("flag --%s=%s: %w", name, value, err)
		}
		return b, true, nil
	}
	return false, false, nil
}

// AdmissionPolicyStatus is what Kyverno's generator wrote on a policy.
type AdmissionPolicyStatus = protocol.AdmissionPolicyStatus

// generatedPolicies is what Kyverno's admission policy generator did for a
// cluster: the objects it created and the policies it turned into them.
type generatedPolicies struct {
	objects   []*unstructured.Unstructured
	statuses  []AdmissionPolicyStatus
	generated map[string]bool // "Kind/name"
	warnings  []string
}

// generatorInput reports whether the generator reads o: the cluster-wide
// policies it may turn into admission policies, and the exceptions it
// folds into them (or that make it refuse).
func generatorInput(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	switch gvk.Group {
	case GroupLegacy:
		return gvk.Kind == "ClusterPolicy" || gvk.Kind == "PolicyException"
	case GroupCEL:
		return gvk.Kind == "ValidatingPolicy" || gvk.Kind == "MutatingPolicy" || gvk.Kind == "PolicyException"
	}
	return false
}

// admissionPolicies asks the helper what Kyverno's admission policy
// generator writes for objs.
func (e *Engine) admissionPolicies(ctx context.Context, objs []*unstructured.Unstructured, load *protocol.LoadRequest) (*generatedPolicies, error) {
	out := &generatedPolicies{generated: map[string]bool{}}
	flags, err := installFlags(objs, e.flags)
	if err != nil {
		return nil, err
	}
	req := &protocol.AdmissionPoliciesRequest{
		Resources:                         load.Resources,
		GenerateValidatingAdmissionPolicy: flags.GenerateValidatingAdmissionPolicy,
		GenerateMutatingAdmissionPolicy:   flags.GenerateMutatingAdmissionPolicy,
	}
	for _, o := range objs {
		if !generatorInput(o) {
			continue
		}
		o = withUID(o)
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		req.Objects = append(req.Objects, raw)
	}
	if len(req.Objects) == 0 {
		return out, nil
	}
	body, err := json.Marshal(req)
	if err != nil {
		return nil, err
	}
	ap, err := e.generated.get(body, func() (*protocol.AdmissionPoliciesResponse, error) {
		resp, err := e.h.call(ctx, &protocol.Request{Op: protocol.OpAdmissionPolicies, AdmissionPolicies: req})
		if err != nil {
			return nil, err
		}
		return resp.AdmissionPolicies, nil
	})
	if err != nil {
		return nil, err
	}
	for _, raw := range ap.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("decoding an admission policy Kyverno generated: %w", err)
		}
		out.objects = append(out.objects, u)
	}
	out.statuses, out.warnings = ap.Statuses, ap.Warnings
	for _, s := range ap.Statuses {
		if s.Generated {
			out.generated[s.Kind+"/"+s.Name] = true
		}
	}
	return out, nil
}

// withGeneratedStatus returns o as Kyverno's informers see it once its
// generator turned it into an admission policy: status.generated (status
// .validatingadmissionpolicy.generated for a ClusterPolicy) set, which
// makes Kyverno's webhook controller, engines and CEL validation leave it
// to the API server.
func (g *generatedPolicies) withGeneratedStatus(o *unstructured.Unstructured) *unstructured.Unstructured {
	if g == nil || o.GetNamespace() != "" || !g.generated[o.GetKind()+"/"+o.GetName()] {
		return o
	}
	gvk := o.GroupVersionKind()
	if gvk.Group != GroupLegacy && gvk.Group != GroupCEL {
		return o
	}
	c := o.DeepCopy()
	path := []string{"status", "generated"}
	if gvk.Group == GroupLegacy {
		path = []string{"status", "validatingadmissionpolicy", "generated"}
	}
	_ = unstructured.SetNestedField(c.Object, true, path...)
	return c
}

// generatorCache remembers the generator's answers by request: the chain is
// rebuilt for every change of the cluster's configuration (each round of
// `truce check`), mostly with the same policies, and the answer depends on
// the request alone.
type generatorCache struct {
	mu      sync.Mutex
	answers map[[sha256.Size]byte]*protocol.AdmissionPoliciesResponse
}

func (c *generatorCache) get(body []byte, call func() (*protocol.AdmissionPoliciesResponse, error)) (*protocol.AdmissionPoliciesResponse, error) {
	key := sha256.Sum256(body)
	c.mu.Lock()
	ap, ok := c.answers[key]
	c.mu.Unlock()
	if ok {
		return ap, nil
	}
	ap, err := call()
	if err != nil {
		return nil, err
	}
	if ap == nil {
		ap = &protocol.AdmissionPoliciesResponse{}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.answers == nil {
		c.answers = map[[sha256.Size]byte]*protocol.AdmissionPoliciesResponse{}
	}
	c.answers[key] = ap
	return ap, nil
}

// withUID returns o with a UID: Kyverno's generator makes the policy the
// owner of what it generates, and the API server refuses an owner
// reference without one. A policy truce reads from a repository or a
// manifest has none (the API server gives it one when it stores it), so it
// gets a stand-in derived from its kind, namespace and name: stable
// across runs, unlike the real one, which only the cluster knows.
func withUID(o *unstructured.Unstructured) *unstructured.Unstructured {
	if o.GetUID() != "" {
		return o
	}
	sum := sha256.Sum256([]byte(o.GroupVersionKind().GroupKind().String() + "/" + o.GetNamespace() + "/" + o.GetName()))
	h := hex.EncodeToString(sum[:16])
	c := o.DeepCopy()
	c.SetUID(types.UID(h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:32]))
	return c
}
