package admission

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	auditinternal "k8s.io/apiserver/pkg/apis/audit"
	"k8s.io/apiserver/pkg/audit"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/apiserver/pkg/authorization/union"
	"k8s.io/apiserver/pkg/endpoints/handlers/responsewriters"
	genericapirequest "k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/apiserver/pkg/warning"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	listersv1 "k8s.io/client-go/listers/core/v1"
	rbacauthorizer "k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"

	"github.com/truce-dev/truce/admission/builtin"
	"github.com/truce-dev/truce/schema"
)

// Options configure a Chain like kube-apiserver's flags configure the server.
type Options struct {
	// EnablePlugins and DisablePlugins mirror --enable-admission-plugins
	// and --disable-admission-plugins.
	EnablePlugins, DisablePlugins []string
	// WebhookEndpoints resolves service-backed webhooks.
	WebhookEndpoints WebhookEndpoints
	// CallURLWebhooks allows calling webhooks configured with a URL.
	CallURLWebhooks bool
	// InProcessWebhooks serve services' webhooks inside the process; they
	// take precedence over WebhookEndpoints.
	InProcessWebhooks InProcessWebhooks
	// Engines are the policy engines truce runs itself; each is installed
	// into the state when the chain is built.
	Engines []PolicyEngine
	// FieldValidation is Strict (kubectl's default), Warn (the server's
	// default for clients that do not say) or Ignore.
	FieldValidation string
	// ServiceClusterIPRange mirrors --service-cluster-ip-range; a dry run
	// answers with its network address as a Service's ClusterIP.
	ServiceClusterIPRange string
	// StateFieldManager names the manager that objects of the state
	// without managedFields are taken to have been created by: their
	// fields are recorded as that manager's create, as the server records
	// every write, so that a later update of them carries the stored
	// entries updated for its writer. Empty leaves such objects without
	// entries, like objects stored before the server tracked fields: the
	// server then records none on their updates either.
	StateFieldManager string
	// Cache, when set, keeps compiled admission policies for every chain
	// given the same cache, so that a policy is compiled once per process
	// run instead of once per chain. Results do not change.
	Cache *Cache
	// NoMemo makes the chain admit every write afresh instead of
	// answering a write it admitted before against the same state with
	// the result it remembered (memo.go); results do not change. Tests
	// compare both.
	NoMemo bool
}

// Chain is kube-apiserver's write path for one cluster configuration:
// decoding and defaulting, authorization, mutating admission with
// reinvocation, the resource's registry strategy (validation), and
// validating admission. Build it once per configuration; Admit is cheap.
type Chain struct {
	opts     Options
	registry *schema.Registry
	state    *State
	plugins  k8sadmission.Interface
	// admit is plugins wrapped by the audit handler, as the create and
	// update handlers wrap them: annotations reach the request's audit
	// context.
	admit     k8sadmission.Interface
	decorator *attributionDecorator
	authz     authorizer.Authorizer
	objects   *objectInterfaces
	cancel    context.CancelFunc

	crMu             sync.Mutex
	customResources  map[k8sschema.GroupVersionResource]*customResource
	fmMu             sync.Mutex
	fieldManagers    map[k8sschema.GroupVersionResource]*managedfields.FieldManager
	configStrategies map[k8sschema.GroupResource]builtin.Strategy
	mutatingPolicies *mutatingPolicies
	// services is the upstream Service registry, for its allocation hooks.
	services *builtin.ServiceStore
	// client is the plugins' loopback client; PutNamespace writes to it
	// and waits until the plugins' namespace lister has seen the write.
	client     *clientset
	namespaces listersv1.NamespaceLister
	// mirror keeps the plugins' clients equal to the state after commits.
	mirror *mirror
	// memo remembers results of writes admitted against the same state.
	memo *memo
	// engineWatches are kinds the installed engines read (Installation.Watches).
	engineWatches map[k8sschema.GroupKind]bool
	// celEnv is celEnvironment() when the chain was built: the feature
	// gates do not change under a chain, and reading them all for every
	// policy stored was a tenth of building a chain.
	celEnv string
}

