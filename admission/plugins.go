package admission

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/util/sets"
	k8sadmission "k8s.io/apiserver/pkg/admission"
	"k8s.io/apiserver/pkg/admission/initializer"
	"k8s.io/apiserver/pkg/admission/plugin/namespace/lifecycle"
	"k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	"k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	webhookinit "k8s.io/apiserver/pkg/admission/plugin/webhook/initializer"
	mutatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	validatingwebhook "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	utilfeature "k8s.io/apiserver/pkg/util/feature"
	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	basecompatibility "k8s.io/component-base/compatibility"
	controlplaneadmission "k8s.io/kubernetes/pkg/controlplane/apiserver/admission"
	kubeadmission "k8s.io/kubernetes/pkg/kubeapiserver/admission"
	"k8s.io/kubernetes/pkg/kubeapiserver/admission/exclusion"
	kubeoptions "k8s.io/kubernetes/pkg/kubeapiserver/options"
	quotainstall "k8s.io/kubernetes/pkg/quota/v1/install"

	"github.com/truce-dev/truce/schema"
)

// DefaultPlugins returns the admission plugins a kube-apiserver 1.37.2 enables
// when started without --enable-admission-plugins, in the order it runs them.
func DefaultPlugins() []string {
	off := kubeoptions.DefaultOffAdmissionPlugins()
	var out []string
	for _, name := range kubeoptions.AllOrderedPlugins {
		if !off.Has(name) {
			out = append(out, name)
		}
	}
	return out
}

// enabledPlugins applies --enable/--disable-admission-plugins to the
// defaults, keeping the server's fixed order.
func enabledPlugins(enable, disable []string) ([]string, error) {
	known := sets.New(kubeoptions.AllOrderedPlugins...)
	for _, n := range append(slices.Clone(enable), disable...) {
		if !known.Has(n) {
			return nil, fmt.Errorf("unknown admission plugin %q", n)
		}
	}
	on := sets.New(DefaultPlugins()...).Insert(enable...).Delete(disable...)
	var out []string
	for _, name := range kubeoptions.AllOrderedPlugins {
		if on.Has(name) {
			out = append(out, name)
		}
	}
	return out, nil
}

type pluginDeps struct {
	client          kubernetes.Interface
	dynamicClient   dynamic.Interface
	informers       informers.SharedInformerFactory
	authorizer      authorizer.Authorizer
	registry        *schema.Registry
	serviceResolver webhook.ServiceResolver
	authInfo        webhook.AuthenticationInfoResolverWrapper
	stopCh          <-chan struct{}
	decorator       k8sadmission.Decorator
	// cache, when set, holds compiled policies shared with other chains;
	// without it the chain compiles into a cache of its own.
	cache *Cache
	// sources learns when the policy plugins have compiled their
	// policies.
	sources *policySources
	// celEnv is the chain's celEnvironment(), part of the cache's keys.
	celEnv string
}

// newPluginChain builds the admission chain the way kube-apiserver does
// (pkg/controlplane/apiserver.CreateConfig and AdmissionOptions.ApplyTo): the
// same registered plugins, initializers and reinvocation wrapper.
func newPluginChain(names []string, d pluginDeps) (k8sadmission.Interface, error) {
	// Every chain builds the policy plugins through truce's constructors,
	// cache or not. Upstream's own constructors give the
	// MutatingAdmissionPolicy dispatcher a type converter manager that
	// knows no schema until its background poll of /openapi/v3 has run
	// once. Until then it answers every write to a mutated kind with a 503
	// ("Resource kind … not found"). kube-apiserver serves nothing that
	// early, but a chain admits at once, and under CPU load the poll had
	// not run yet.
	cache := d.cache
	if cache == nil {
		cache = NewCache(0)
	}
	plugins := cachingPlugins(cache, d.sources, d.registry, d.celEnv)

	quotaConfig, err := quotainstall.NewQuotaConfigurationForAdmission(d.informers, nil)
	if err != nil {
		return nil, fmt.Errorf("configuring ResourceQuota admission: %w", err)
	}
	// The CEL environment and feature defaults follow the emulated version.
	effective := basecompatibility.NewEffectiveVersionFromString(KubernetesVersion, "", "")
	inits := k8sadmission.PluginInitializers{
		initializer.NewAPIServerIDInitializer("truce"),
		initializer.New(d.client, d.dynamicClient, d.informers, d.authorizer, utilfeature.DefaultFeatureGate,
			effective, d.stopCh, d.registry.RESTMapper()),
		webhookinit.NewPluginInitializer(d.authInfo, d.serviceResolver),
		controlplaneadmission.NewPluginInitializer(quotaConfig, exclusion.Excluded()),
		kubeadmission.NewPluginInitializer(),
	}
	chain, err := plugins.NewFromPlugins(names, emptyConfig{}, inits, d.decorator)
	if err != nil {
		return nil, fmt.Errorf("initialising admission plugins %s: %w", strings.Join(names, ","), err)
	}
	return chain, nil
}

// cachingPlugins registers the plugins kube-apiserver registers
// (genericoptions.NewAdmissionOptions, then kubeoptions'), with the two
// policy plugins compiling through cache (env is celEnvironment()).
func cachingPlugins(cache *Cache, sources *policySources, registry *schema.Registry, env string) *k8sadmission.Plugins {
	plugins := k8sadmission.NewPlugins()
	lifecycle.Register(plugins)
	validatingwebhook.Register(plugins)
	mutatingwebhook.Register(plugins)
	plugins.Register(validating.PluginName, func(config io.Reader) (k8sadmission.Interface, error) {
		return newValidatingPolicyPlugin(cache, sources, env, config)
	})
	plugins.Register(mutating.PluginName, func(config io.Reader) (k8sadmission.Interface, error) {
		return newMutatingPolicyPlugin(cache, sources, registry, env, config)
	})
	kubeoptions.RegisterAllAdmissionPlugins(plugins)
	return plugins
}

type emptyConfig struct{}

func (emptyConfig) ConfigFor(string) (io.Reader, error) { return nil, nil }

// KubernetesVersion is the kube-apiserver release whose behaviour truce
// reproduces.
const KubernetesVersion = "1.37.2"

const kubernetesMajor, kubernetesMinor = 1, 37
