// Package kyverno runs Kyverno policies in truce's admission chain with
// Kyverno's own engine. Kyverno v1.19.1 builds against an older Kubernetes
// than truce, so its engine lives in a helper executable (truce-kyverno,
// the module engine/kyverno/helper) that this package starts once and
// talks to over stdin/stdout. Installed in a chain, the engine adds
// Kyverno's CRDs and the webhook configurations Kyverno generates for the
// cluster's policies, and serves them in process: kube-apiserver's webhook
// plugin calls Kyverno where the real Kyverno sits.
package kyverno

//go:generate go run ./internal/gen

import (
	"context"
	"crypto/tls"
	"embed"
	"encoding/json"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	"github.com/truce-dev/truce/internal/certs"
	"github.com/truce-dev/truce/schema"
)

// Version is the Kyverno release the helper is built from.
const Version = "v1.19.1"

// Service is where Kyverno's webhook configurations send requests, and
// CleanupService where those of its cleanup controller do.
const (
	Service        = "kyverno/kyverno-svc"
	CleanupService = "kyverno/kyverno-cleanup-controller"
)

// The groups of Kyverno's policy kinds.
const (
	GroupLegacy = "kyverno.io"
	GroupCEL    = "policies.kyverno.io"
)

//go:embed crds/*.yaml
var crdFS embed.FS

// IsKyvernoKind reports whether objects of gk are Kyverno policies or
// exceptions.
func IsKyvernoKind(gk k8sschema.GroupKind) bool {
	return gk.Group == GroupLegacy || gk.Group == GroupCEL
}

// policyKinds are the kinds that make a cluster need Kyverno: the kinds
// truce evaluates with it.
var policyKinds = map[k8sschema.GroupKind]bool{
	{Group: GroupLegacy, Kind: "ClusterPolicy"}:           true,
	{Group: GroupLegacy, Kind: "Policy"}:                  true,
	{Group: GroupCEL, Kind: "ValidatingPolicy"}:           true,
	{Group: GroupCEL, Kind: "NamespacedValidatingPolicy"}: true,
	{Group: GroupCEL, Kind: "MutatingPolicy"}:             true,
	{Group: GroupCEL, Kind: "NamespacedMutatingPolicy"}:   true,
	// Image verification cannot be done offline, but Kyverno's engine
	// decides which writes an ImageValidatingPolicy matches: those are
	// Unpredictable, the others unaffected.
	{Group: GroupCEL, Kind: "ImageValidatingPolicy"}:           true,
	{Group: GroupCEL, Kind: "NamespacedImageValidatingPolicy"}: true,
}

// mutatingPolicyKinds are the CEL kinds whose ApplyConfigurations need the
// cluster's OpenAPI documents.
var mutatingPolicyKinds = map[k8sschema.GroupKind]bool{
	{Group: GroupCEL, Kind: "MutatingPolicy"}:           true,
	{Group: GroupCEL, Kind: "NamespacedMutatingPolicy"}: true,
}

// IsPolicy reports whether objects of gk are Kyverno policies: a cluster
// holding one needs Kyverno.
func IsPolicy(gk k8sschema.GroupKind) bool {
	return policyKinds[gk]
}

// Engine is Kyverno as an admission.PolicyEngine. Its helper starts on the
// first Install and lives until Close.
type Engine struct {
	helperPath string
	flags      *AdmissionPolicyFlags

	once sync.Once
	h    *helper
	ca   *certs.CA
	cert tls.Certificate
	// cleanupCert serves the cleanup controller's Service.
	cleanupCert tls.Certificate
	crds        []*unstructured.Unstructured
	initErr     error
	docs        docCache
	// generated remembers Kyverno's admission policy generator's answers.
	generated generatorCache
	notes     notes
}

// Options configure an Engine.
type Options struct {
	// HelperPath is the truce-kyverno executable; empty finds it with
	// FindHelper.
	HelperPath string
	// AdmissionPolicyFlags, when set, are Kyverno's
	// --generateValidatingAdmissionPolicy and
	// --generateMutatingAdmissionPolicy; nil reads them from the Kyverno
	// Deployment among the cluster's objects, else takes the Helm chart's
	// defaults (true, false).
	AdmissionPolicyFlags *AdmissionPolicyFlags
}