// NewChain compiles the admission configuration in state. The chain keeps
// background informers; Close releases them.
func NewChain(ctx context.Context, state *State, opts Options) (*Chain, error) {
	if opts.FieldValidation == "" {
		opts.FieldValidation = metav1.FieldValidationStrict
	}
	if opts.ServiceClusterIPRange == "" {
		opts.ServiceClusterIPRange = builtin.DefaultServiceClusterIPRange
	}
	hooks, watches, err := installEngines(ctx, opts.Engines, state, opts.InProcessWebhooks)
	if err != nil {
		return nil, err
	}
	services, err := builtin.NewServiceStore(opts.ServiceClusterIPRange, state.Objects())
	if err != nil {
		return nil, err
	}
	names, err := enabledPlugins(opts.EnablePlugins, opts.DisablePlugins)
	if err != nil {
		return nil, err
	}
	reg, err := schema.NewRegistry()
	if err != nil {
		return nil, err
	}
	if opts.Cache != nil {
		reg.ShareConverters(opts.Cache)
	}
	crds, err := state.CRDs()
	if err != nil {
		return nil, err
	}
	for _, crd := range crds {
		if err := reg.AddCRD(crd); err != nil {
			return nil, fmt.Errorf("registering CRD %s: %w", crd.Name, err)
		}
	}

	c := &Chain{
		opts:     opts,
		registry: reg,
		state:    state,
		services: services,
		memo:     newMemo(state, names, opts),

		engineWatches: watches,
		celEnv:        celEnvironment(),

		customResources: map[k8sschema.GroupVersionResource]*customResource{},
		fieldManagers:   map[k8sschema.GroupVersionResource]*managedfields.FieldManager{},
	}
	c.configStrategies = configStrategies(reg, writerAuthorizer{c}, state)
	for gr, kind := range map[k8sschema.GroupResource]string{
		{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}: "ValidatingAdmissionPolicy",
		{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"}:   "MutatingAdmissionPolicy",
	} {
		c.configStrategies[gr] = validatedPolicies(c.configStrategies[gr], kind, c)
	}
	c.objects = &objectInterfaces{registry: reg, structural: c.structuralSchema}
	// The plugins must see the state as the server stores it.
	if err := c.storeState(ctx); err != nil {
		return nil, err
	}
	c.services.Stored()

	typed, all, err := clientObjects(state, reg)
	if err != nil {
		return nil, err
	}
	client := newClientset(reg, typed...)
	c.client = client
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds(reg), all...)
	c.mirror = newMirror(reg, client.Clientset, dyn)
	factory := informers.NewSharedInformerFactory(client, 0)

	// --authorization-mode=RBAC: system:masters first, then RBAC, combined
	// by the server's own union authorizer.
	authz, err := union.New(
		union.NamedAuthorizer{AuthorizerName: "privileged", Authorizer: authorizerfactory.NewPrivilegedGroups(user.SystemPrivilegedGroup)},
		union.NamedAuthorizer{AuthorizerName: "rbac", Authorizer: rbacauthorizer.New(
			&rbacauthorizer.RoleGetter{Lister: factory.Rbac().V1().Roles().Lister()},
			&rbacauthorizer.RoleBindingLister{Lister: factory.Rbac().V1().RoleBindings().Lister()},
			&rbacauthorizer.ClusterRoleGetter{Lister: factory.Rbac().V1().ClusterRoles().Lister()},
			&rbacauthorizer.ClusterRoleBindingLister{Lister: factory.Rbac().V1().ClusterRoleBindings().Lister()},
		)},
	)
	if err != nil {
		return nil, fmt.Errorf("building the authorizer: %w", err)
	}

	local, err := startInProcess(hooks)
	if err != nil {
		return nil, err
	}
	runCtx, cancelRun := context.WithCancel(context.WithoutCancel(ctx))
	cancel := func() { cancelRun(); local.close() }
	dec := &attributionDecorator{}
	sources := &policySources{}
	// Upstream's InitPlugin calls ValidateInitialization, where the policy
	// plugins start their sources, which wait for their informers by
	// polling every 100 ms: started and synced before the plugins are
	// built, they find them synced at once.
	preparePolicyInformers(factory, names)
	if _, err := startInformers(ctx, runCtx, factory); err != nil {
		cancel()
		return nil, err
	}
	plugins, err := newPluginChain(names, pluginDeps{
		client:          client,
		dynamicClient:   dyn,
		informers:       factory,
		authorizer:      authz,
		registry:        reg,
		serviceResolver: serviceResolver{endpoints: opts.WebhookEndpoints, local: local},
		authInfo:        authInfoWrapper(opts.CallURLWebhooks, local),
		stopCh:          runCtx.Done(),
		decorator:       dec,
		cache:           opts.Cache,
		sources:         sources,
		celEnv:          c.celEnv,
	})
	if err != nil {
		cancel()
		return nil, err
	}
	if v, ok := plugins.(k8sadmission.InitializationValidator); ok {
		if err := v.ValidateInitialization(); err != nil {
			cancel()
			return nil, fmt.Errorf("validating admission plugin initialization: %w", err)
		}
	}
	synced, err := startInformers(ctx, runCtx, factory)
	if err != nil {
		cancel()
		return nil, err
	}
	if err := c.mirror.watch(factory, synced); err != nil {
		cancel()
		return nil, err
	}
	if err := sources.wait(ctx); err != nil {
		cancel()
		return nil, err
	}
	if err := c.mirror.delivered(ctx); err != nil {
		cancel()
		return nil, err
	}
	if !dec.waitForReady() {
		cancel()
		return nil, errors.New("admission plugins did not become ready (policies or webhook configurations failed to load)")
	}
	c.plugins = plugins
	c.admit = k8sadmission.WithAudit(plugins)
	c.decorator = dec
	c.authz = authz
	c.cancel = cancel
	c.namespaces = factory.Core().V1().Namespaces().Lister()
	if c.mutatingPolicies, err = newMutatingPolicies(state, c.namespaces, client); err != nil {
		c.Close()
		return nil, err
	}
	c.admitState(ctx)
	c.memo.reset(c)
	return c, nil
}

