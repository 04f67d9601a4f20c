package apiserver

import (
	"fmt"
	"net/url"
	"sort"
	"sync"
)

// ServiceEndpoints resolves the services of service-backed webhooks to URLs
// on loopback, for kube-apiserver (installed as its service resolver, see
// Start) exactly as truce's --webhook-endpoint NAMESPACE/SERVICE=URL does.
//
// Why not a Service plus an EndpointSlice: kube-apiserver resolves a
// webhook's service either to the service's clusterIP (the default; nothing
// listens on 10.0.0.0/16 here) or, with --enable-aggregator-routing, to an
// endpoint of the service; and EndpointSlice (and Endpoints) validation
// rejects loopback addresses, while the webhook server listens on 127.0.0.1
// only. So the harness uses kube-apiserver's own test hook
// (app.SetServiceResolverForTests) with this registry. The TLS server name
// stays SERVICE.NAMESPACE.svc, as with a real service.
//
// Services not in the registry do not resolve: the webhook call fails as it
// does for a service without ready endpoints, and its failurePolicy decides.
type ServiceEndpoints struct {
	mu sync.Mutex
	m  map[string]*url.URL
}

// WebhookServices is the registry the shared servers (and localcluster) use.
var WebhookServices = &ServiceEndpoints{}

// Set makes NAMESPACE/SERVICE resolve to rawURL (https://HOST:PORT).
func (s *ServiceEndpoints) Set(namespace, service, rawURL string) error {
	u, err := url.Parse(rawURL)
	if err != nil {
		return err
	}
	if u.Scheme != "https" || u.Host == "" {
		return fmt.Errorf("webhook endpoint %q: want https://HOST:PORT", rawURL)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m == nil {
		s.m = map[string]*url.URL{}
	}
	s.m[namespace+"/"+service] = u
	return nil
}

// Delete removes NAMESPACE/SERVICE.
func (s *ServiceEndpoints) Delete(namespace, service string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, namespace+"/"+service)
}

// Flags returns truce's --webhook-endpoint flags for the registry, sorted.
func (s *ServiceEndpoints) Flags() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, u := range s.m {
		out = append(out, "--webhook-endpoint="+k+"="+u.String())
	}
	sort.Strings(out)
	return out
}

// ResolveEndpoint implements k8s.io/apiserver/pkg/util/webhook.ServiceResolver.
// The port is ignored: a registered service is served at its URL whatever
// port the webhook names (as truce's --webhook-endpoint).
func (s *ServiceEndpoints) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if u, ok := s.m[namespace+"/"+name]; ok {
		c := *u
		return &c, nil
	}
	return nil, fmt.Errorf("service %s/%s has no endpoint (truce-e2e: not registered)", namespace, name)
}
