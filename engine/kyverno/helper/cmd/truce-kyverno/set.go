package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/julienschmidt/httprouter"
	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	cleanuppolicyhandlers "github.com/kyverno/kyverno/cmd/cleanup-controller/handlers/admission/policy"
	cleanupresourcehandlers "github.com/kyverno/kyverno/cmd/cleanup-controller/handlers/admission/resource"
	"github.com/kyverno/kyverno/pkg/auth/checker"
	kyvernofake "github.com/kyverno/kyverno/pkg/client/clientset/versioned/fake"
	kyvernoinformers "github.com/kyverno/kyverno/pkg/client/informers/externalversions"
	"github.com/kyverno/kyverno/pkg/clients/dclient"
	"github.com/kyverno/kyverno/pkg/config"
	"github.com/kyverno/kyverno/pkg/engine"
	"github.com/kyverno/kyverno/pkg/engine/adapters"
	engineapi "github.com/kyverno/kyverno/pkg/engine/api"
	"github.com/kyverno/kyverno/pkg/engine/context/resolvers"
	"github.com/kyverno/kyverno/pkg/engine/factories"
	"github.com/kyverno/kyverno/pkg/engine/jmespath"
	"github.com/kyverno/kyverno/pkg/event"
	"github.com/kyverno/kyverno/pkg/exceptions"
	imageverifycache "github.com/kyverno/kyverno/pkg/image/verification/cache"
	"github.com/kyverno/kyverno/pkg/metrics"
	"github.com/kyverno/kyverno/pkg/policycache"
	validationexception "github.com/kyverno/kyverno/pkg/validation/exception"
	"github.com/kyverno/kyverno/pkg/webhooks"
	webhookscelexception "github.com/kyverno/kyverno/pkg/webhooks/celexception"
	webhooksexception "github.com/kyverno/kyverno/pkg/webhooks/exception"
	"github.com/kyverno/kyverno/pkg/webhooks/handlers"
	webhookspolicy "github.com/kyverno/kyverno/pkg/webhooks/policy"
	webhooksresource "github.com/kyverno/kyverno/pkg/webhooks/resource"
	"github.com/kyverno/kyverno/pkg/webhooks/updaterequest"
	admissionv1 "k8s.io/api/admission/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/version"
	"k8s.io/client-go/discovery"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	kubefake "k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/kubernetes/scheme"
	rbacv1listers "k8s.io/client-go/listers/rbac/v1"
	"k8s.io/client-go/openapi"
	clienttesting "k8s.io/client-go/testing"

	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
)

// Kyverno's service account names in a default Helm install (release
// "kyverno" in namespace "kyverno"), which its handlers compare request
// users with.
const (
	backgroundServiceAccount = "system:serviceaccount:kyverno:kyverno-background-controller"
	reportsServiceAccount    = "system:serviceaccount:kyverno:kyverno-reports-controller"
)

// policySet is one loaded configuration of Kyverno: fake clients holding
// its objects, the informers and caches Kyverno's admission server reads,
// and the server's routes.
type policySet struct {
	cancel context.CancelFunc
	mux    http.Handler
	// reverse serves the legacy mutation paths with the policies in the
	// reverse order (order.go), pcache the policies' cache.
	reverse  http.Handler
	pcache   policycache.Cache
	webhooks []json.RawMessage
	warnings []string
}

type sets struct {
	mu   sync.Mutex
	byID map[string]*policySet
}

func newSets() *sets { return &sets{byID: map[string]*policySet{}} }

