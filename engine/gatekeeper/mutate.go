package gatekeeper

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strings"

	"github.com/open-policy-agent/gatekeeper/v3/apis/mutations/unversioned"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/controller/config/process"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/match"
	mutationtypes "github.com/open-policy-agent/gatekeeper/v3/pkg/mutation/types"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	truceadmission "github.com/truce-dev/truce/admission"
)

// mutatePath is where Gatekeeper's mutating webhook configuration calls it.
const mutatePath = "/v1/mutate"

// serviceAccount is Gatekeeper's own: it does not mutate its own writes.
const serviceAccount = "system:serviceaccount:" + Namespace + ":gatekeeper-admin"

// gatekeeperGroups are the API groups of Gatekeeper's own resources, which
// its webhooks let through unmutated (pkg/webhook/common.go
// isGatekeeperResource).
var gatekeeperGroups = map[string]bool{
	"templates.gatekeeper.sh":   true,
	"constraints.gatekeeper.sh": true,
	mutationsGroup:              true,
	configGroup:                 true,
	externalDataGroup:           true,
	"expansion.gatekeeper.sh":   true,
	"status.gatekeeper.sh":      true,
}

// mutationHandler answers as Gatekeeper's mutation webhook
// (pkg/webhook/mutation.go, mutationHandler.Handle and mutateRequest, in
// the same order of checks); Gatekeeper's type is unexported and wired to a
// controller manager, so the steps are repeated here around Gatekeeper's
// own mutation system, excluder and patch builder.
type mutationHandler struct {
	system     *mutation.System
	excluder   *process.Excluder
	namespaces map[string]*corev1.Namespace
}

// newMutationWebhook serves the handler as Gatekeeper does: a
// controller-runtime admission webhook.
func newMutationWebhook(system *mutation.System, excluder *process.Excluder, namespaces map[string]*corev1.Namespace) http.Handler {
	return &admission.Webhook{Handler: &mutationHandler{system: system, excluder: excluder, namespaces: namespaces}}
}

func (h *mutationHandler) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.UserInfo.Username == serviceAccount {
		return admission.Allowed("Gatekeeper does not self-manage")
	}
	if !match.IsSupportedMutationOperation(req.Operation) {
		return admission.Allowed("Mutating only on create or update")
	}
	if gatekeeperGroups[req.Kind.Group] {
		return admission.Allowed("Not mutating gatekeeper resources")
	}
	// Gatekeeper logs an error of the exclusion check and goes on.
	if excluded, err := isExcludedNamespace(h.excluder, &req.AdmissionRequest, process.Mutation); err == nil && excluded {
		return admission.Allowed("Namespace is set to be ignored by Gatekeeper config")
	}
	return h.mutateRequest(ctx, &req)
}

