package gatekeeper

import (
	"context"
	"fmt"

	frameworksapis "github.com/open-policy-agent/frameworks/constraint/pkg/apis"
	constraintclient "github.com/open-policy-agent/frameworks/constraint/pkg/client"
	"github.com/open-policy-agent/frameworks/constraint/pkg/client/drivers/rego"
	"github.com/open-policy-agent/frameworks/constraint/pkg/core/templates"
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
func newConstraintClient(flags Flags) (*constraintclient.Client, error) {
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
	driver, err := rego.New(rego.Tracing(false), externs)
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

// policies are Gatekeeper's validation policies: the client holding the
// templates and constraints it ingested, and the CRD it generated for each
// template.
type policies struct {
	client *constraintclient.Client
	crds   []*unstructured.Unstructured
	// unevaluated are the constraint kinds of templates the client
	// cannot run, with why; notEvaluated their constraints.
	unevaluated  map[string]string
	notEvaluated []notEvaluated
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
	c, err := newConstraintClient(flags)
	if err != nil {
		return nil, err
	}
	p := &policies{client: c, unevaluated: map[string]string{}}
	for _, o := range objs {
		if o.GroupVersionKind().Group != templatesGroup || o.GetKind() != "ConstraintTemplate" {
			continue
		}
		ct, err := unversionedTemplate(o)
		if err != nil {
			return nil, err
		}
		crd, err := c.CreateCRD(ctx, ct)
		if err != nil {
			return nil, fmt.Errorf("reading Gatekeeper's ConstraintTemplate %s: %w", o.GetName(), err)
		}
		if _, err := c.AddTemplate(ctx, ct); err != nil {
			// Neither driver takes it (Gatekeeper reports the error in
			// the template's status; its CRD exists): its constraints
			// are known, not evaluated.
			p.unevaluated[ct.Spec.CRD.Spec.Names.Kind] = fmt.Sprintf("Gatekeeper cannot run its ConstraintTemplate %s: %v", o.GetName(), err)
		}
		u, err := crdObject(crd)
		if err != nil {
			return nil, fmt.Errorf("reading Gatekeeper's ConstraintTemplate %s: %w", o.GetName(), err)
		}
		p.crds = append(p.crds, u)
	}
	for _, o := range objs {
		if o.GroupVersionKind().Group != constraintsGroup {
			continue
		}
		if _, err := c.AddConstraint(ctx, o); err != nil {
			if why, ok := p.unevaluated[o.GetKind()]; ok {
				p.notEvaluated = append(p.notEvaluated, notEvaluated{constraint: o, why: why})
				continue
			}
			return nil, fmt.Errorf("reading Gatekeeper's %s %s: %w", o.GetKind(), o.GetName(), err)
		}
	}
	for _, o := range inventory {
		if _, err := c.AddData(ctx, o); err != nil {
			return nil, fmt.Errorf("syncing %s %s/%s into Gatekeeper's inventory: %w", o.GetKind(), o.GetNamespace(), o.GetName(), err)
		}
	}
	return p, nil
}

// unversionedTemplate converts a stored ConstraintTemplate to the type the
// client takes, as Gatekeeper's controller does.
func unversionedTemplate(o *unstructured.Unstructured) (*templates.ConstraintTemplate, error) {
	versioned, err := templateScheme.New(o.GroupVersionKind())
	if err != nil {
		return nil, fmt.Errorf("reading Gatekeeper's ConstraintTemplate %s: %w", o.GetName(), err)
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, versioned); err != nil {
		return nil, fmt.Errorf("reading Gatekeeper ConstraintTemplate %s: %w", o.GetName(), err)
	}
	ct := &templates.ConstraintTemplate{}
	if err := templateScheme.Convert(versioned, ct, nil); err != nil {
		return nil, fmt.Errorf("reading Gatekeeper ConstraintTemplate %s: %w", o.GetName(), err)
	}
	return ct, nil
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
