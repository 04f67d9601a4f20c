package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

const (
	// AdminUser is the user the harness (and the written kubeconfig)
	// authenticates as, through a static token. It is a member of
	// system:masters. A dedicated name, instead of the apiserver's own
	// loopback identity, lets the audit policy record exactly the requests
	// the harness and its users make and nothing the server does internally.
	AdminUser = "truce-e2e-admin"
)

// DefaultDisabledAdmissionPlugins are the plugins the harness switches off
// unless told otherwise. ServiceAccount needs the token and service-account
// controllers, which do not run here (there is no kube-controller-manager):
// without them every Pod create would fail for want of a "default"
// ServiceAccount. truce is run with the same set.
var DefaultDisabledAdmissionPlugins = []string{"ServiceAccount"}

// Server is a running kube-apiserver with its etcd, plus the client-side state
// the helpers keep (discovery cache, audit log reader, objects to clean up).
type Server struct {
	dir             string
	kubeconfig      string
	auditLogPath    string
	logPath         string
	disabledPlugins []string

	config  *rest.Config
	client  kubernetes.Interface
	dynamic dynamic.Interface
	mapper  *restmapper.DeferredDiscoveryRESTMapper

	audit *auditLog

	// stop tears the server and etcd down; set by Start.
	stop func() error
	// startup describes how long Start took, by phase.
	startup string

	mu sync.Mutex
	// impersonating caches one dynamic client per impersonated identity.
	impersonating map[string]dynamic.Interface
	// created lists objects Apply created, so Cleanup can delete them even
	// where a sweep by type would not find them (default namespace,
	// cluster-scoped RBAC, ...).
	created []objectRef
	// originals holds the state of pre-existing objects that Apply
	// overwrote (e.g. labels added to namespace "default"), keyed by
	// objectRef.String(), so Cleanup can put them back.
	originals map[string]*originalObject
	// sentinelGen is the generation of the admission sentinel; see
	// WaitForAdmissionSync.
	sentinelGen int
	// sentinelCRDReady is set once the sentinel CRD is established.
	sentinelCRDReady bool
}

// StartupReport says how long Start took, by phase.
func (s *Server) StartupReport() string { return s.startup }

// Dir is the server's working directory: kubeconfig, audit policy and log,
// component logs and etcd data live here.
func (s *Server) Dir() string { return s.dir }

// Kubeconfig is the path of a kubeconfig file for the admin user.
func (s *Server) Kubeconfig() string { return s.kubeconfig }

// AuditLogPath is the path of the JSON-lines audit log.
func (s *Server) AuditLogPath() string { return s.auditLogPath }

// LogPath is where kube-apiserver's and etcd's own logs go.
func (s *Server) LogPath() string { return s.logPath }

// DisabledAdmissionPlugins is the --disable-admission-plugins set the server
// was started with, sorted.
func (s *Server) DisabledAdmissionPlugins() []string {
	return append([]string(nil), s.disabledPlugins...)
}

// RESTConfig returns a copy of the admin client configuration. Requests made
// with it carry the harness's per-request Audit-ID and warning capture when
// the context asks for them (see DryRunCreate); otherwise it is a plain admin
// config.
func (s *Server) RESTConfig() *rest.Config { return rest.CopyConfig(s.config) }

// Clientset is a typed clientset for the admin user.
func (s *Server) Clientset() kubernetes.Interface { return s.client }

// Dynamic is a dynamic client for the admin user.
func (s *Server) Dynamic() dynamic.Interface { return s.dynamic }

// RESTMapper maps kinds to resources through (cached) discovery. Use
// ResourceFor, which refreshes the cache for kinds that were just added.
func (s *Server) RESTMapper() meta.RESTMapper { return s.mapper }

// Stop shuts kube-apiserver and etcd down and removes the working directory.
func (s *Server) Stop() error {
	if s.stop == nil {
		return nil
	}
	stop := s.stop
	s.stop = nil
	return stop()
}

