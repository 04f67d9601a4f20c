// Package gatekeeper runs OPA Gatekeeper inside truce's admission chain:
// its mutators (Assign, AssignMetadata, ModifySet, AssignImage) through
// Gatekeeper's own mutation system, behind the webhook configuration
// Gatekeeper ships, served in process.
//
// Gatekeeper (github.com/open-policy-agent/gatekeeper/v3) builds in truce's
// module against Kubernetes 1.37, so it runs in process; see
// docs/gatekeeper.md.
package gatekeeper

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/gatekeeper/v3/pkg/expansion"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/internal/certs"
)

// Namespace and Service are where Gatekeeper's manifests install its
// webhook server; its webhook configurations call that Service.
const (
	Namespace = "gatekeeper-system"
	Service   = "gatekeeper-webhook-service"
)

// Engine is OPA Gatekeeper as an admission.PolicyEngine.
type Engine struct {
	caPEM   []byte
	serving tls.Certificate
	notes   notes
}

var (
	_ admission.PolicyEngine = (*Engine)(nil)
	_ admission.Noter        = (*Engine)(nil)
)

// New returns the engine with its serving certificate, made once: every
// chain the engine is installed in serves it.
func New() (*Engine, error) {
	// Gatekeeper's webhooks log through controller-runtime, whose root
	// logger complains on stderr when never set; truce reports through
	// results, so the logs are dropped.
	ctrllog.SetLogger(logr.Discard())
	if err := declareExternalData(); err != nil {
		return nil, err
	}
	ca, err := certs.NewCA("truce gatekeeper webhook CA", 24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("creating Gatekeeper's webhook CA: %w", err)
	}
	cert, err := ca.ServiceCertificate(Namespace, Service, 24*time.Hour)
	if err != nil {
		return nil, fmt.Errorf("creating Gatekeeper's serving certificate: %w", err)
	}
	return &Engine{caPEM: ca.PEM, serving: cert}, nil
}

// Name implements admission.PolicyEngine.
func (e *Engine) Name() string { return "Gatekeeper" }

// Configures implements admission.PolicyEngine: Gatekeeper reads its
// mutators, ConstraintTemplates, constraints, ExpansionTemplates and
// Config, and the namespaces its policies' namespaceSelectors are matched
// against.
func (e *Engine) Configures(gk k8sschema.GroupKind) bool {
	switch gk.Group {
	case mutationsGroup, configGroup, templatesGroup, constraintsGroup, syncSetGroup, expansionGroup:
		return true
	case "":
		return gk.Kind == "Namespace"
	}
	return false
}

// Install implements admission.PolicyEngine: Gatekeeper's CRDs and webhook
// configurations, and its webhook server answering for
// gatekeeper-system/gatekeeper-webhook-service.
func (e *Engine) Install(ctx context.Context, objs []*unstructured.Unstructured) (*admission.Installation, error) {
	flags, err := readFlags(objs)
	if err != nil {
		return nil, err
	}
	cfg, err := readConfig(objs)
	if err != nil {
		return nil, err
	}
	system, errs := mutationSystem(objs, flags)
	var expander *expansion.System
	if flags.GeneratorExpansion {
		var expErrs []error
		expander, expErrs = expansionSystem(objs, system)
		errs = append(errs, expErrs...)
	}
	if len(errs) > 0 {
		// Gatekeeper's validating webhook refuses such a mutator or
		// ExpansionTemplate; one already in the cluster is a mistake to
		// name, not to skip.
		return nil, errors.Join(errs...)
	}
	nss, err := namespaces(objs)
	if err != nil {
		return nil, err
	}
	inventory, err := cfg.inventory(objs)
	if err != nil {
		return nil, err
	}
	pols, err := readPolicies(ctx, objs, inventory, flags)
	if err != nil {
		return nil, err
	}
	e.notes.add(pols.notes...)
	installed, err := installObjects(objs, e.caPEM)
	if err != nil {
		return nil, err
	}
	// The CRD Gatekeeper generates for each template defines its
	// constraint kind.
	installed = append(installed, pols.crds...)
	mux := http.NewServeMux()
	mux.Handle(mutatePath, newMutationWebhook(system, cfg.excluder, nss))
	mux.Handle(admitPath, newValidationWebhook(pols, cfg.excluder, nss, expander, flags))
	mux.Handle(admitLabelPath, newNamespaceLabelWebhook(flags))
	return &admission.Installation{
		Objects: installed,
		Webhooks: admission.InProcessWebhooks{
			Namespace + "/" + Service: {Handler: mux, Certificate: e.serving},
		},
		Watches: cfg.watches(),
	}, nil
}

// Reads reports whether objects of group are Gatekeeper's own (its
// policies, mutators and configuration): a cluster or repository holding
// one has Gatekeeper installed.
func Reads(group string) bool {
	return strings.HasSuffix(group, ".gatekeeper.sh")
}