func (h *mutationHandler) mutateRequest(ctx context.Context, req *admission.Request) admission.Response {
	var ns *corev1.Namespace
	switch {
	case req.Kind.Kind == "Namespace" && req.Kind.Group == "":
		// The namespace being written is its own namespace.
		req.Namespace = ""
		ns = &corev1.Namespace{}
		if err := decodeInto(req.Object.Raw, ns); err != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
	case req.Namespace != "":
		var ok bool
		if ns, ok = h.namespaces[req.Namespace]; !ok {
			return admission.Errored(http.StatusInternalServerError, fmt.Errorf("namespaces %q not found", req.Namespace))
		}
	}
	obj := unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(req.Object.Raw); err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	// The request's namespace is the object's while mutating; the
	// original is restored so no namespace patch is sent.
	oldNS := obj.GetNamespace()
	obj.SetNamespace(req.Namespace)
	mutable := &mutationtypes.Mutable{
		Object:    &obj,
		Namespace: ns,
		Username:  req.UserInfo.Username,
		Source:    mutationtypes.SourceTypeOriginal,
		Operation: req.Operation,
	}
	mutated, err := h.system.Mutate(ctx, mutable)
	var audit map[string]string
	switch {
	case externalDataUnresolved(err):
		// Gatekeeper resolves external data last, once its mutators
		// settle; truce calls no provider, so that step fails with the
		// placeholders still in the object. The value a provider would
		// give is unknown: the write is unpredictable, the rest of the
		// mutation stands.
		original := map[string]any{}
		if jerr := json.Unmarshal(req.Object.Raw, &original); jerr != nil {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		providers := unresolved(mutable.Object.Object, original)
		if len(providers) == 0 {
			return admission.Errored(http.StatusInternalServerError, err)
		}
		audit = map[string]string{truceadmission.UnpredictableAnnotation: fmt.Sprintf(
			"Gatekeeper mutators take a value from external data (Provider %s), which truce does not call offline",
			strings.Join(providers, ", "))}
	case err != nil:
		return admission.Errored(http.StatusInternalServerError, err)
	case !mutated:
		return admission.Allowed("Resource was not mutated")
	}
	mutable.Object.SetNamespace(oldNS)
	newJSON, err := mutable.Object.MarshalJSON()
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	resp := admission.PatchResponseFromRaw(req.Object.Raw, newJSON)
	resp.AuditAnnotations = audit
	return resp
}

// externalDataUnresolved reports whether err is Gatekeeper's mutation
// system failing to resolve its external data placeholders, the last step
// of a mutation that settled (System.Mutate), rather than a mutator
// failing or ErrNotConverging, which its webhook answers with a denial.
// Gatekeeper has no sentinel error for it: its message is matched.
func externalDataUnresolved(err error) bool {
	return err != nil && !errors.Is(err, mutation.ErrNotConverging) &&
		strings.HasPrefix(err.Error(), "failed to resolve external data placeholders")
}

// unresolved replaces the external data placeholders Gatekeeper's
// mutators left in obj and returns the providers they name, sorted. A
// placeholder keyed by the value at its location gets that value (the
// field as the mutators before it left it: what Gatekeeper itself keeps
// when a provider fails under failurePolicy Ignore); one keyed by the
// username gets what the write held there (original), or is removed
// where it held nothing.
func unresolved(obj, original any) []string {
	providers := map[string]bool{}
	var walk func(obj, original any)
	walk = func(obj, original any) {
		switch o := obj.(type) {
		case map[string]any:
			before, _ := original.(map[string]any)
			for k, v := range o {
				p, ok := v.(*unversioned.ExternalDataPlaceholder)
				if !ok {
					walk(v, before[k])
					continue
				}
				if p.Ref != nil {
					providers[p.Ref.Provider] = true
				}
				switch was, ok := before[k]; {
				case p.Ref == nil || p.Ref.DataSource != mutationtypes.DataSourceUsername:
					o[k] = p.ValueAtLocation
				case ok:
					o[k] = runtime.DeepCopyJSONValue(was)
				default:
					delete(o, k)
				}
			}
		case []any:
			before, _ := original.([]any)
			for i, v := range o {
				var was any
				if i < len(before) {
					was = before[i]
				}
				walk(v, was)
			}
		}
	}
	walk(obj, original)
	return slices.Sorted(maps.Keys(providers))
}

// isExcludedNamespace is Gatekeeper's webhookHandler.skipExcludedNamespace
// (pkg/webhook/common.go): the namespace of the object (the old one for a
// DELETE) checked against its Config's exclusions for the process.
func isExcludedNamespace(ex *process.Excluder, req *admissionv1.AdmissionRequest, p process.Process) (bool, error) {
	data := req.Object.Raw
	if req.Operation == admissionv1.Delete {
		if req.OldObject.Raw == nil {
			return false, errors.New("oldObject cannot be nil for DELETE operations")
		}
		data = req.OldObject.Raw
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(data); err != nil {
		return false, err
	}
	obj.SetNamespace(req.Namespace)
	return ex.IsNamespaceExcluded(p, obj)
}

func decodeInto(raw []byte, into *corev1.Namespace) error {
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(raw); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, into)
}
