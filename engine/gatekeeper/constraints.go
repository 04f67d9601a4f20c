package gatekeeper

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	frameworksapis "github.com/open-policy-agent/frameworks/constraint/pkg/apis"
	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
	"github.com/open-policy-agent/frameworks/constraint/pkg/externaldata"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/target"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/util"
	"github.com/truce-dev/truce/engine/gatekeeper/internal/k8scel"
	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

const (
	templatesGroup   = "templates.gatekeeper.sh"
	constraintsGroup = "constraints.gatekeeper.sh"
)

var templateScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := frameworksapis.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("registering the constraint framework's API types: %v", err))
	}
	if err := apiextensions.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := apiextensionsv1.AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}()

// newConstraintClient returns the constraint framework's client as
// Gatekeeper's webhook builds it (main.go setupControllers, with its
// --enable-k8s-native-validation and --enable-referential-rules, true by
// default): the Kubernetes validation target, the CEL driver (k8scel)
// first, then the Rego driver with referential data ("inventory"), the
// webhook enforcement point.
// The client runs a template that carries both CEL and Rego with the first
// driver that takes it, so the order decides which code answers.
//
// With offline, the client is truce's: Rego may not reach the network
// (no external_data, http.send or net.lookup_ip_addr), since truce calls
// nothing outside the machine; without, it has Gatekeeper's built-ins
// exactly (--disable-opa-builtin, --enable-external-data), to tell which
// templates Gatekeeper ingests. Only the offline client evaluates.
func newConstraintClient(flags Flags, offline bool) (*constraintclient.Client, error) {
	opts := []constraintclient.Opt{constraintclient.Targets(&target.K8sValidationTarget{})}
	if flags.K8sNativeValidation {
		celDriver, err := k8scel.New()
		if err != nil {
			return nil, fmt.Errorf("creating Gatekeeper's CEL driver: %w", err)
		}
		opts = append(opts, constraintclient.Driver(celDriver))
	}
	externs := rego.Externs()
	if flags.ReferentialRules {
		externs = rego.Externs("inventory")
	}
	// external_data is in OPA's registry (declareExternalData): every
	// compiler knows it unless it is disabled.
	if err := declareExternalData(); err != nil {
		return nil, err
	}
	disabled := flags.DisabledBuiltins
	switch {
	case offline:
		disabled = append(slices.Clip(disabled), networkBuiltins...)
	case !flags.ExternalData:
		disabled = append(slices.Clip(disabled), externalDataBuiltin)
	}
	args := []rego.Arg{rego.Tracing(false), externs}
	if len(disabled) > 0 {
		args = append(args, rego.DisableBuiltins(disabled...))
	}
	driver, err := rego.New(args...)
	if err != nil {
		return nil, fmt.Errorf("creating Gatekeeper's Rego driver: %w", err)
	}
	opts = append(opts, constraintclient.Driver(driver), constraintclient.EnforcementPoints(util.WebhookEnforcementPoint))
	c, err := constraintclient.NewClient(opts...)
	if err != nil {
		return nil, fmt.Errorf("creating Gatekeeper's constraint client: %w", err)
	}
	return c, nil
}

// networkBuiltins are the Rego built-ins that reach outside the machine,
// which truce does not call. external_data is among them: OPA's registry
// of built-ins is global, and holds it once any driver registered it.
var networkBuiltins = []string{"http.send", "net.lookup_ip_addr", externalDataBuiltin}

// externalDataBuiltin is the built-in Gatekeeper's Rego driver adds for
// external data.
const externalDataBuiltin = "external_data"

// declareExternalData puts external_data into OPA's registry of built-ins,
// which is the process's, once: a Rego driver given a provider cache
// registers it, as Gatekeeper's process does once at start. Registering it
// with every driver would write OPA's global maps while other chains
// compile Rego; New calls this before any does. The implementation
// registered answers from an empty provider cache, and no driver that
// evaluates (the offline one) can call it.
var declareExternalData = sync.OnceValue(func() error {
	if _, err := rego.New(rego.AddExternalDataProviderCache(externaldata.NewCache())); err != nil {
		return fmt.Errorf("declaring Gatekeeper's external_data built-in: %w", err)
	}
	return nil
})

