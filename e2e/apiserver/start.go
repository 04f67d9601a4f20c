//go:build e2e

package apiserver

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apiserver/pkg/admission/plugin/policy/generic"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/client-go/rest"
	"k8s.io/klog/v2"
	kubeapiserverapp "k8s.io/kubernetes/cmd/kube-apiserver/app"
	kubeapiservertesting "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
)

// loopbackServerName is the SNI name under which kube-apiserver serves its
// self-signed loopback certificate; StartTestServer hands us the CA for that
// certificate, so clients verify the server under this name.
const loopbackServerName = "apiserver-loopback-client"

// Options configure Start.
type Options struct {
	// DisableAdmissionPlugins is passed as --disable-admission-plugins;
	// nil means DefaultDisabledAdmissionPlugins.
	DisableAdmissionPlugins []string
	// ExtraFlags are appended to the kube-apiserver flags (later flags win).
	ExtraFlags []string
	// Dir is the working directory; a new temporary directory (removed by
	// Stop) if empty. A given Dir is kept.
	Dir string
	// LogOutput receives kube-apiserver's and etcd's logs in addition to
	// the log file in Dir; nil means only the file.
	LogOutput io.Writer
	// PolicyRefreshInterval, if set, replaces the 1 s interval at which the
	// admission policy plugins recompile their policy set. It is a
	// process-wide setting of k8s.io/apiserver, read when the server
	// starts; it changes only how soon policies take effect, never what
	// they do. The test suites use 100 ms so each admission sync costs
	// about a tenth of a second instead of a second.
	PolicyRefreshInterval time.Duration
}

// installServiceResolver makes every kube-apiserver of this process resolve
// webhook services through WebhookServices (see ServiceEndpoints). The hook
// is process-wide and may be set only once, so it is never unset.
var installServiceResolver = sync.OnceFunc(func() {
	_ = kubeapiserverapp.SetServiceResolverForTests(WebhookServices)
})

// Flags returns the kube-apiserver flags Start uses (besides the ones
// StartTestServer sets itself: serving on a free port of 127.0.0.1 with
// generated certificates, service-account keys, --service-cluster-ip-range,
// --endpoint-reconciler-type=none, request-header authentication), for
// documentation and for the localcluster command's banner.
func (o Options) Flags(dir string) []string {
	disabled := o.DisableAdmissionPlugins
	if disabled == nil {
		disabled = DefaultDisabledAdmissionPlugins
	}
	flags := []string{
		// StartTestServer leaves authorization at AlwaysAllow; RBAC is
		// what real clusters run and what impersonated users face.
		"--authorization-mode=RBAC",
		"--disable-admission-plugins=" + strings.Join(disabled, ","),
		// What kubeadm, kind and managed clusters run, and truce's
		// default (--allow-privileged): kube-apiserver's own default,
		// false, refuses every privileged container. Kubernetes keeps it
		// process-wide, so truce's chains in this process read it too.
		"--allow-privileged=true",
		// The harness's own identity (see AdminUser).
		"--token-auth-file=" + filepath.Join(dir, "tokens.csv"),
		"--audit-policy-file=" + filepath.Join(dir, "audit-policy.yaml"),
		"--audit-log-path=" + filepath.Join(dir, "audit.log"),
		"--audit-log-format=json",
		// Blocking: the event is written before the request completes,
		// so a test can read it right after its request returns.
		"--audit-log-mode=blocking",
	}
	return append(flags, o.ExtraFlags...)
}

