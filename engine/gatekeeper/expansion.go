package gatekeeper

import (
	"context"
	"fmt"
	"sort"

	rtypes "github.com/open-policy-agent/frameworks/constraint/pkg/types"
	expansionunversioned "github.com/open-policy-agent/gatekeeper/v3/apis/expansion/unversioned"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/expansion"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	mutationtypes "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// expansionGroup is the group of Gatekeeper's ExpansionTemplates.
const expansionGroup = "expansion.gatekeeper.sh"

// ExpansionTemplateError is an ExpansionTemplate Gatekeeper would not
// ingest (its validating webhook refuses it; its controller reports the
// error in the template's status).
type ExpansionTemplateError struct {
	Name string
	Err  error
}

func (e *ExpansionTemplateError) Error() string {
	return fmt.Sprintf("Gatekeeper ExpansionTemplate %s: %v", e.Name, e.Err)
}

func (e *ExpansionTemplateError) Unwrap() error { return e.Err }

// expansionSystem returns Gatekeeper's expansion system over the mutation
// system, holding the ExpansionTemplates among objs, as main.go wires it
// (expansion.NewSystem(mutationSystem)) and its ExpansionTemplate
// controller fills it: each template read at its served version and
// converted to the unversioned type. A template that forms an expansion
// cycle is kept and, as in Gatekeeper, neither it nor the others of the
// cycle expand anything.
func expansionSystem(objs []*unstructured.Unstructured, mutations *mutation.System) (*expansion.System, []error) {
	sys := expansion.NewSystem(mutations)
	var errs []error
	for _, o := range objs {
		if !isExpansionTemplate(o) || !o.GetDeletionTimestamp().IsZero() {
			continue
		}
		et, err := unversionedExpansionTemplate(o)
		if err != nil {
			errs = append(errs, &ExpansionTemplateError{Name: o.GetName(), Err: err})
			continue
		}
		if err := expansion.ValidateTemplate(et); err != nil {
			errs = append(errs, &ExpansionTemplateError{Name: o.GetName(), Err: err})
			continue
		}
		// A valid template is only refused by a cycle, and stays in
		// the system marked conflicting.
		_ = sys.UpsertTemplate(et)
	}
	return sys, errs
}

func isExpansionTemplate(o *unstructured.Unstructured) bool {
	return o.GroupVersionKind().Group == expansionGroup && o.GetKind() == "ExpansionTemplate"
}

// unversionedExpansionTemplate converts a stored ExpansionTemplate with
// Gatekeeper's generated conversions.
func unversionedExpansionTemplate(o *unstructured.Unstructured) (*expansionunversioned.ExpansionTemplate, error) {
	versioned, err := scheme.New(o.GroupVersionKind())
	if err != nil {
		return nil, err
	}
	et := &expansionunversioned.ExpansionTemplate{}
	if err := convert(o, versioned, et); err != nil {
		return nil, err
	}
	return et, nil
}

// reviewResultants is the expansion part of Gatekeeper's
// validationHandler.reviewRequest (pkg/webhook/policy.go): the request's
// object (the old one for a DELETE) is the generator, in the request's
// namespace and of the request's kind; Gatekeeper's expansion system
// expands it into resultants and mutates them with the mutators whose
// source admits Generated objects; each resultant is reviewed as a
// Generated object in the request's namespace with the request's
// operation, its results take the template's enforcementAction when it
// names one, and are added to resp prefixed "[Implied by TEMPLATE]". It
// returns the matching constraints that could not be evaluated.
//
// Gatekeeper reviews the resultants in the order its expansion system
// returns them, which follows Go's map iteration when several templates
// expand one kind; truce reviews them by template name so that answers
// are the same from one run to the next.
func (h *validationHandler) reviewResultants(ctx context.Context, req *admission.Request, review *target.AugmentedReview, resp *rtypes.Responses) ([]string, error) {
	if h.expansion == nil {
		return nil, nil
	}
	raw := req.Object.Raw
	if req.Operation == admissionv1.Delete {
		raw = req.OldObject.Raw
	}
	if raw == nil {
		return nil, nil
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return nil, fmt.Errorf("error decoding generator resource %s: %w", req.Name, err)
	}
	obj.SetNamespace(req.Namespace)
	obj.SetGroupVersionKind(k8sschema.GroupVersionKind{Group: req.Kind.Group, Version: req.Kind.Version, Kind: req.Kind.Kind})
	// The generator itself is not mutated, so it has no source.
	base := &mutationtypes.Mutable{Object: obj, Namespace: review.Namespace, Username: req.UserInfo.Username}
	resultants, err := h.expansion.Expand(base)
	if err != nil {
		return nil, fmt.Errorf("unable to expand object: %w", err)
	}
	sort.SliceStable(resultants, func(i, j int) bool { return resultants[i].TemplateName < resultants[j].TemplateName })
	var unpredictable []string
	for _, res := range resultants {
		resultant := &target.AugmentedUnstructured{
			Object:    *res.Obj,
			Namespace: review.Namespace,
			Operation: req.Operation,
			Source:    mutationtypes.SourceTypeGenerated,
		}
		resultantResp, err := h.policies.client.Review(ctx, resultant, h.reviewOpts(review.Namespace)...)
		if err != nil {
			return nil, fmt.Errorf("error reviewing resultant resource: %w", err)
		}
		expansion.OverrideEnforcementAction(res.EnforcementAction, resultantResp)
		expansion.AggregateResponses(res.TemplateName, resp, resultantResp)
		for _, u := range h.policies.unpredictable(resultant) {
			unpredictable = append(unpredictable, fmt.Sprintf("[Implied by %s] %s", res.TemplateName, u))
		}
	}
	return unpredictable, nil
}
