package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-logr/logr"
	policiesv1beta1 "github.com/kyverno/api/api/policies.kyverno.io/v1beta1"
	celengine "github.com/kyverno/kyverno/pkg/cel/engine"
	"github.com/kyverno/kyverno/pkg/cel/libs"
	"github.com/kyverno/kyverno/pkg/cel/matching"
	ivpolengine "github.com/kyverno/kyverno/pkg/cel/policies/ivpol/engine"
	mpolcompiler "github.com/kyverno/kyverno/pkg/cel/policies/mpol/compiler"
	mpolengine "github.com/kyverno/kyverno/pkg/cel/policies/mpol/engine"
	vpolcompiler "github.com/kyverno/kyverno/pkg/cel/policies/vpol/compiler"
	vpolengine "github.com/kyverno/kyverno/pkg/cel/policies/vpol/engine"
	"github.com/kyverno/kyverno/pkg/client/clientset/versioned"
	"github.com/kyverno/kyverno/pkg/clients/dclient"
	"github.com/kyverno/kyverno/pkg/config"
	"github.com/kyverno/kyverno/pkg/event"
	gctxstore "github.com/kyverno/kyverno/pkg/globalcontext/store"
	imageverifycache "github.com/kyverno/kyverno/pkg/image/verification/cache"
	"github.com/kyverno/kyverno/pkg/webhooks"
	"github.com/kyverno/kyverno/pkg/webhooks/resource/ivpol"
	"github.com/kyverno/kyverno/pkg/webhooks/resource/mpol"
	"github.com/kyverno/kyverno/pkg/webhooks/resource/vpol"
	"github.com/kyverno/kyverno/pkg/webhooks/updaterequest"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/openapi"
	"k8s.io/client-go/restmapper"
)

// celObjects are the CEL policy kinds of policies.kyverno.io a set holds,
// as Kyverno's engines take them.
type celObjects struct {
	vpols      []policiesv1beta1.ValidatingPolicyLike
	mpols      []policiesv1beta1.MutatingPolicyLike
	ivpols     []policiesv1beta1.ImageValidatingPolicyLike
	exceptions []*policiesv1beta1.PolicyException
}

func (c *celObjects) empty() bool {
	return len(c.vpols) == 0 && len(c.mpols) == 0 && len(c.ivpols) == 0
}

func sortCEL(objs []runtime.Object) *celObjects {
	c := &celObjects{}
	for _, o := range objs {
		// A policy Kyverno turned into a ValidatingAdmissionPolicy or
		// MutatingAdmissionPolicy (status.generated) is left out of its
		// engines, as their reconcilers leave it out
		// (pkg/cel/policies/{vpol,mpol}/engine/reconciler.go): the API
		// server evaluates it.
		if g, ok := o.(interface {
			GetStatus() *policiesv1beta1.ValidatingPolicyStatus
		}); ok && g.GetStatus().Generated {
			continue
		}
		if g, ok := o.(interface {
			GetStatus() *policiesv1beta1.MutatingPolicyStatus
		}); ok && g.GetStatus().Generated {
			continue
		}
		switch p := o.(type) {
		case *policiesv1beta1.ValidatingPolicy:
			c.vpols = append(c.vpols, p)
		case *policiesv1beta1.NamespacedValidatingPolicy:
			c.vpols = append(c.vpols, p)
		case *policiesv1beta1.MutatingPolicy:
			c.mpols = append(c.mpols, p)
		case *policiesv1beta1.NamespacedMutatingPolicy:
			c.mpols = append(c.mpols, p)
		case *policiesv1beta1.ImageValidatingPolicy:
			c.ivpols = append(c.ivpols, p)
		case *policiesv1beta1.NamespacedImageValidatingPolicy:
			c.ivpols = append(c.ivpols, p)
		case *policiesv1beta1.PolicyException:
			c.exceptions = append(c.exceptions, p)
		}
	}
	return c
}