// New returns an engine; nothing starts until Install.
func New(opts Options) *Engine {
	return &Engine{helperPath: opts.HelperPath, flags: opts.AdmissionPolicyFlags}
}

var _ admission.PolicyEngine = (*Engine)(nil)

// Name implements admission.PolicyEngine.
func (e *Engine) Name() string { return "Kyverno " + Version }

// Configures implements admission.PolicyEngine: Kyverno's policies and
// exceptions configure it.
func (e *Engine) Configures(gk k8sschema.GroupKind) bool { return IsKyvernoKind(gk) }

func (e *Engine) init() error {
	e.once.Do(func() {
		e.initErr = func() error {
			crds, err := CRDs()
			if err != nil {
				return err
			}
			e.crds = crds
			path := e.helperPath
			if path == "" {
				if path, err = FindHelper(); err != nil {
					return err
				}
			}
			ca, err := certs.NewCA("truce-kyverno-ca", 24*time.Hour)
			if err != nil {
				return err
			}
			serving := func(service string) (tls.Certificate, error) {
				ns, name, _ := strings.Cut(service, "/")
				return ca.ServiceCertificate(ns, name, 24*time.Hour)
			}
			e.ca = ca
			if e.cert, err = serving(Service); err != nil {
				return err
			}
			if e.cleanupCert, err = serving(CleanupService); err != nil {
				return err
			}
			h, err := startHelper(path)
			if err != nil {
				return err
			}
			e.h = h
			return nil
		}()
	})
	return e.initErr
}

// Install implements admission.PolicyEngine: it loads the cluster's Kyverno
// objects into the helper and returns Kyverno's CRDs, the webhook
// configurations Kyverno generates for them, and the handler serving them.
func (e *Engine) Install(ctx context.Context, objs []*unstructured.Unstructured) (*admission.Installation, error) {
	if err := e.init(); err != nil {
		return nil, err
	}
	inst := &admission.Installation{}
	for _, c := range e.crds {
		inst.Objects = append(inst.Objects, c.DeepCopy())
	}
	// Kyverno's own webhook for its policies (validate-policy.kyverno.svc)
	// is there with no policy at all: the first one written meets it.
	reg, err := registry(append(objs, e.crds...))
	if err != nil {
		return nil, err
	}
	load := e.loadRequest(reg)
	// Kyverno's admission policy generator runs first: the policies it
	// turns into ValidatingAdmissionPolicies and MutatingAdmissionPolicies
	// are the API server's to evaluate, and Kyverno's webhook leaves them
	// out (it reads status.generated, which the generator writes).
	gen, err := e.admissionPolicies(ctx, objs, load)
	if err != nil {
		return nil, err
	}
	inst.Objects = append(inst.Objects, gen.objects...)
	for _, o := range objs {
		if !readByKyverno(o) {
			continue
		}
		o = gen.withGeneratedStatus(o)
		if mutatingPolicyKinds[o.GroupVersionKind().GroupKind()] && load.OpenAPI == nil {
			if load.OpenAPI, err = e.openAPI(reg); err != nil {
				return nil, err
			}
		}
		raw, err := json.Marshal(o.Object)
		if err != nil {
			return nil, err
		}
		load.Objects = append(load.Objects, raw)
	}
	resp, err := e.h.call(ctx, &protocol.Request{Op: protocol.OpLoad, Load: load})
	if err != nil {
		return nil, err
	}
	for _, raw := range resp.Webhooks {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("decoding a webhook configuration from the Kyverno helper: %w", err)
		}
		inst.Objects = append(inst.Objects, u)
	}
	e.noteInstall(objs, gen, resp.Warnings)
	rh := &reviewHandler{h: e.h, set: resp.Set}
	if load.OpenAPI == nil {
		rh.withDocs = e.withDocs(load, reg)
	}
	inst.Webhooks = admission.InProcessWebhooks{
		Service:        {Handler: rh, Certificate: e.cert},
		CleanupService: {Handler: &reviewHandler{h: e.h, set: resp.Set, prefix: protocol.CleanupServicePrefix}, Certificate: e.cleanupCert},
	}
	return inst, nil
}