func (s *sets) load(ctx context.Context, req *protocol.LoadRequest) (string, []json.RawMessage, []string, error) {
	raw, err := json.Marshal(req)
	if err != nil {
		return "", nil, nil, err
	}
	sum := sha256.Sum256(raw)
	id := hex.EncodeToString(sum[:12])
	s.mu.Lock()
	if ps, ok := s.byID[id]; ok {
		s.mu.Unlock()
		return id, ps.webhooks, ps.warnings, nil
	}
	s.mu.Unlock()
	ps, err := buildSet(ctx, req)
	if err != nil {
		return "", nil, nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if prev, ok := s.byID[id]; ok {
		ps.cancel()
		ps = prev
	} else {
		s.byID[id] = ps
	}
	return id, ps.webhooks, ps.warnings, nil
}

func (s *sets) unload(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ps, ok := s.byID[id]; ok {
		ps.cancel()
		delete(s.byID, id)
	}
}

func (s *sets) closeAll() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, ps := range s.byID {
		ps.cancel()
		delete(s.byID, id)
	}
}

// review answers an AdmissionReview and what Kyverno's engines could not
// decide for it offline.
func (s *sets) review(ctx context.Context, req *protocol.ReviewRequest) (json.RawMessage, []string, error) {
	s.mu.Lock()
	ps, ok := s.byID[req.Set]
	s.mu.Unlock()
	if !ok {
		return nil, nil, fmt.Errorf("no policy set %q is loaded", req.Set)
	}
	ctx, u := withUnpredictable(ctx)
	hr := httptest.NewRequestWithContext(ctx, http.MethodPost, req.Path, bytes.NewReader(req.Review))
	hr.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	ps.mux.ServeHTTP(rec, hr)
	if rec.Code != http.StatusOK {
		return nil, nil, fmt.Errorf("kyverno answered %s on %s: %s", http.StatusText(rec.Code), req.Path, bytes.TrimSpace(rec.Body.Bytes()))
	}
	if isLegacyMutation(req.Path) {
		what, err := orderDependence(ctx, ps.reverse, ps.pcache, req.Path, req.Review, rec.Body.Bytes())
		if err != nil {
			return nil, nil, err
		}
		if what != "" {
			record(ctx, what)
		}
	}
	return rec.Body.Bytes(), u.list(), nil
}

// decoded sorts the load request's objects by the client that holds them.
type decoded struct {
	kube    []runtime.Object
	kyverno []runtime.Object
}

var kyvernoScheme = runtime.NewScheme()

func init() {
	_ = kyvernofake.AddToScheme(kyvernoScheme)
}

func decodeObjects(raws []json.RawMessage) (*decoded, error) {
	d := &decoded{}
	for i, raw := range raws {
		var tm metav1.TypeMeta
		if err := json.Unmarshal(raw, &tm); err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		gvk := storedVersion(tm.GroupVersionKind())
		if gvk != tm.GroupVersionKind() {
			var u map[string]any
			if err := json.Unmarshal(raw, &u); err != nil {
				return nil, fmt.Errorf("object %d: %w", i, err)
			}
			u["apiVersion"] = gvk.GroupVersion().String()
			stored, err := json.Marshal(u)
			if err != nil {
				return nil, fmt.Errorf("object %d: %w", i, err)
			}
			raw = stored
		}
		var obj runtime.Object
		var err error
		switch {
		case kyvernoScheme.Recognizes(gvk):
			obj, err = kyvernoScheme.New(gvk)
			if err == nil {
				err = json.Unmarshal(raw, obj)
			}
			if err == nil {
				markReady(obj)
				d.kyverno = append(d.kyverno, obj)
			}
		case scheme.Scheme.Recognizes(gvk):
			obj, err = scheme.Scheme.New(gvk)
			if err == nil {
				err = json.Unmarshal(raw, obj)
			}
			if err == nil {
				d.kube = append(d.kube, obj)
			}
		default:
			err = fmt.Errorf("kind %s is not one Kyverno %s reads", gvk, kyvernoVersion())
		}
		if err != nil {
			return nil, fmt.Errorf("object %d (%s): %w", i, gvk.Kind, err)
		}
	}
	return d, nil
}

