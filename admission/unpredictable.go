package admission

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// FailurePolicyDecided reports whether an entry of Result.Unpredictable
// names a webhook that could not be called offline, whose failurePolicy
// then decided (webhookNames), rather than an engine's own account of
// what it could not know (engineUnpredictable).
func FailurePolicyDecided(entry string) bool {
	return strings.HasPrefix(entry, "mutating webhook ") || strings.HasPrefix(entry, "validating webhook ")
}

// webhookNames maps the endpoints truce could not call ("namespace/service"
// or "host:port") to the webhooks configured with them, so a result names
// the webhooks whose answer is unknown.
func webhookNames(state *State, targets []string) []string {
	if len(targets) == 0 {
		return nil
	}
	want := map[string]bool{}
	for _, t := range targets {
		want[t] = true
	}
	seen := map[string]bool{}
	var out []string
	add := func(kind, webhook string, cc admissionregistrationv1.WebhookClientConfig) {
		target := ""
		switch {
		case cc.Service != nil:
			target = cc.Service.Namespace + "/" + cc.Service.Name
		case cc.URL != nil:
			if u, err := url.Parse(*cc.URL); err == nil {
				target = u.Host
				if u.Port() == "" {
					target = net.JoinHostPort(u.Hostname(), "443")
				}
			}
		}
		name := fmt.Sprintf("%s webhook %s (%s)", kind, webhook, target)
		if want[target] && !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	for _, o := range state.Objects() {
		switch o.GetKind() {
		case "MutatingWebhookConfiguration":
			c := &admissionregistrationv1.MutatingWebhookConfiguration{}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, c) == nil {
				for _, w := range c.Webhooks {
					add("mutating", w.Name, w.ClientConfig)
				}
			}
		case "ValidatingWebhookConfiguration":
			c := &admissionregistrationv1.ValidatingWebhookConfiguration{}
			if runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, c) == nil {
				for _, w := range c.Webhooks {
					add("validating", w.Name, w.ClientConfig)
				}
			}
		}
	}
	if len(out) == 0 {
		return append([]string{}, targets...)
	}
	sort.Strings(out)
	return out
}