// Close stops the chain's informers.
func (c *Chain) Close() { c.cancel() }

// Registry returns the type information of the chain's cluster.
func (c *Chain) Registry() *schema.Registry { return c.registry }

// Admit runs one write through the chain. An error is returned only when
// the write cannot be evaluated at all; rejections are results.
func (c *Chain) Admit(ctx context.Context, req Request) (res *Result, err error) {
	if err := c.mirror.settle(ctx); err != nil {
		return nil, err
	}
	in := req.Object
	gvk := in.GroupVersionKind()
	res = &Result{
		Source:     req.Source,
		APIVersion: in.GetAPIVersion(),
		Kind:       in.GetKind(),
		Name:       in.GetName(),
		Warnings:   []string{},
		Changes:    []Change{},
	}
	resource, err := c.registry.ForKind(gvk)
	if err != nil {
		return nil, err
	}
	res.Namespace = objectNamespace(resource, in.GetNamespace())
	namespace := res.Namespace
	if gvk.Kind == "Namespace" && gvk.Group == "" {
		// The server puts a namespace's own name into the request namespace.
		namespace = in.GetName()
	}

	existing, exists := c.stored(resource, in)
	var prior *unstructured.Unstructured
	if exists {
		prior = existing
	}
	key, remember := c.memo.key(req, gvk.GroupKind(), prior)
	if remember {
		if r, ok := c.memo.get(key, req.Source); ok {
			return r, nil
		}
		defer func() {
			if err == nil {
				c.memo.put(key, res)
			}
		}()
	}
	op := k8sadmission.Create
	res.Operation = Create
	if exists || req.PatchType != "" {
		// A patch (other than apply) only updates: of a missing object it
		// is a 404 before admission.
		op = k8sadmission.Update
		res.Operation = Update
	}

	rec := &recorder{}
	userInfo := c.userInfo(req)
	verb := verbFor(op)
	if req.Apply || req.PatchType != "" {
		// Every PATCH is authorized as one, whatever it turns into.
		verb = "patch"
	}
	ctx, warnings, err := requestScope(ctx, rec, resource, verb, namespace, in.GetName(), userInfo)
	if err != nil {
		return nil, err
	}

	stored, status := c.write(ctx, writeRequest{
		resource: resource, in: in, existing: existing, op: op, verb: verb, namespace: namespace,
		userInfo: userInfo, rec: rec, fieldValidation: c.opts.FieldValidation,
		fieldManager: req.FieldManager, apply: req.Apply, force: req.Force, dryRun: !req.Persist,
		patchType: req.PatchType, patch: req.Patch,
	})
	res.Warnings = append(res.Warnings, warnings.list()...)
	rec.annotations = audit.AuditContextFrom(ctx).GetEventAnnotations()
	res.AuditAnnotations = rec.annotations
	if res.AuditAnnotations == nil {
		res.AuditAnnotations = map[string]string{}
	}
	res.Unpredictable = append(webhookNames(c.state, rec.unpredictable), engineUnpredictable(res.AuditAnnotations)...)
	if status != nil {
		res.Allowed = false
		res.Code = status.Code
		res.Reason = string(status.Reason)
		res.Message = status.Message
		res.Details = status.Details
		return res, nil
	}
	res.Allowed = true
	res.Object = stored.Object
	if changes, err := c.changes(rec, resource); err != nil {
		return nil, err
	} else if changes != nil {
		res.Changes = changes
	}
	if !c.modelled(resource) {
		res.Notes = append(res.Notes, fmt.Sprintf("%s: only metadata is validated; the server also validates the spec", resource.GVR.GroupResource()))
	}
	return res, nil
}