// markReady sets a policy's Ready condition, as Kyverno's webhook
// controller does once it has configured the policy's webhooks: only ready
// policies enter the policy cache the admission handlers read.
func markReady(obj runtime.Object) {
	var status *kyvernov1.PolicyStatus
	switch p := obj.(type) {
	case *kyvernov1.ClusterPolicy:
		status = &p.Status
	case *kyvernov1.Policy:
		status = &p.Status
	default:
		return
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{
		Type:               kyvernov1.PolicyConditionReady,
		Status:             metav1.ConditionTrue,
		Reason:             "Succeeded",
		LastTransitionTime: metav1.Now(),
	})
}

func buildSet(parent context.Context, req *protocol.LoadRequest) (ps *policySet, err error) {
	d, err := decodeObjects(req.Objects)
	if err != nil {
		return nil, err
	}
	// The set's informers and controllers live until it is unloaded, not
	// for the request that loaded it.
	ctx, cancel := context.WithCancel(context.WithoutCancel(parent))
	defer func() {
		if err != nil {
			cancel()
		}
	}()
	configuration, err := defaultConfiguration()
	if err != nil {
		return nil, err
	}
	kubeObjs := append(d.kube, kyvernoSystemObjects(req.CABundle)...)
	kubeClient := kubefake.NewClientset(kubeObjs...)
	grantAccessReviews(kubeClient)
	disco := kubeClient.Discovery().(*fakediscovery.FakeDiscovery)
	disco.Resources = req.Resources
	if v, err := serverVersion(req.ServerVersion); err != nil {
		return nil, err
	} else if v != nil {
		disco.FakedServerVersion = v
	}
	// Kyverno generates no apply configurations, so its fake package has no
	// NewClientset.
	kyvernoClient := kyvernofake.NewSimpleClientset(d.kyverno...) //lint:ignore SA1019 the only constructor Kyverno generates
	client, err := dclient.NewClient(ctx, dynamicfake.NewSimpleDynamicClient(runtime.NewScheme()), docsClientset{kubeClient, openAPIDocs(req.OpenAPI)}, time.Hour, false, nil)
	if err != nil {
		return nil, fmt.Errorf("kyverno client: %w", err)
	}

	kubeInformer := kubeinformers.NewSharedInformerFactory(kubeClient, 0)
	kyvernoInformer := kyvernoinformers.NewSharedInformerFactory(kyvernoClient, 0)
	nsLister := kubeInformer.Core().V1().Namespaces().Lister()
	rbLister := kubeInformer.Rbac().V1().RoleBindings().Lister()
	crbLister := kubeInformer.Rbac().V1().ClusterRoleBindings().Lister()
	cpolInformer := kyvernoInformer.Kyverno().V1().ClusterPolicies()
	polInformer := kyvernoInformer.Kyverno().V1().Policies()
	peLister := kyvernoInformer.Kyverno().V2().PolicyExceptions().Lister()
	urLister := kyvernoInformer.Kyverno().V2().UpdateRequests().Lister().UpdateRequests(config.KyvernoNamespace())
	hooks, err := newWebhookBuilder(client, kubeClient, kyvernoClient, kubeInformer, kyvernoInformer, configuration)
	if err != nil {
		return nil, err
	}
	pcache := policycache.NewCache()

	kubeInformer.Start(ctx.Done())
	kyvernoInformer.Start(ctx.Done())
	for t, ok := range kubeInformer.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("syncing the informer of %v", t)
		}
	}
	for t, ok := range kyvernoInformer.WaitForCacheSync(ctx.Done()) {
		if !ok {
			return nil, fmt.Errorf("syncing the informer of %v", t)
		}
	}
	warnings, err := fillPolicyCache(pcache, client, cpolInformer.Lister(), polInformer.Lister())
	if err != nil {
		return nil, fmt.Errorf("filling Kyverno's policy cache: %w", err)
	}

	jp := jmespath.New(configuration)
	// PolicyExceptions are read from every namespace: a repository
	// that carries them runs Kyverno with --enablePolicyException.
	eng, err := newEngine(configuration, jp, client, kubeClient, exceptions.New(peLister))
	if err != nil {
		return nil, err
	}
	newResourceHandlers := func(reverse bool) webhooks.ResourceHandlers {
		h := webhooksresource.NewHandlers(
			eng, client, kyvernoClient, configuration, metrics.NewFakeMetricsConfig(), orderedCache{Cache: pcache, reverse: reverse},
			nsLister, urLister, cpolInformer, polInformer,
			updaterequest.NewFake(), event.NewFake(),
			false, backgroundServiceAccount, reportsServiceAccount, jp, 1, 1,
		)
		return webhooks.ResourceHandlers{
			Mutation:   webhooks.HandlerFunc(h.Mutate),
			Validation: webhooks.HandlerFunc(h.Validate),
		}
	}
	rh := newResourceHandlers(false)
	if cel := sortCEL(d.kyverno); !cel.empty() {
		ch, err := newCELHandlers(cel, configuration, client, kubeClient, kyvernoClient, nsLister, kubeInformer.Core().V1().Secrets().Lister(), req.OpenAPI)
		if err != nil {
			return nil, err
		}
		rh.ValidatingPolicies, rh.NamespacedValidatingPolicies = ch.ValidatingPolicies, ch.NamespacedValidatingPolicies
		rh.MutatingPolicies, rh.NamespacedMutatingPolicies = ch.MutatingPolicies, ch.NamespacedMutatingPolicies
		rh.ImageVerificationPolicies, rh.NamespacedImageVerificationPolicies = ch.ImageVerificationPolicies, ch.NamespacedImageVerificationPolicies
		rh.ImageVerificationPoliciesMutation, rh.NamespacedImageVerificationPoliciesMutation = ch.ImageVerificationPoliciesMutation, ch.NamespacedImageVerificationPoliciesMutation
		warnings = append(warnings, ch.warnings...)
	}
	// The webhooks of Kyverno's own objects refuse a policy or a
	// PolicyException Kyverno cannot run, whatever policies are loaded.
	// Exceptions are enabled in every namespace, as for the engine.
	policies := webhookspolicy.NewHandlers(client, kubeInformer.Core().V1().Secrets().Lister(), backgroundServiceAccount, reportsServiceAccount)
	exceptionOptions := validationexception.ValidationOptions{Enabled: true}
	ov := objectValidators{
		config.PolicyValidatingWebhookServicePath:       webhooks.HandlerFunc(policies.Validate),
		config.ExceptionValidatingWebhookServicePath:    webhooks.HandlerFunc(webhooksexception.NewHandlers(exceptionOptions).Validate),
		config.CELExceptionValidatingWebhookServicePath: webhooks.HandlerFunc(webhookscelexception.NewHandlers(exceptionOptions).Validate),
		// The cleanup controller's, under its Service's prefix; it runs
		// with the chart's RBAC, as the access reviews answer.
		protocol.CleanupServicePrefix + config.CleanupValidatingWebhookServicePath: withoutFailurePolicy(cleanuppolicyhandlers.New(client).Validate),
		protocol.CleanupServicePrefix + config.TtlValidatingWebhookServicePath: withoutFailurePolicy(
			cleanupresourcehandlers.New(checker.NewSelfChecker(kubeClient.AuthorizationV1().SelfSubjectAccessReviews())).Validate),
	}
	mux := newMux(configuration, rh, ov, rbLister, crbLister, client.Discovery())
	reverse := newMux(configuration, newResourceHandlers(true), ov, rbLister, crbLister, client.Discovery())

	configs, err := hooks.build(ctx)
	if err != nil {
		return nil, err
	}
	return &policySet{cancel: cancel, mux: mux, reverse: reverse, pcache: pcache, webhooks: configs, warnings: warnings}, nil
}