// Connect wires the client-side helpers to a kube-apiserver that is already
// running (Start does this for the one it starts). base must reach it as a
// member of system:masters; for audit look-ups the server must write the
// audit log to dir/audit.log with AuditPolicy's rules keyed on base's user.
// disabledPlugins is informational. Connect writes dir/kubeconfig; the
// returned Server's Stop does nothing.
func Connect(dir string, base *rest.Config, disabledPlugins []string) (*Server, error) {
	s := &Server{
		dir:             dir,
		kubeconfig:      filepath.Join(dir, "kubeconfig"),
		auditLogPath:    filepath.Join(dir, "audit.log"),
		logPath:         filepath.Join(dir, "apiserver.log"),
		disabledPlugins: sortedCopy(disabledPlugins),
		impersonating:   map[string]dynamic.Interface{},
		originals:       map[string]*originalObject{},
	}
	s.audit = newAuditLog(s.auditLogPath)

	cfg := rest.CopyConfig(base)
	// The harness makes bursts of requests (cleanup sweeps, polling);
	// client-side throttling would only slow the suite down.
	cfg.QPS, cfg.Burst = 1000, 2000
	cfg.UserAgent = "truce-e2e"
	cfg.WarningHandlerWithContext = warningCollector{}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return auditIDRoundTripper{rt} })
	s.config = cfg

	var err error
	if s.client, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if s.dynamic, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	if err := writeKubeconfig(s.kubeconfig, cfg); err != nil {
		return nil, err
	}
	return s, nil
}

// dynamicFor returns the admin dynamic client, or one that impersonates
// user (with groups) when user is set. Impersonation is how cases exercise
// request.userInfo in policies: the admin (system:masters) may impersonate
// anyone, and the server then authorizes and admits the request as that
// user. The server adds "system:authenticated" to an impersonated user's
// groups by itself.
func (s *Server) dynamicFor(user string, groups []string) (dynamic.Interface, error) {
	if user == "" {
		if len(groups) > 0 {
			return nil, fmt.Errorf("groups %v given without a user: impersonation needs a user name", groups)
		}
		return s.dynamic, nil
	}
	key := user + "\x00" + strings.Join(groups, "\x00")
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.impersonating[key]; ok {
		return c, nil
	}
	cfg := rest.CopyConfig(s.config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string(nil), groups...)}
	c, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	s.impersonating[key] = c
	return c, nil
}

// writeKubeconfig writes a kubeconfig that reaches the server the way cfg
// does (bearer token, loopback CA and SNI name).
func writeKubeconfig(path string, cfg *rest.Config) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["truce-e2e"] = &clientcmdapi.Cluster{
		Server:                   cfg.Host,
		CertificateAuthorityData: cfg.TLSClientConfig.CAData,
		TLSServerName:            cfg.TLSClientConfig.ServerName,
	}
	kc.AuthInfos[AdminUser] = &clientcmdapi.AuthInfo{Token: cfg.BearerToken}
	kc.Contexts["truce-e2e"] = &clientcmdapi.Context{Cluster: "truce-e2e", AuthInfo: AdminUser, Namespace: "default"}
	kc.CurrentContext = "truce-e2e"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return clientcmd.WriteToFile(*kc, path)
}

// WriteKubeconfig writes the admin kubeconfig to another path as well (the
// localcluster command uses it for --kubeconfig-out).
func (s *Server) WriteKubeconfig(path string) error { return writeKubeconfig(path, s.config) }

// ResourceFor maps a GroupVersionKind to its resource and scope. Kinds
// served by a CustomResourceDefinition appear in discovery shortly after the
// CRD is Established, so a miss resets the discovery cache and is retried
// until ctx is done.
func (s *Server) ResourceFor(ctx context.Context, gvk schema.GroupVersionKind) (*meta.RESTMapping, error) {
	var mapping *meta.RESTMapping
	err := poll(ctx, discoveryTimeout, func(ctx context.Context) (bool, error) {
		m, err := s.mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err == nil {
			mapping = m
			return true, nil
		}
		if meta.IsNoMatchError(err) {
			s.mapper.Reset()
			return false, nil
		}
		return false, err
	})
	if err != nil {
		return nil, fmt.Errorf("no resource for %s: %w", gvk, err)
	}
	return mapping, nil
}

// IsNamespaced reports whether gvk is a namespaced kind.
func (s *Server) IsNamespaced(ctx context.Context, gvk schema.GroupVersionKind) (bool, error) {
	m, err := s.ResourceFor(ctx, gvk)
	if err != nil {
		return false, err
	}
	return m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

func sortedCopy(in []string) []string {
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}