// Operation says whether a write of obj is a CREATE or an UPDATE (the state
// holds an object of its kind, namespace and name).
func (c *Chain) Operation(obj *unstructured.Unstructured) (Operation, error) {
	resource, err := c.registry.ForKind(obj.GroupVersionKind())
	if err != nil {
		return "", err
	}
	if _, ok := c.stored(resource, obj); ok {
		return Update, nil
	}
	return Create, nil
}

// stored returns the object of the state a write of obj replaces.
func (c *Chain) stored(r *schema.Resource, obj *unstructured.Unstructured) (*unstructured.Unstructured, bool) {
	return c.state.Get(obj.GroupVersionKind().GroupKind(), objectNamespace(r, obj.GetNamespace()), obj.GetName())
}

// Commit records an admitted result as the stored state, so that later
// writes see it (an UPDATE instead of a CREATE, a namespace that exists). It
// reports whether the object changes how admission behaves in a way only a
// chain built again from the state reproduces (policies, bindings, webhook
// configurations, CRDs, params...); other objects, namespaces and RBAC
// included, reach the plugins' informers, and the next admission waits
// until they have them.
func (c *Chain) Commit(r *Result) (reconfigure bool, err error) {
	if !r.Allowed || r.Object == nil {
		return false, nil
	}
	u := &unstructured.Unstructured{Object: r.Object}
	if r.Stored != nil {
		u = &unstructured.Unstructured{Object: r.Stored}
	}
	gvk := u.GroupVersionKind()
	prev, _ := c.state.Get(gvk.GroupKind(), u.GetNamespace(), u.GetName())
	isNamespace := gvk.GroupKind() == namespaceKind
	_, hadAccount := c.state.Get(serviceAccountKind, u.GetName(), "default")
	// The memo's digest follows what this commit stores, at every return.
	written := []objectKey{keyOf(u)}
	if isNamespace {
		written = append(written, objectKey{Kind: serviceAccountKind.Kind, Namespace: u.GetName(), Name: "default"})
	}
	defer c.memo.refresh(c, written...)
	if err := c.state.Put(u); err != nil {
		return false, err
	}
	if c.rebuilds(gvk) || c.mirror.full() {
		return true, nil
	}
	if c.inert(gvk) && (prev == nil || prev.GroupVersionKind() == gvk) {
		// Nothing reads it through the plugins' clients (no informer holds
		// its kind): a copy there, typed and unstructured, would only be
		// memory. A chain built again from the state holds it.
		return false, nil
	}
	stored, _ := c.state.Get(gvk.GroupKind(), u.GetNamespace(), u.GetName())
	// A rebuild reports what the clients cannot hold, as it always has.
	if err := c.mirror.put(prev, stored); err != nil {
		return true, nil
	}
	if isNamespace && !hadAccount {
		// The state gave the new namespace its "default" ServiceAccount.
		if sa, ok := c.state.Get(serviceAccountKind, u.GetName(), "default"); ok {
			// Stored as a chain built from the state stores it. Nothing
			// here waits: the context only carries the request scope.
			if err := c.storeObject(context.Background(), sa); err != nil {
				return true, nil
			}
			sa, _ = c.state.Get(serviceAccountKind, u.GetName(), "default")
			if err := c.mirror.put(nil, sa); err != nil {
				return true, nil
			}
		}
	}
	return false, nil
}