// objectValidators are the handlers of the webhooks validating Kyverno's
// own objects, by path.
type objectValidators map[string]webhooks.Handler

// withoutFailurePolicy is a handler of the cleanup controller's server,
// which passes no failure policy, as a webhooks.Handler.
func withoutFailurePolicy(f func(context.Context, logr.Logger, handlers.AdmissionRequest, time.Time) admissionv1.AdmissionResponse) webhooks.Handler {
	return webhooks.HandlerFunc(func(ctx context.Context, logger logr.Logger, request handlers.AdmissionRequest, _ string, startTime time.Time) admissionv1.AdmissionResponse {
		return f(ctx, logger, request, startTime)
	})
}

// newMux routes the resource webhook paths as Kyverno's server does
// (pkg/webhooks/server.go): each failure policy, the fine-grained
// per-policy paths, and the same chain of filters around the handlers;
// and the paths validating Kyverno's own objects, with theirs.
func newMux(configuration config.Configuration, rh webhooks.ResourceHandlers, ov objectValidators, rb rbacv1listers.RoleBindingLister, crb rbacv1listers.ClusterRoleBindingLister, disco dclient.IDiscovery) http.Handler {
	mux := httprouter.New()
	logger := logr.Discard()
	for path, h := range ov {
		mux.HandlerFunc(http.MethodPost, path,
			handlers.FromAdmissionFunc("VALIDATE", func(ctx context.Context, logger logr.Logger, request handlers.AdmissionRequest, startTime time.Time) admissionv1.AdmissionResponse {
				return h.Execute(ctx, logger, request, "", startTime)
			}).
				WithSubResourceFilter().
				WithAdmission(logger).
				ToHandlerFunc("VALIDATE"))
	}
	register := func(base string, h webhooks.Handler, mutate bool) {
		for _, fp := range []string{"all", "ignore", "fail"} {
			handler := handlers.FromAdmissionFunc(base, func(ctx context.Context, logger logr.Logger, request handlers.AdmissionRequest, startTime time.Time) admissionv1.AdmissionResponse {
				return h.Execute(ctx, logger, request, fp, startTime)
			}).
				WithFilter(configuration).
				WithProtection(false).
				WithRoles(rb, crb)
			if mutate {
				handler = handler.WithOperationFilter(admissionv1.Create, admissionv1.Update, admissionv1.Connect)
			}
			hf := handler.WithTopLevelGVK(disco).WithAdmission(logger).ToHandlerFunc(base)
			switch fp {
			case "all":
				mux.HandlerFunc(http.MethodPost, base, hf)
			default:
				mux.HandlerFunc(http.MethodPost, base+"/"+fp, hf)
				mux.HandlerFunc(http.MethodPost, base+"/"+fp+config.FineGrainedWebhookPath+"/*policy", hf)
			}
		}
	}
	register(config.MutatingWebhookServicePath, rh.Mutation, true)
	register(config.ValidatingWebhookServicePath, rh.Validation, false)
	// The CEL policies' paths carry the policies' names; their handlers
	// take no failure policy (the webhook configuration's applies) and
	// filter as pkg/webhooks/server.go does: no operation filter.
	// The ImageValidatingPolicies' mutating paths (digest pinning) filter
	// operations as the resource mutation path does.
	cel := func(path string, h webhooks.Handler, mutate bool) {
		if h == nil {
			return
		}
		handler := handlers.FromAdmissionFunc(path, func(ctx context.Context, logger logr.Logger, request handlers.AdmissionRequest, startTime time.Time) admissionv1.AdmissionResponse {
			return h.Execute(ctx, logger, request, "", startTime)
		}).
			WithFilter(configuration).
			WithProtection(false).
			WithRoles(rb, crb)
		if mutate {
			handler = handler.WithOperationFilter(admissionv1.Create, admissionv1.Update, admissionv1.Connect)
		}
		hf := handler.WithTopLevelGVK(disco).WithAdmission(logger).ToHandlerFunc(path)
		mux.HandlerFunc(http.MethodPost, path+"/*policies", hf)
	}
	cel("/vpol", rh.ValidatingPolicies, false)
	cel("/nvpol", rh.NamespacedValidatingPolicies, false)
	cel("/mpol", rh.MutatingPolicies, false)
	cel("/nmpol", rh.NamespacedMutatingPolicies, false)
	cel("/ivpol/validate", rh.ImageVerificationPolicies, false)
	cel("/nivpol/validate", rh.NamespacedImageVerificationPolicies, false)
	cel("/ivpol/mutate", rh.ImageVerificationPoliciesMutation, true)
	cel("/nivpol/mutate", rh.NamespacedImageVerificationPoliciesMutation, true)
	return mux
}