// loadRequest is a load of no objects yet into a cluster serving reg.
// It carries no OpenAPI documents: sending them costs more than a small
// chain's whole admission (gzipped, every built-in group), and only
// MutatingPolicies (Install adds them) and the policy webhook's type check
// (withDocs) read them.
func (e *Engine) loadRequest(reg *schema.Registry) *protocol.LoadRequest {
	return &protocol.LoadRequest{Resources: discovery(reg), CABundle: e.ca.PEM, ServerVersion: admission.KubernetesVersion}
}

// openAPI are reg's OpenAPI documents as the helper takes them.
func (e *Engine) openAPI(reg *schema.Registry) (map[string][]byte, error) {
	docs, err := e.docs.gzipped(reg.OpenAPIClient())
	if err != nil {
		return nil, fmt.Errorf("the cluster's OpenAPI documents for Kyverno: %w", err)
	}
	return docs, nil
}

// withDocs returns a function loading, once, the set of load with reg's
// OpenAPI documents, for the policy webhook: Kyverno type-checks a
// ClusterPolicy's validate.cel expressions against them, and warns of
// what it finds.
func (e *Engine) withDocs(load *protocol.LoadRequest, reg *schema.Registry) func(context.Context) (string, error) {
	var mu sync.Mutex
	var set string
	return func(ctx context.Context) (string, error) {
		mu.Lock()
		defer mu.Unlock()
		if set != "" {
			return set, nil
		}
		docs, err := e.openAPI(reg)
		if err != nil {
			return "", err
		}
		l := *load
		l.OpenAPI = docs
		resp, err := e.h.call(ctx, &protocol.Request{Op: protocol.OpLoad, Load: &l})
		if err != nil {
			return "", fmt.Errorf("loading Kyverno with the cluster's OpenAPI documents: %w", err)
		}
		set = resp.Set
		return set, nil
	}
}

// readByKyverno reports whether Kyverno's informers see o: its policies
// and exceptions, Namespaces (namespace selectors) and RBAC bindings
// (roles in policy contexts).
func readByKyverno(o *unstructured.Unstructured) bool {
	gvk := o.GroupVersionKind()
	switch {
	case gvk.Group == GroupLegacy:
		return gvk.Kind == "ClusterPolicy" || gvk.Kind == "Policy" || gvk.Kind == "PolicyException"
	case gvk.Group == GroupCEL:
		// The CEL kinds the helper evaluates at admission and their
		// exceptions; GeneratingPolicies and DeletingPolicies run only
		// as background writers (docs/kyverno.md).
		return policyKinds[gvk.GroupKind()] || gvk.Kind == "PolicyException"
	case gvk.Group == "" && gvk.Kind == "Namespace":
		return true
	case gvk.Group == "rbac.authorization.k8s.io":
		return gvk.Kind == "RoleBinding" || gvk.Kind == "ClusterRoleBinding"
	}
	return false
}

// Close kills the helper.
func (e *Engine) Close() {
	if e.h != nil {
		e.h.close()
	}
}

// CRDs returns Kyverno's CRDs for the kinds truce reads, as Kyverno
// v1.19.1 ships them.
func CRDs() ([]*unstructured.Unstructured, error) {
	files, err := fs.Glob(crdFS, "crds/*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := crdFS.ReadFile(f)
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(data, &u.Object); err != nil {
			return nil, fmt.Errorf("decoding Kyverno's CRD %s: %w", f, err)
		}
		out = append(out, u)
	}
	return out, nil
}

var (
	sharedMu sync.Mutex
	shared   *Engine
)

// Shared returns the process's engine: one helper for every chain the
// process builds. The helper ends with the process (its standard input
// closes).
func Shared() *Engine {
	sharedMu.Lock()
	defer sharedMu.Unlock()
	if shared == nil {
		shared = New(Options{})
	}
	return shared
}