// Remove deletes a stored object from the state (after AdmitDelete allowed
// its delete). It reports whether the chain must be rebuilt: the delete of
// a configuration kind (a Namespace's takes its contents along), a param or
// a Service (whose addresses the chain allocates) needs a chain built again
// from the state; other objects leave the plugins' clients too.
func (c *Chain) Remove(gk k8sschema.GroupKind, namespace, name string) (reconfigure bool, err error) {
	o, ok := c.state.Get(gk, namespace, name)
	if !ok {
		return false, nil
	}
	c.state.Delete(gk, namespace, name)
	if gk == namespaceKind {
		// Its contents went with it.
		c.memo.reset(c)
	} else {
		c.memo.refresh(c, objectKey{Group: gk.Group, Kind: gk.Kind, Namespace: namespace, Name: name})
	}
	if configurationKinds.Has(gk.Kind) || gk == serviceKind || c.state.isParamKind(o.GroupVersionKind()) || c.configuresEngine(gk) || c.mirror.full() {
		return true, nil
	}
	if err := c.mirror.remove(o); err != nil {
		return true, nil
	}
	return false, nil
}

// inert reports whether admission never reads objects of gvk other than
// the one a write replaces: no plugin holds them in an informer, no policy
// takes them as params, and they configure nothing. Writes of inert
// objects commute with every write of another object.
func (c *Chain) inert(gvk k8sschema.GroupVersionKind) bool {
	gk := gvk.GroupKind()
	return !c.rebuilds(gvk) && !configurationKinds.Has(gvk.Kind) && !mirroredKinds.Has(gk) &&
		gk != serviceKind && !c.mirror.watched(gvk)
}

// rebuilds reports whether a write of gvk changes what the chain compiled
// from the state.
func (c *Chain) rebuilds(gvk k8sschema.GroupVersionKind) bool {
	if c.state.isParamKind(gvk) || c.configuresEngine(gvk.GroupKind()) {
		return true
	}
	if mirroredKinds.Has(gvk.GroupKind()) {
		return false
	}
	return configurationKinds.Has(gvk.Kind)
}

var (
	namespaceKind      = k8sschema.GroupKind{Kind: "Namespace"}
	serviceAccountKind = k8sschema.GroupKind{Kind: "ServiceAccount"}
	serviceKind        = k8sschema.GroupKind{Kind: "Service"}
)

// State returns the cluster state the chain admits against.
func (c *Chain) State() *State { return c.state }