// policies are Gatekeeper's validation policies: the client holding the
// templates and constraints it ingested, and the CRD it generated for each
// template.
type policies struct {
	client *constraintclient.Client
	crds   []*unstructured.Unstructured
	// unevaluated are the constraint kinds of templates Gatekeeper
	// ingests but truce does not run, with why; notEvaluated their
	// constraints.
	unevaluated  map[string]string
	notEvaluated []notEvaluated
	// uningested are the constraint kinds of templates Gatekeeper cannot
	// ingest, with why: it creates no CRD for them, so the API server
	// knows no such constraint.
	uningested map[string]string
	// notes are what reading the policies left out, for the user.
	notes []string
	// gatekeepers holds, with Gatekeeper's own built-ins, the templates
	// the offline client cannot (nil when there are none): their
	// constraints are validated on write against it.
	gatekeepers *constraintclient.Client
}

// validateConstraint is the constraint client's ValidateConstraint, with
// the client that holds the constraint's template.
func (p *policies) validateConstraint(o *unstructured.Unstructured) error {
	if _, ok := p.unevaluated[o.GetKind()]; ok && p.gatekeepers != nil {
		return p.gatekeepers.ValidateConstraint(o)
	}
	return p.client.ValidateConstraint(o)
}

type notEvaluated struct {
	constraint *unstructured.Unstructured
	why        string
}

// unpredictable names the constraints that match review but were not
// evaluated, with why, using Gatekeeper's own matcher.
func (p *policies) unpredictable(review any) []string {
	if len(p.notEvaluated) == 0 {
		return nil
	}
	tgt := &target.K8sValidationTarget{}
	handled, gkReview, err := tgt.HandleReview(review)
	if err != nil || !handled {
		return nil
	}
	var out []string
	for _, n := range p.notEvaluated {
		m, err := tgt.ToMatcher(n.constraint)
		if err != nil {
			continue
		}
		if ok, err := m.Match(gkReview); err == nil && ok {
			out = append(out, fmt.Sprintf("%s %s not evaluated: %s", n.constraint.GetKind(), n.constraint.GetName(), n.why))
		}
	}
	return out
}

