package gatekeeper

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-logr/logr"
	edunversioned "github.com/open-policy-agent/frameworks/constraint/pkg/apis/externaldata/unversioned"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/reviews"
	"github.com/open-policy-agent/frameworks/constraint/pkg/externaldata"
	rtypes "github.com/open-policy-agent/frameworks/constraint/pkg/types"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller/config/process"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/expansion"
	mutationtypes "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	truceadmission "github.com/truce-dev/truce/admission"
)

// Paths of Gatekeeper's validating webhooks.
const (
	admitPath      = "/v1/admit"
	admitLabelPath = "/v1/admitlabel"
)

// httpStatusWarning is the code Gatekeeper answers an allowed request with
// when constraints warned (pkg/webhook/policy.go).
const httpStatusWarning = 299

// ignoreLabel excludes a namespace from Gatekeeper's webhooks; only exempt
// namespaces may carry it.
const ignoreLabel = "admission.gatekeeper.sh/ignore"

// validationHandler answers as Gatekeeper's validating webhook
// (pkg/webhook/policy.go validationHandler.Handle, reviewRequest and
// getValidationMessages, in the same order), around the constraint
// framework's client Gatekeeper uses.
type validationHandler struct {
	policies   *policies
	excluder   *process.Excluder
	namespaces map[string]*corev1.Namespace
	// expansion expands generators into resultants (nil with
	// --enable-generator-resource-expansion=false).
	expansion *expansion.System
	flags     Flags
}

func newValidationWebhook(p *policies, excluder *process.Excluder, namespaces map[string]*corev1.Namespace, exp *expansion.System, flags Flags) http.Handler {
	return &admission.Webhook{Handler: &validationHandler{policies: p, excluder: excluder, namespaces: namespaces, expansion: exp, flags: flags}}
}

func (h *validationHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.UserInfo.Username == serviceAccount {
		return admission.Allowed("Gatekeeper does not self-manage")
	}
	if userErr, err := h.validateGatekeeperResource(ctx, &req); err != nil {
		code := int32(http.StatusInternalServerError)
		if userErr {
			code = http.StatusUnprocessableEntity
		}
		return admission.Errored(code, err)
	}
	if excluded, err := isExcludedNamespace(h.excluder, &req.AdmissionRequest, process.Webhook); err == nil && excluded {
		return admission.Allowed("Namespace is set to be ignored by Gatekeeper config")
	}
	resp, unpredictable, err := h.review(ctx, &req)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	// Not Gatekeeper's: what truce could not evaluate, for the result's
	// Unpredictable list.
	var audit map[string]string
	if len(unpredictable) > 0 {
		audit = map[string]string{truceadmission.UnpredictableAnnotation: strings.Join(unpredictable, "; ")}
	}
	denyMsgs, warnMsgs := validationMessages(resp.Results())
	if len(denyMsgs) > 0 {
		return admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
			Allowed: false,
			Result: &metav1.Status{
				Reason:  metav1.StatusReasonForbidden,
				Code:    http.StatusForbidden,
				Message: strings.Join(denyMsgs, "\n"),
			},
			Warnings:         warnMsgs,
			AuditAnnotations: audit,
		}}
	}
	out := admission.Response{AdmissionResponse: admissionv1.AdmissionResponse{
		Allowed:          true,
		Result:           &metav1.Status{Code: http.StatusOK},
		Warnings:         warnMsgs,
		AuditAnnotations: audit,
	}}
	if len(warnMsgs) > 0 {
		out.Result.Code = httpStatusWarning
	}
	return out
}

// review is Gatekeeper's reviewRequest: the request reviewed, then the
// resultants its ExpansionTemplates expand it into; it also names the
// matching constraints it could not evaluate.
func (h *validationHandler) review(ctx context.Context, req *admission.Request) (*rtypes.Responses, []string, error) {
	// Server-side apply of a namespace is reviewed as cluster-scoped
	// (open-policy-agent/gatekeeper#792).
	if req.Kind.Kind == "Namespace" && req.Kind.Group == "" {
		req.Namespace = ""
	}
	review := &target.AugmentedReview{
		AdmissionRequest: &req.AdmissionRequest,
		Source:           mutationtypes.SourceTypeOriginal,
		IsAdmission:      true,
	}
	if req.Namespace != "" {
		ns, ok := h.namespaces[req.Namespace]
		if !ok {
			return nil, nil, fmt.Errorf("failed to create augmentedReview: namespaces %q not found", req.Namespace)
		}
		review.Namespace = ns
	}
	resp, err := h.policies.client.Review(ctx, review, h.reviewOpts(review.Namespace)...)
	if err != nil {
		return nil, nil, fmt.Errorf("error reviewing resource %s: %w", req.Name, err)
	}
	unpredictable := h.policies.unpredictable(review)
	implied, err := h.reviewResultants(ctx, req, review, resp)
	if err != nil {
		return nil, nil, err
	}
	return resp, append(unpredictable, implied...), nil
}

// reviewOpts are the options of Gatekeeper's validationHandler.review.
func (h *validationHandler) reviewOpts(ns *corev1.Namespace) []reviews.ReviewOpt {
	opts := []reviews.ReviewOpt{reviews.EnforcementPoint(util.WebhookEnforcementPoint)}
	if opt := util.NamespaceReviewOpt(ns, logr.Discard()); opt != nil {
		opts = append(opts, opt)
	}
	return opts
}

