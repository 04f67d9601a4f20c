package gatekeeper

import (
	"context"
	"fmt"
	"slices"

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
	// The repository's copy of an object replaces the cluster's.
	replaced := map[[4]string]bool{}
	for _, o := range objs {
		replaced[identity(o)] = true
	}
	all := make([]*unstructured.Unstructured, 0, len(cluster)+len(objs))
	for _, o := range cluster {
		if !replaced[identity(o)] {
			all = append(all, o)
		}
	}
	all = append(all, objs...)
	flags, err := readFlags(all)
	if err != nil {
		return nil, err
	}
	pols, err := readTemplates(ctx, all, flags)
	if err != nil {
		return nil, err
	}
	out := map[int]string{}
	// Templates first: a template the webhook refuses (for more than its
	// CRD: a long name, "*" among other operations) defines no constraint
	// kind either.
	if err := refuse(ctx, objs, all, pols, flags, out, isTemplate); err != nil {
		return nil, err
	}
	if len(out) > 0 {
		all = slices.DeleteFunc(all, func(o *unstructured.Unstructured) bool {
			i := slices.Index(objs, o)
			_, refused := out[i]
			return i >= 0 && refused
		})
		if pols, err = readTemplates(ctx, all, flags); err != nil {
			return nil, err
		}
		for i := range out {
			kind, _, _ := unstructured.NestedString(objs[i].Object, "spec", "crd", "spec", "names", "kind")
			pols.uningested[kind] = fmt.Sprintf("its ConstraintTemplate %s is refused", objs[i].GetName())
		}
	}
	notTemplate := func(o *unstructured.Unstructured) bool { return !isTemplate(o) }
	if err := refuse(ctx, objs, all, pols, flags, out, notTemplate); err != nil {
		return nil, err
	}
	return out, nil
}

// identity is what names an object in a cluster: group, kind, namespace
// and name.
func identity(o *unstructured.Unstructured) [4]string {
	return [4]string{o.GroupVersionKind().Group, o.GetKind(), o.GetNamespace(), o.GetName()}
}

// refuse adds to out, by index into objs, why a cluster holding all (whose
// templates pols read) refuses to create each object of objs that which
// selects: the API server, for a constraint of a kind without a CRD, else
// Gatekeeper's validating webhook.
func refuse(ctx context.Context, objs, all []*unstructured.Unstructured, pols *policies, flags Flags, out map[int]string, which func(*unstructured.Unstructured) bool) error {
	crds := crdNames(all, pols.crds)
	h := &validationHandler{policies: pols, flags: flags}
	for i, o := range objs {
		gvk := o.GroupVersionKind()
		if !gatekeeperGroups[gvk.Group] || o.GetNamespace() != "" || !which(o) {
			continue
		}
		if gvk.Group == constraintsGroup && !crds[constraintCRDName(gvk.Kind)] {
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
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
		}
		raw, err := st.MarshalJSON()
		if err != nil {
			return fmt.Errorf("%s %s: %w", o.GetKind(), o.GetName(), err)
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
	return nil
}