func verbFor(op k8sadmission.Operation) string {
	switch op {
	case k8sadmission.Update:
		return "update"
	case k8sadmission.Delete:
		return "delete"
	}
	return "create"
}

func (c *Chain) userInfo(req Request) user.Info {
	if req.User == "" {
		return &user.DefaultInfo{Name: "system:admin", Groups: []string{user.SystemPrivilegedGroup, user.AllAuthenticated}}
	}
	groups := append([]string{}, req.Groups...)
	if !slices.Contains(groups, user.AllAuthenticated) {
		groups = append(groups, user.AllAuthenticated)
	}
	return &user.DefaultInfo{Name: req.User, Groups: groups}
}

// authorize answers like the server's authorization filter: 403 before any
// admission runs.
func (c *Chain) authorize(ctx context.Context, resource *schema.Resource, verb, subresource, namespace, name string, u user.Info) *metav1.Status {
	attrs := authorizer.AttributesRecord{
		User:            u,
		Verb:            verb,
		Namespace:       namespace,
		APIGroup:        resource.GVR.Group,
		APIVersion:      resource.GVR.Version,
		Resource:        resource.GVR.Resource,
		Subresource:     subresource,
		Name:            name,
		ResourceRequest: true,
	}
	if verb == "create" && subresource == "" {
		// The name of a create is not part of its URL.
		attrs.Name = ""
	}
	decision, reason, err := c.authz.Authorize(ctx, attrs)
	if decision == authorizer.DecisionAllow {
		return nil
	}
	if err != nil {
		return responsewriters.ErrorToAPIStatus(apierrors.NewInternalError(err))
	}
	s := responsewriters.ForbiddenStatusError(attrs, reason).Status()
	return &s
}

// warningRecorder collects warnings like the server's response headers:
// deduplicated, in order.
type warningRecorder struct {
	seen  map[string]bool
	items []string
}

func (w *warningRecorder) AddWarning(agent, text string) {
	if text == "" {
		return
	}
	if w.seen == nil {
		w.seen = map[string]bool{}
	}
	if w.seen[text] {
		return
	}
	w.seen[text] = true
	w.items = append(w.items, text)
}

func (w *warningRecorder) list() []string { return append([]string{}, w.items...) }

// clientObjects converts the state into typed objects for the fake
// clientset (built-in kinds client-go knows) and unstructured ones for the
// dynamic client (everything, so params of any kind resolve).
func clientObjects(state *State, reg *schema.Registry) (typed, all []runtime.Object, err error) {
	for _, o := range state.Objects() {
		t, u, err := clientObject(o, reg)
		if err != nil {
			return nil, nil, err
		}
		all = append(all, u)
		if t != nil {
			typed = append(typed, t)
		}
	}
	return typed, all, nil
}

// clientObject is o as the clients hold it: unstructured for the dynamic
// client, and typed for the clientset when client-go knows its kind (nil
// otherwise).
func clientObject(o *unstructured.Unstructured, reg *schema.Registry) (runtime.Object, *unstructured.Unstructured, error) {
	u := o.DeepCopy()
	gvk := u.GroupVersionKind()
	res, err := reg.ForKind(gvk)
	if err != nil {
		return nil, nil, fmt.Errorf("cluster object %s %s: %w", gvk.Kind, u.GetName(), err)
	}
	u.SetNamespace(objectNamespace(res, u.GetNamespace()))
	if res.CRD != nil || !clientTypes().Recognizes(gvk) {
		return nil, u, nil
	}
	t, err := clientTypes().New(gvk)
	if err != nil {
		return nil, nil, err
	}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, t); err != nil {
		return nil, nil, fmt.Errorf("cluster object %s %s/%s: %w", gvk.Kind, u.GetNamespace(), u.GetName(), err)
	}
	return t, u, nil
}

// clientTypes is the scheme of client-go's fake clientset, which holds the
// state's built-in objects: client-go's registration alone, not
// client-go's shared scheme, where other libraries add kinds (Helm adds
// CustomResourceDefinition) the fake clientset cannot hold.
var clientTypes = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := fake.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("client-go's fake scheme: %v", err))
	}
	return s
})