// storedVersion is the version kube-apiserver hands Kyverno's informers
// for a policies.kyverno.io object: the CRDs serve v1, v1alpha1 and
// v1beta1 with conversion strategy None and store v1beta1, so an object
// written as v1 is read back as v1beta1 with only its apiVersion changed.
// Kyverno's clients know v1beta1 alone. The same holds for kyverno.io:
// ClusterPolicy and Policy are served as v1 and v2beta1 and stored as v1,
// PolicyException served as v2 and v2beta1 and stored as v2 (Kyverno's
// CRDs, conversion None), and Kyverno's informers watch the stored
// versions; a v2beta1 ClusterPolicy was otherwise decoded as a type the
// policy set does not take and left out.
func storedVersion(gvk k8sschema.GroupVersionKind) k8sschema.GroupVersionKind {
	switch {
	case gvk.Group == "policies.kyverno.io":
		gvk.Version = "v1beta1"
	case gvk.Group == "kyverno.io" && (gvk.Kind == "ClusterPolicy" || gvk.Kind == "Policy"):
		gvk.Version = "v1"
	case gvk.Group == "kyverno.io" && (gvk.Kind == "PolicyException" || gvk.Kind == "ClusterCleanupPolicy" || gvk.Kind == "CleanupPolicy"):
		gvk.Version = "v2"
	}
	return gvk
}

// celHandlers are Kyverno's admission handlers for ValidatingPolicies and
// MutatingPolicies (cluster-wide and namespaced) over its CEL engines, wired
// as cmd/kyverno/main.go wires them, with two differences an offline,
// fixed set of policies allows: the policies are compiled once by the
// engines' static providers (what the kyverno CLI uses) instead of the
// controller-runtime reconcilers that follow a live cluster, and the
// MutatingPolicies' type converters read the OpenAPI documents truce sends
// (the cluster's, as kube-apiserver serves them) instead of discovery.
type celHandlers struct {
	webhooks.ResourceHandlers
	warnings []string
}

func newCELHandlers(c *celObjects, configuration config.Configuration, client dclient.Interface, kube kubernetes.Interface, kyverno versioned.Interface, nsLister corev1listers.NamespaceLister, secretLister corev1listers.SecretLister, docs map[string][]byte) (*celHandlers, error) {
	restMapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(kube.Discovery()))
	contextProvider, err := libs.NewContextProvider(client, secretLister, offlineGlobalContext{}, restMapper, false)
	if err != nil {
		return nil, fmt.Errorf("kyverno's CEL context: %w", err)
	}
	nsResolver := celengine.NewNamespaceResolver(logr.Discard(), nsLister, kube)
	out := &celHandlers{}

	// A policy that does not compile is left out, with a warning, as
	// Kyverno's reconcilers leave it out of the engine (its webhook still
	// calls Kyverno, which then finds no policy of that name).
	vpolCompiler := vpolcompiler.NewCompiler()
	var vpols []policiesv1beta1.ValidatingPolicyLike
	for _, p := range c.vpols {
		if _, err := vpolengine.NewProvider(vpolCompiler, []policiesv1beta1.ValidatingPolicyLike{p}, c.exceptions); err != nil {
			out.warnings = append(out.warnings, fmt.Sprintf("%s %s: %v", p.GetKind(), p.GetName(), err))
			continue
		}
		vpols = append(vpols, p)
	}
	vpolProvider, err := vpolengine.NewProvider(vpolCompiler, vpols, c.exceptions)
	if err != nil {
		return nil, err
	}
	mpolCompiler := mpolcompiler.NewCompiler()
	var mpols []policiesv1beta1.MutatingPolicyLike
	for _, p := range c.mpols {
		if _, err := mpolengine.NewProvider(mpolCompiler, []policiesv1beta1.MutatingPolicyLike{p}, c.exceptions, contextProvider); err != nil {
			out.warnings = append(out.warnings, fmt.Sprintf("%s %s: %v", p.GetKind(), p.GetName(), err))
			continue
		}
		mpols = append(mpols, p)
	}
	mpolProvider, err := mpolengine.NewProvider(mpolCompiler, mpols, c.exceptions, contextProvider)
	if err != nil {
		return nil, err
	}

	// ImageValidatingPolicies: their static provider (autogen for pod
	// controllers, exceptions by policy name and kind), as the CLI builds
	// it; Kyverno's reconciler compiles nothing ahead, so neither does
	// truce (a policy that does not compile errors at evaluation).
	var ivpols []policiesv1beta1.ImageValidatingPolicyLike
	for _, p := range c.ivpols {
		if _, err := ivpolengine.NewProvider([]policiesv1beta1.ImageValidatingPolicyLike{p}, c.exceptions); err != nil {
			out.warnings = append(out.warnings, fmt.Sprintf("%s %s: %v", p.GetKind(), p.GetName(), err))
			continue
		}
		ivpols = append(ivpols, p)
	}
	ivpolProvider, err := ivpolengine.NewProvider(ivpols, c.exceptions)
	if err != nil {
		return nil, err
	}

	vpolEngine := recordingVpolEngine{vpolengine.NewEngine(vpolProvider, nsResolver, matching.NewMatcher())}
	mpolEngine := recordingMpolEngine{mpolengine.NewEngine(mpolProvider, nsResolver, matching.NewMatcher(), mpolcompiler.NewStaticTypeConverterManager(openAPIDocs(docs)), contextProvider)}
	vh := vpol.New(vpolEngine, contextProvider, kyverno, false, event.NewFake())
	mh := mpol.New(contextProvider, mpolEngine, kyverno, reportingConfig, updaterequest.NewFake(), backgroundServiceAccount, event.NewFake())
	out.ValidatingPolicies = webhooks.HandlerFunc(vh.ValidateClustered)
	out.NamespacedValidatingPolicies = webhooks.HandlerFunc(vh.ValidateNamespaced)
	ivpolEngine := recordingIvpolEngine{
		Engine: ivpolengine.NewEngine(ivpolProvider, nsResolver, matching.NewMatcher(), secretLister,
			imageverifycache.DisabledImageVerifyCache(), configuration),
		configuration: configuration,
	}
	ih := ivpol.New(ivpolEngine, contextProvider, kyverno, false, event.NewFake())
	out.ImageVerificationPolicies = webhooks.HandlerFunc(ih.ValidateClustered)
	out.NamespacedImageVerificationPolicies = webhooks.HandlerFunc(ih.ValidateNamespaced)
	out.ImageVerificationPoliciesMutation = webhooks.HandlerFunc(ih.MutateClustered)
	out.NamespacedImageVerificationPoliciesMutation = webhooks.HandlerFunc(ih.MutateNamespaced)
	out.MutatingPolicies = webhooks.HandlerFunc(mh.MutateClustered)
	out.NamespacedMutatingPolicies = webhooks.HandlerFunc(mh.MutateNamespaced)
	return out, nil
}

