package admission

import (
	"context"
	"fmt"
	"net"
	"net/url"

	"k8s.io/apiserver/pkg/util/webhook"
	"k8s.io/client-go/rest"
)

// offlineHost is what services without a --webhook-endpoint resolve to; the
// dialer recognises it and fails the call, which the webhook's failurePolicy
// then handles, and the result reports the webhook as unpredictable.
const offlineHost = "unresolved.truce.invalid:443"

// WebhookEndpoints maps "namespace/service" to the URL that serves it, for
// calling service-backed webhooks from outside the cluster.
type WebhookEndpoints map[string]string

type serviceResolver struct {
	endpoints WebhookEndpoints
	local     *inProcessServers
}

// ResolveEndpoint returns the configured endpoint of a service. The
// webhook's TLS server name stays SERVICE.NAMESPACE.svc, exactly as the API
// server verifies it.
func (s serviceResolver) ResolveEndpoint(namespace, name string, port int32) (*url.URL, error) {
	if s.local.has(namespace + "/" + name) {
		return &url.URL{Scheme: "https", Host: inProcessHost}, nil
	}
	if u, ok := s.endpoints[namespace+"/"+name]; ok {
		parsed, err := url.Parse(u)
		if err != nil {
			return nil, fmt.Errorf("webhook endpoint for %s/%s: %w", namespace, name, err)
		}
		return parsed, nil
	}
	return &url.URL{Scheme: "https", Host: offlineHost}, nil
}

// authInfoWrapper returns the client configuration for webhook calls: plain
// TLS with the webhook's caBundle (added by the upstream client manager) and
// a dialer that refuses what truce must not or cannot reach.
func authInfoWrapper(callURLs bool, local *inProcessServers) webhook.AuthenticationInfoResolverWrapper {
	return func(webhook.AuthenticationInfoResolver) webhook.AuthenticationInfoResolver {
		return authInfo{callURLs: callURLs, local: local}
	}
}

type authInfo struct {
	callURLs bool
	local    *inProcessServers
}

func (a authInfo) ClientConfigFor(hostPort string) (*rest.Config, error) {
	return &rest.Config{Dial: a.dialer(hostPort, a.callURLs)}, nil
}

func (a authInfo) ClientConfigForService(name, namespace string, port int) (*rest.Config, error) {
	if dial := a.local.dialer(namespace + "/" + name); dial != nil {
		return &rest.Config{Dial: dial}, nil
	}
	return &rest.Config{Dial: a.dialer(namespace+"/"+name, true)}, nil
}

func (a authInfo) dialer(target string, allowed bool) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var reason string
		switch {
		case addr == offlineHost:
			reason = fmt.Sprintf("service %s has no endpoint offline (pass --webhook-endpoint %s=https://HOST:PORT)", target, target)
		case !allowed:
			reason = fmt.Sprintf("URL webhooks are not called offline (%s); pass --call-webhooks to call them", target)
		default:
			var d net.Dialer
			return d.DialContext(ctx, network, addr)
		}
		if rec := recorderFrom(ctx); rec != nil {
			rec.addUnpredictable(target)
		}
		return nil, fmt.Errorf("truce: %s", reason)
	}
}