func listKinds(reg *schema.Registry) map[k8sschema.GroupVersionResource]string {
	out := map[k8sschema.GroupVersionResource]string{}
	for _, r := range reg.Resources() {
		out[r.GVR] = r.Kind + "List"
	}
	return out
}

// newClientset returns a fake clientset holding objs whose discovery knows
// the registry's resources and whose OpenAPI v3 client serves the
// registry's documents, as the MutatingAdmissionPolicy plugin expects.
func newClientset(reg *schema.Registry, objs ...runtime.Object) *clientset {
	return &clientset{Clientset: fake.NewSimpleClientset(objs...), registry: reg}
}

// objectNamespace is the namespace an object of the resource lives in: none
// for cluster-scoped resources, "default" when a namespaced object names
// none (as kubectl sends it).
func objectNamespace(r *schema.Resource, namespace string) string {
	switch {
	case !r.Namespaced:
		return ""
	case namespace == "":
		return metav1.NamespaceDefault
	}
	return namespace
}

// requestContext carries what the server's filters put into a request's
// context before the handler runs: namespace, user and request info.
// requestScope is what the server's filters put around one request: a
// warning recorder, an audit context recording every annotation whatever
// its level, truce's step recorder, and the request info.
func requestScope(ctx context.Context, rec *recorder, r *schema.Resource, verb, namespace, name string, u user.Info) (context.Context, *warningRecorder, error) {
	return requestScopeFor(ctx, rec, r, verb, "", namespace, name, u)
}

// requestScopeFor is requestScope for a request of verb, on a subresource
// when it is not empty.
func requestScopeFor(ctx context.Context, rec *recorder, r *schema.Resource, verb, subresource, namespace, name string, u user.Info) (context.Context, *warningRecorder, error) {
	warnings := &warningRecorder{}
	ctx = warning.WithWarningRecorder(ctx, warnings)
	ctx = audit.WithAuditContext(ctx)
	if err := audit.AuditContextFrom(ctx).Init(audit.RequestAuditConfig{Level: auditinternal.LevelRequestResponse}, nil); err != nil {
		return nil, nil, err
	}
	ctx = withRecorder(ctx, rec)
	return requestContextFor(ctx, r, verb, subresource, namespace, name, u), warnings, nil
}

func requestContext(ctx context.Context, r *schema.Resource, verb, namespace, name string, u user.Info) context.Context {
	return requestContextFor(ctx, r, verb, "", namespace, name, u)
}

func requestContextFor(ctx context.Context, r *schema.Resource, verb, subresource, namespace, name string, u user.Info) context.Context {
	ctx = genericapirequest.WithNamespace(ctx, namespace)
	ctx = genericapirequest.WithUser(ctx, u)
	return genericapirequest.WithRequestInfo(ctx, &genericapirequest.RequestInfo{
		IsResourceRequest: true,
		Verb:              verb,
		APIGroup:          r.GVR.Group,
		APIVersion:        r.GVR.Version,
		Resource:          r.GVR.Resource,
		Subresource:       subresource,
		Namespace:         namespace,
		Name:              name,
	})
}

// Live returns a copy of the stored object a write of obj would change, in
// obj's version, as a client reads it before writing; false when there is
// none.
func (c *Chain) Live(obj *unstructured.Unstructured) (*unstructured.Unstructured, bool, error) {
	resource, err := c.registry.ForKind(obj.GroupVersionKind())
	if err != nil {
		return nil, false, err
	}
	stored, ok := c.stored(resource, obj)
	if !ok {
		return nil, false, nil
	}
	live, err := ConvertTo(stored, obj.GroupVersionKind())
	if err != nil {
		return nil, false, fmt.Errorf("reading %s %s: %w", obj.GetKind(), obj.GetName(), err)
	}
	return live, true, nil
}