// offlineGlobalContext is Kyverno's global context store offline: truce
// runs no GlobalContextEntry controllers, so every entry a policy reads is
// an error naming it, never a silent empty value.
type offlineGlobalContext struct{}

func (offlineGlobalContext) CheckCapacity(string) error { return nil }
func (offlineGlobalContext) Set(string, gctxstore.Entry) error {
	return nil
}
func (offlineGlobalContext) Get(key string) (gctxstore.Entry, bool) {
	return offlineEntry(key), true
}
func (offlineGlobalContext) Delete(string) {}

type offlineEntry string

// errGlobalContextOffline is what every global context entry answers.
var errGlobalContextOffline = errors.New("truce runs Kyverno offline and does not fill global context (Unpredictable)")

func (e offlineEntry) Get(string) (any, error) {
	return nil, fmt.Errorf("global context entry %q: %w", string(e), errGlobalContextOffline)
}
func (offlineEntry) Stop() {}

// openAPIDocs serves the OpenAPI v3 documents truce sent, by server path
// ("api/v1", "apis/apps/v1"), each gzipped JSON.
type openAPIDocs map[string][]byte

func (d openAPIDocs) Paths() (map[string]openapi.GroupVersion, error) {
	out := make(map[string]openapi.GroupVersion, len(d))
	for p, gz := range d {
		out[p] = openAPIDoc{path: p, gz: gz}
	}
	return out, nil
}

type openAPIDoc struct {
	path string
	gz   []byte
}

func (d openAPIDoc) Schema(contentType string) ([]byte, error) {
	if !strings.Contains(contentType, "json") {
		return nil, fmt.Errorf("OpenAPI document %s: only JSON is served, not %s", d.path, contentType)
	}
	zr, err := gzip.NewReader(bytes.NewReader(d.gz))
	if err != nil {
		return nil, fmt.Errorf("OpenAPI document %s: %w", d.path, err)
	}
	return io.ReadAll(zr)
}

func (d openAPIDoc) ServerRelativeURL() string { return "/openapi/v3/" + d.path }