// Start runs etcd and kube-apiserver on loopback, waits until the server is
// healthy and the admission sentinel works, and returns the Server. Call
// Stop to shut both down.
func Start(ctx context.Context, opts Options) (_ *Server, retErr error) {
	started := time.Now()
	dir := opts.Dir
	removeDir := false
	if dir == "" {
		d, err := os.MkdirTemp("", "truce-e2e-")
		if err != nil {
			return nil, err
		}
		dir, removeDir = d, true
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}

	logFile, err := os.OpenFile(filepath.Join(dir, "apiserver.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	var logOut io.Writer = logFile
	if opts.LogOutput != nil {
		logOut = io.MultiWriter(logFile, opts.LogOutput)
	}
	// kube-apiserver logs through the global klog; keep it off the test
	// output (it is very chatty, errors included) and in the log file.
	var klogFlags flag.FlagSet
	klog.InitFlags(&klogFlags)
	for name, value := range map[string]string{"logtostderr": "false", "alsologtostderr": "false", "stderrthreshold": "FATAL"} {
		if err := klogFlags.Set(name, value); err != nil {
			return nil, fmt.Errorf("klog flag %s: %w", name, err)
		}
	}
	klog.SetOutput(logOut)

	var cleanups []func() error
	stop := func() error {
		var errs []error
		for i := len(cleanups) - 1; i >= 0; i-- {
			errs = append(errs, cleanups[i]())
		}
		return errors.Join(errs...)
	}
	defer func() {
		if retErr != nil {
			_ = stop()
		}
	}()
	cleanups = append(cleanups, func() error {
		// klog is process-wide and may still be called by goroutines
		// that outlive the server; do not let it write to a closed file.
		klog.Flush()
		klog.SetOutput(io.Discard)
		return logFile.Close()
	})
	if removeDir {
		cleanups = append(cleanups, func() error { return os.RemoveAll(dir) })
	}

	// A kept Dir may hold etcd data of an earlier run, bootstrapped for
	// other ports; the storage prefix is new every run anyway.
	if err := os.RemoveAll(filepath.Join(dir, "etcd")); err != nil {
		return nil, err
	}
	tEtcd := time.Now()
	etcd, etcdURL, err := startEtcd(filepath.Join(dir, "etcd"), filepath.Join(dir, "etcd.log"))
	if err != nil {
		return nil, err
	}
	cleanups = append(cleanups, func() error {
		etcd.Close()
		return nil
	})

	token, err := randomToken()
	if err != nil {
		return nil, err
	}
	// token,user,uid,"group1,group2"
	tokens := fmt.Sprintf("%s,%s,%s,\"system:masters\"\n", token, AdminUser, AdminUser)
	if err := os.WriteFile(filepath.Join(dir, "tokens.csv"), []byte(tokens), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "audit-policy.yaml"), []byte(AuditPolicy), 0o644); err != nil {
		return nil, err
	}

	if opts.PolicyRefreshInterval > 0 {
		// The returned restore function is deliberately not called: the
		// interval is read once when the policy plugins start, and
		// restoring it would only matter for a later server.
		_ = generic.SetPolicyRefreshIntervalForTests(opts.PolicyRefreshInterval)
	}

	storage := storagebackend.NewDefaultConfig("/registry-"+token[:8], nil)
	storage.Transport.ServerList = []string{etcdURL}

	tb := newProcessTB(dir, logOut)
	cleanups = append(cleanups, tb.runCleanups)
	instance := kubeapiservertesting.NewDefaultTestServerOptions()
	// The invariant checks scrape metrics on teardown to catch bugs in
	// kube-apiserver itself; not our business, and they slow shutdown.
	instance.DisableInvariantChecks = true
	disabled := opts.DisableAdmissionPlugins
	if disabled == nil {
		disabled = DefaultDisabledAdmissionPlugins
	}

	installServiceResolver()
	tAPI := time.Now()
	var ts kubeapiservertesting.TestServer
	if err := tb.capture(func() error {
		var err error
		ts, err = kubeapiservertesting.StartTestServer(tb, instance, opts.Flags(dir), storage)
		return err
	}); err != nil {
		return nil, fmt.Errorf("start kube-apiserver (logs in %s): %w", filepath.Join(dir, "apiserver.log"), err)
	}
	cleanups = append(cleanups, func() error {
		ts.TearDownFn()
		return tb.err()
	})

	base := &rest.Config{
		Host:        ts.ClientConfig.Host,
		BearerToken: token,
		TLSClientConfig: rest.TLSClientConfig{
			CAData:     ts.ClientConfig.TLSClientConfig.CAData,
			ServerName: loopbackServerName,
		},
	}
	s, err := Connect(dir, base, disabled)
	if err != nil {
		return nil, err
	}
	s.stop = stop
	tSentinel := time.Now()
	if err := s.WaitForAdmissionSync(ctx); err != nil {
		return nil, err
	}
	s.startup = fmt.Sprintf("ready in %s (etcd %s, kube-apiserver healthy %s, admission sentinel %s)",
		time.Since(started).Round(time.Millisecond), tAPI.Sub(tEtcd).Round(time.Millisecond),
		tSentinel.Sub(tAPI).Round(time.Millisecond), time.Since(tSentinel).Round(time.Millisecond))
	fmt.Fprintf(logOut, "truce-e2e: kube-apiserver at %s %s\n", base.Host, s.startup)
	return s, nil
}

// startEtcd starts a single-member embedded etcd on loopback and returns it
// with its client URL.
func startEtcd(dataDir, logPath string) (*embed.Etcd, string, error) {
	var lastErr error
	// Free ports are found by binding port 0 and closing the listener;
	// another process can take a port in between, so retry a few times.
	for attempt := 0; attempt < 3; attempt++ {
		ports, err := freePorts(2)
		if err != nil {
			return nil, "", err
		}
		cfg := embed.NewConfig()
		cfg.Name = "truce-e2e"
		cfg.Dir = dataDir
		clientURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[0]))}
		peerURL := url.URL{Scheme: "http", Host: net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{clientURL}, []url.URL{clientURL}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{peerURL}, []url.URL{peerURL}
		cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
		// Throwaway data: durability buys nothing and fsync costs a lot.
		cfg.UnsafeNoFsync = true
		cfg.Logger = "zap"
		cfg.LogLevel = "warn"
		cfg.LogOutputs = []string{logPath}

		e, err := embed.StartEtcd(cfg)
		if err != nil {
			lastErr = err
			_ = os.RemoveAll(dataDir)
			continue
		}
		select {
		case <-e.Server.ReadyNotify():
			return e, clientURL.String(), nil
		case err := <-e.Err():
			e.Close()
			lastErr = err
		case <-time.After(60 * time.Second):
			e.Close()
			lastErr = errors.New("etcd took more than 60s to start")
		}
		_ = os.RemoveAll(dataDir)
	}
	return nil, "", fmt.Errorf("start etcd (log in %s): %w", logPath, lastErr)
}

func freePorts(n int) ([]int, error) {
	var ports []int
	for i := 0; i < n; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func randomToken() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