// validationMessages is Gatekeeper's getValidationMessages: each result's
// enforcement actions (a scoped constraint's for the webhook), "[name] msg"
// for deny and warn; dryrun only reports in audit.
func validationMessages(res []*rtypes.Result) (deny, warn []string) {
	for _, r := range res {
		var actions []string
		if r.EnforcementAction == string(util.Scoped) {
			for _, action := range r.ScopedEnforcementActions {
				if util.ValidateEnforcementAction(util.EnforcementAction(action), r.Constraint.Object) == nil {
					actions = append(actions, action)
				}
			}
			if len(actions) == 0 {
				continue
			}
		} else if util.ValidateEnforcementAction(util.EnforcementAction(r.EnforcementAction), r.Constraint.Object) != nil {
			continue
		}
		if len(actions) == 0 {
			actions = append(actions, r.EnforcementAction)
		}
		for _, action := range actions {
			switch action {
			case string(util.Deny):
				deny = append(deny, fmt.Sprintf("[%s] %s", r.Constraint.GetName(), r.Msg))
			case string(util.Warn):
				warn = append(warn, fmt.Sprintf("[%s] %s", r.Constraint.GetName(), r.Msg))
			}
		}
	}
	return deny, warn
}

// validateGatekeeperResource is Gatekeeper's validateGatekeeperResources:
// its own objects are checked with the code that ingests them; the bool
// says the error is the user's (422) rather than internal (500).
func (h *validationHandler) validateGatekeeperResource(ctx context.Context, req *admission.Request) (bool, error) {
	if !gatekeeperGroups[req.Kind.Group] {
		return false, nil
	}
	if req.Operation == admissionv1.Delete && req.Name == "" {
		return true, nil
	}
	if req.Kind.Group != "status.gatekeeper.sh" && len(req.Name) > 63 {
		return false, fmt.Errorf("resource cannot have metadata.name larger than 63 char; length: %d", len(req.Name))
	}
	raw := req.Object.Raw
	if req.Operation == admissionv1.Delete {
		raw = req.OldObject.Raw
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(raw); err != nil {
		return false, err
	}
	switch {
	case req.Kind.Group == templatesGroup && req.Kind.Kind == "ConstraintTemplate":
		ct, err := unversionedTemplate(obj)
		if err != nil {
			return false, err
		}
		for _, t := range ct.Spec.Targets {
			for _, op := range t.Operations {
				if string(op) == "*" && len(t.Operations) > 1 {
					return false, fmt.Errorf("if '*' is present, must not specify other operations")
				}
			}
		}
		if _, err := h.policies.client.CreateCRD(ctx, ct); err != nil {
			return true, err
		}
	case req.Kind.Group == constraintsGroup:
		if err := h.policies.validateConstraint(obj); err != nil {
			return true, err
		}
		action, found, err := unstructured.NestedString(obj.Object, "spec", "enforcementAction")
		if err != nil {
			return false, err
		}
		if found && action != "" && !h.flags.DisableEnforcementActionValidation {
			if err := util.ValidateEnforcementAction(util.EnforcementAction(action), obj.Object); err != nil {
				return false, err
			}
		}
	case req.Kind.Group == expansionGroup && req.Kind.Kind == "ExpansionTemplate":
		et, err := unversionedExpansionTemplate(obj)
		if err != nil {
			return false, err
		}
		if err := expansion.ValidateTemplate(et); err != nil {
			return true, err
		}
	case req.Kind.Group == configGroup && req.Kind.Kind == "Config":
		if req.Name != configName {
			return true, fmt.Errorf("config resource must have name 'config'")
		}
	case req.Kind.Group == mutationsGroup && mutatorKinds[req.Kind.Kind] != nil:
		if _, err := buildMutator(obj, h.flags); err != nil {
			return true, err
		}
	case req.Kind.Group == externalDataGroup && req.Kind.Kind == "Provider":
		provider, err := unversionedProvider(obj)
		if err != nil {
			return false, err
		}
		// Gatekeeper asks whether its provider cache takes it.
		if err := externaldata.NewCache().Upsert(provider); err != nil {
			return true, err
		}
	}
	return false, nil
}

// externalDataGroup is the API group of Gatekeeper's external data
// Providers.
const externalDataGroup = "externaldata.gatekeeper.sh"

// unversionedProvider converts a stored Provider to the type Gatekeeper's
// provider cache takes.
func unversionedProvider(o *unstructured.Unstructured) (*edunversioned.Provider, error) {
	p := &edunversioned.Provider{}
	return p, toUnversioned(o, p)
}

// namespaceLabelHandler is Gatekeeper's check-ignore-label webhook
// (pkg/webhook/namespacelabel.go): only exempt namespaces
// (--exempt-namespace, -prefix, -suffix) may carry the ignore label.
type namespaceLabelHandler struct{ flags Flags }

func newNamespaceLabelWebhook(flags Flags) http.Handler {
	return &admission.Webhook{Handler: namespaceLabelHandler{flags: flags}}
}

func (h namespaceLabelHandler) Handle(_ context.Context, req admission.Request) admission.Response {
	if req.Operation == admissionv1.Delete {
		return admission.Allowed("Delete is always allowed")
	}
	if req.Kind.Group != "" || req.Kind.Kind != "Namespace" {
		return admission.Allowed("Not a namespace")
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		r := admission.Denied(fmt.Sprintf("while deserializing resource: %v", err))
		r.Result.Code = http.StatusInternalServerError
		return r
	}
	if h.flags.exempt(obj.GetName()) {
		return admission.Allowed(fmt.Sprintf("Namespace %s is allowed to set %s", obj.GetName(), ignoreLabel))
	}
	if _, ok := obj.GetLabels()[ignoreLabel]; ok {
		return admission.Denied(fmt.Sprintf("Only exempt namespace can have the %s label", ignoreLabel))
	}
	return admission.Allowed(fmt.Sprintf("Namespace is not setting the %s label", ignoreLabel))
}