// newEngine builds Kyverno's engine over the helper's fake clients, as
// Kyverno's controllers build it: registry access offline, image
// verification cache off, context loaded through kubeClient.
func newEngine(configuration config.Configuration, jp jmespath.Interface, client dclient.Interface, kubeClient kubernetes.Interface, exceptionSelector engineapi.PolicyExceptionSelector) (engineapi.Engine, error) {
	cmResolver, err := resolvers.NewClientBasedResolver(kubeClient)
	if err != nil {
		return nil, err
	}
	return recordingEngine{engine.NewEngine(
		configuration,
		jp,
		adapters.Client(client),
		factories.DefaultRegistryClientFactory(adapters.RegistryClient(offlineRegistry{}), nil),
		imageverifycache.DisabledImageVerifyCache(),
		// Global context entries answer an error naming them, never
		// nothing (without a store Kyverno skips the entry silently).
		factories.DefaultContextLoaderFactory(cmResolver, factories.WithGlobalContextStore(offlineGlobalContext{})),
		exceptionSelector,
		nil,
	)}, nil
}

// serverVersion is discovery's version of the API server v ("1.37.2"); nil
// for none (fake discovery's default, which Kyverno cannot compare).
func serverVersion(v string) (*version.Info, error) {
	if v == "" {
		return nil, nil
	}
	parts := strings.SplitN(strings.TrimPrefix(v, "v"), ".", 3)
	if len(parts) < 2 {
		return nil, fmt.Errorf("server version %q is not MAJOR.MINOR.PATCH", v)
	}
	return &version.Info{Major: parts[0], Minor: parts[1], GitVersion: "v" + strings.TrimPrefix(v, "v")}, nil
}