// readPolicies ingests the ConstraintTemplates and constraints among objs as
// Gatekeeper's constraint template and constraint controllers do, and
// inventory as its cache manager syncs it.
func readPolicies(ctx context.Context, objs, inventory []*unstructured.Unstructured, flags Flags) (*policies, error) {
	p, err := readTemplates(ctx, objs, flags)
	if err != nil {
		return nil, err
	}
	crds := crdNames(objs)
	for _, o := range objs {
		if o.GroupVersionKind().Group != constraintsGroup {
			continue
		}
		if why, ok := p.unevaluated[o.GetKind()]; ok {
			p.notEvaluated = append(p.notEvaluated, notEvaluated{constraint: o, why: why})
			continue
		}
		if why, ok := p.uningested[o.GetKind()]; ok {
			// Only a CRD left from an earlier version of the template
			// lets it exist; Gatekeeper's client no longer holds the
			// template once it restarts.
			if crds[constraintCRDName(o.GetKind())] {
				p.notEvaluated = append(p.notEvaluated, notEvaluated{constraint: o, why: why})
			} else {
				p.notes = append(p.notes, fmt.Sprintf("%s %s cannot exist: %s", o.GetKind(), o.GetName(), why))
			}
			continue
		}
		if _, err := p.client.AddConstraint(ctx, o); err != nil {
			// Gatekeeper's constraint controller reports it in the
			// constraint's status and enforces nothing: its webhook
			// refuses such a write, so only an older template or a
			// constraint of no template puts one in a cluster.
			p.notes = append(p.notes, fmt.Sprintf("%s %s is not enforced: Gatekeeper cannot add it: %v", o.GetKind(), o.GetName(), err))
		}
	}
	for _, o := range inventory {
		if _, err := p.client.AddData(ctx, o); err != nil {
			return nil, fmt.Errorf("syncing %s %s/%s into Gatekeeper's inventory: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return p, nil
}

// readTemplates ingests the ConstraintTemplates among objs as Gatekeeper's
// constraint template controller does: a template Gatekeeper cannot ingest
// (its Rego does not compile, no driver takes it) gets no CRD, unless objs
// hold one from before; one Gatekeeper ingests that truce cannot run
// offline (it calls external_data or http.send) gets its CRD, and its
// constraints are not evaluated.
func readTemplates(ctx context.Context, objs []*unstructured.Unstructured, flags Flags) (*policies, error) {
	c, err := newConstraintClient(flags, true)
	if err != nil {
		return nil, err
	}
	p := &policies{client: c, unevaluated: map[string]string{}, uningested: map[string]string{}}
	for _, o := range objs {
		if !isTemplate(o) {
			continue
		}
		// As the API server stored it, with its CRD's defaults.
		st, err := stored(o)
		if err != nil {
			return nil, fmt.Errorf("reading Gatekeeper's ConstraintTemplate %s: %w", o.GetName(), err)
		}
		ct, err := unversionedTemplate(st)
		if err != nil {
			return nil, err
		}
		crd, err := c.CreateCRD(ctx, ct)
		if err != nil {
			// Gatekeeper's webhook refuses such a template; one in a
			// cluster has no CRD, like one it cannot ingest.
			p.notIngested(o.GetName(), ct.Spec.CRD.Spec.Names.Kind, err)
			continue
		}
		kind := ct.Spec.CRD.Spec.Names.Kind
		if _, offlineErr := c.AddTemplate(ctx, ct); offlineErr != nil {
			if p.gatekeepers == nil {
				if p.gatekeepers, err = newConstraintClient(flags, false); err != nil {
					return nil, err
				}
			}
			if _, err := p.gatekeepers.AddTemplate(ctx, ct); err != nil {
				p.notIngested(o.GetName(), kind, err)
				continue // a CRD from an earlier version stays as it is
			}
			p.unevaluated[kind] = fmt.Sprintf("its ConstraintTemplate %s calls what truce does not call offline (external_data, http.send, net.lookup_ip_addr): %s", o.GetName(), firstLine(offlineErr))
		}
		u, err := crdObject(crd)
		if err != nil {
			return nil, fmt.Errorf("reading Gatekeeper's ConstraintTemplate %s: %w", o.GetName(), err)
		}
		p.crds = append(p.crds, u)
	}
	return p, nil
}

// unversionedTemplate converts a stored ConstraintTemplate to the type the
// client takes, as Gatekeeper's controller does.
func unversionedTemplate(o *unstructured.Unstructured) (*templates.ConstraintTemplate, error) {
	ct := &templates.ConstraintTemplate{}
	return ct, toUnversioned(o, ct)
}

// toUnversioned converts a stored object of the constraint framework's
// API groups (a ConstraintTemplate, a Provider) into into, the unversioned
// type Gatekeeper's code takes, through the versioned type of its
// apiVersion.
func toUnversioned(o *unstructured.Unstructured, into runtime.Object) error {
	versioned, err := templateScheme.New(o.GroupVersionKind())
	if err == nil {
		err = runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, versioned)
	}
	if err == nil {
		err = templateScheme.Convert(versioned, into, nil)
	}
	if err != nil {
		return fmt.Errorf("reading Gatekeeper's %s %s: %w", o.GetKind(), o.GetName(), err)
	}
	return nil
}

// crdObject is the CRD Gatekeeper creates for a template, as stored.
func crdObject(crd *apiextensions.CustomResourceDefinition) (*unstructured.Unstructured, error) {
	v1 := &apiextensionsv1.CustomResourceDefinition{}
	if err := templateScheme.Convert(crd, v1, nil); err != nil {
		return nil, err
	}
	v1.APIVersion, v1.Kind = "apiextensions.k8s.io/v1", "CustomResourceDefinition"
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(v1)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}

// notIngested records that Gatekeeper cannot ingest template, whose
// constraints are of kind: it creates no CRD for them.
func (p *policies) notIngested(template, kind string, err error) {
	p.uningested[kind] = fmt.Sprintf("Gatekeeper cannot ingest its ConstraintTemplate %s: %s", template, firstLine(err))
	p.notes = append(p.notes, fmt.Sprintf("ConstraintTemplate %s cannot be ingested, so no CRD is created for %s: %s", template, kind, firstLine(err)))
}

// firstLine is err's first line: Rego compile errors go on to quote the
// code, which a one-line report cannot hold.
func firstLine(err error) string {
	line, _, _ := strings.Cut(err.Error(), "\n")
	return line
}

// constraintCRDName is the name of the CRD Gatekeeper creates for the
// constraints of kind (its plural is the lowercase kind).
func constraintCRDName(kind string) string {
	return strings.ToLower(kind) + "." + constraintsGroup
}

// crdNames are the names of the CustomResourceDefinitions among lists.
func crdNames(lists ...[]*unstructured.Unstructured) map[string]bool {
	out := map[string]bool{}
	for _, objs := range lists {
		for _, o := range objs {
			if o.GetKind() == "CustomResourceDefinition" && o.GroupVersionKind().Group == "apiextensions.k8s.io" {
				out[o.GetName()] = true
			}
		}
	}
	return out
}

// isTemplate reports whether o is a ConstraintTemplate.
func isTemplate(o *unstructured.Unstructured) bool {
	return o.GroupVersionKind().Group == templatesGroup && o.GetKind() == "ConstraintTemplate"
}
