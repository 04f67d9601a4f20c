package gatekeeper

import (
	"context"
	"fmt"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	cradmission "sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/truce-dev/truce/admission"
)

var _ admission.Refuser = (*Engine)(nil)

// Refusals implements admission.Refuser: the Gatekeeper objects among objs
// that a cluster holding cluster refuses to create. Gatekeeper's
// validating webhook refuses what it cannot read (validateGatekeeperResources:
// a template that yields no CRD, a constraint its template's schema or
// enforcementAction check refuses, a mutator or ExpansionTemplate it cannot
// build); its answer is an error, which kube-apiserver takes for a denial
// whatever the webhook's failurePolicy. And the API server refuses a
// constraint whose kind has no CRD: Gatekeeper creates none for a template
// it cannot ingest (its Rego does not compile, no driver takes it).
//
// Namespaced objects (the Config) are left to the chain: Gatekeeper's
// webhook configuration exempts gatekeeper-system, where they live.
func (e *Engine) Refusals(ctx context.Context, cluster, objs []*unstructured.Unstructured) (map[int]string, error) {
	if !slices.ContainsFunc(objs, func(o *unstructured.Unstructured) bool { return gatekeeperGroups[o.GroupVersionKind().Group] }) {
		return nil, nil
	}
	all := make([]*unstructured.Unstructured, 0, len(cluster)+len(objs))
	all = append(append(all, cluster...), objs...)
	flags, err := readFlags(all)
	if err != nil {
		return nil, err
	}
	pols, err := readTemplates(ctx, all, flags)
	if err != nil {
		return nil, err
	}
	crds := map[string]bool{}
	for _, o := range append(slices.Clip(cluster), pols.crds...) {
		if o.GetKind() == "CustomResourceDefinition" {
			crds[o.GetName()] = true
		}
	}
	h := &validationHandler{policies: pols, flags: flags}
	out := map[int]string{}
	for i, o := range objs {
		gvk := o.GroupVersionKind()
		if !gatekeeperGroups[gvk.Group] || o.GetNamespace() != "" {
			continue
		}
		if gvk.Group == constraintsGroup && !crds[strings.ToLower(gvk.Kind)+"."+constraintsGroup] {
			why, ok := pols.uningested[gvk.Kind]
			if !ok {
				why = "no ConstraintTemplate defines it"
			}
			out[i] = fmt.Sprintf("no CRD for %s.%s: %s", gvk.Kind, gvk.Group, why)
			continue
		}
		// The webhook sees the object as the API server would store it.
		st, err := stored(o)
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		raw, err := st.MarshalJSON()
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		req := cradmission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			UID:       types.UID(fmt.Sprintf("truce-gatekeeper-%d", i)),
			Kind:      metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind},
			Name:      o.GetName(),
			Operation: admissionv1.Create,
			UserInfo:  authenticationv1.UserInfo{Username: "truce"},
			Object:    runtime.RawExtension{Raw: raw},
		}}
		if _, err := h.validateGatekeeperResource(ctx, &req); err != nil {
			out[i] = fmt.Sprintf("admission webhook %q denied the request: %v", "validation.gatekeeper.sh", err)
		}
	}
	return out, nil
}