// grantAccessReviews answers every SubjectAccessReview and
// SelfSubjectAccessReview kube creates with allowed: Kyverno's policy
// validation asks whether its controllers may read and write what a policy
// names, and truce assumes its Helm chart's RBAC (with the aggregated roles
// an installation adds) grants it, as it assumes for the background and
// cleanup controllers.
func grantAccessReviews(kube *kubefake.Clientset) {
	allow := func(a clienttesting.Action) (bool, runtime.Object, error) {
		switch o := a.(clienttesting.CreateAction).GetObject().(type) {
		case *authorizationv1.SubjectAccessReview:
			o = o.DeepCopy()
			o.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true}
			return true, o, nil
		case *authorizationv1.SelfSubjectAccessReview:
			o = o.DeepCopy()
			o.Status = authorizationv1.SubjectAccessReviewStatus{Allowed: true}
			return true, o, nil
		}
		return false, nil, nil
	}
	kube.PrependReactor("create", "subjectaccessreviews", allow)
	kube.PrependReactor("create", "selfsubjectaccessreviews", allow)
}

// docsClientset is a fake clientset whose discovery serves the OpenAPI v3
// documents truce sent (fake discovery panics there): Kyverno's policy
// validation type-checks a ClusterPolicy's validate.cel expressions
// against the schemas it reads from discovery.
type docsClientset struct {
	*kubefake.Clientset
	docs openAPIDocs
}

func (c docsClientset) Discovery() discovery.DiscoveryInterface {
	return docsDiscovery{c.Clientset.Discovery().(*fakediscovery.FakeDiscovery), c.docs}
}

type docsDiscovery struct {
	*fakediscovery.FakeDiscovery
	docs openAPIDocs
}

func (d docsDiscovery) OpenAPIV3() openapi.Client { return d.docs }
