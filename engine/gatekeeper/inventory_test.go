package gatekeeper_test

import (
	"context"
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
)

// uniqueHost is a referential template: an Ingress host another Ingress
// in data.inventory already serves is denied.
const uniqueHost = `
---
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: k8suniquehost}
spec:
  crd:
    spec:
      names: {kind: K8sUniqueHost}
  targets:
  - target: admission.k8s.gatekeeper.sh
    rego: |
      package k8suniquehost
      violation[{"msg": msg}] {
        host := input.review.object.spec.rules[_].host
        other := data.inventory.namespace[ns][_]["Ingress"][name]
        name != input.review.object.metadata.name
        other.spec.rules[_].host == host
        msg := sprintf("host %v is served by %v/%v", [host, ns, name])
      }
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sUniqueHost
metadata: {name: unique-host}
spec:
  match:
    kinds: [{apiGroups: [networking.k8s.io], kinds: [Ingress]}]
`

func ingress(name, host string) string {
	return `
---
apiVersion: networking.k8s.io/v1
kind: Ingress
metadata: {name: ` + name + `, namespace: apps}
spec:
  rules:
  - host: ` + host + `
`
}

const syncIngresses = `
---
apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata: {name: config, namespace: gatekeeper-system}
spec:
  sync:
    syncOnly:
    - {group: networking.k8s.io, version: v1, kind: Ingress}
`

const syncSetIngresses = `
---
apiVersion: syncset.gatekeeper.sh/v1alpha1
kind: SyncSet
metadata: {name: ingresses}
spec:
  gvks:
  - {group: networking.k8s.io, version: v1, kind: Ingress}
`

const excludeApps = `
---
apiVersion: config.gatekeeper.sh/v1alpha1
kind: Config
metadata: {name: config, namespace: gatekeeper-system}
spec:
  match:
  - excludedNamespaces: [apps]
    processes: [sync]
  sync:
    syncOnly:
    - {group: networking.k8s.io, version: v1, kind: Ingress}
`

// TestInventory: data.inventory holds what Gatekeeper's cache manager
// syncs, the kinds of its Config's syncOnly and of SyncSets, outside
// namespaces excluded from sync; nothing without them.
func TestInventory(t *testing.T) {
	tests := []struct {
		name, cluster string
		want          string // the denial, "" when allowed
	}{
		{"synced by the Config", syncIngresses + ingress("a", "shop.example.com"),
			`admission webhook "validation.gatekeeper.sh" denied the request: [unique-host] host shop.example.com is served by apps/a`},
		{"synced by a SyncSet", syncSetIngresses + ingress("a", "shop.example.com"),
			`admission webhook "validation.gatekeeper.sh" denied the request: [unique-host] host shop.example.com is served by apps/a`},
		{"another host", syncIngresses + ingress("a", "blog.example.com"), ""},
		{"not synced", ingress("a", "shop.example.com"), ""},
		{"namespace excluded from sync", excludeApps + ingress("a", "shop.example.com"), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			chain := newChain(t, namespaces+uniqueHost+tc.cluster)
			res, err := chain.Admit(context.Background(), admission.Request{Object: objects(t, strings.TrimPrefix(ingress("b", "shop.example.com"), "\n---\n"))[0]})
			if err != nil {
				t.Fatal(err)
			}
			if len(res.Unpredictable) > 0 {
				t.Errorf("unpredictable: %q", res.Unpredictable)
			}
			got := ""
			if !res.Allowed {
				got = res.Message
			}
			if got != tc.want {
				t.Errorf("answer = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestInventoryFollowsWrites: a write of a synced kind rebuilds the chain,
// so the next review sees it, as Gatekeeper's sync does.
func TestInventoryFollowsWrites(t *testing.T) {
	chain := newChain(t, namespaces+uniqueHost+syncIngresses)
	ctx := context.Background()
	first, err := chain.Admit(ctx, admission.Request{Object: objects(t, strings.TrimPrefix(ingress("a", "shop.example.com"), "\n---\n"))[0]})
	if err != nil || !first.Allowed {
		t.Fatalf("first Ingress: %v %+v", err, first)
	}
	reconfigure, err := chain.Commit(first)
	if err != nil {
		t.Fatal(err)
	}
	if !reconfigure {
		t.Fatal("committing a synced Ingress does not rebuild the chain")
	}
	chain.Close()
	chain, err = admission.NewChain(ctx, chain.State(), admission.Options{Engines: []admission.PolicyEngine{testEngine}})
	if err != nil {
		t.Fatal(err)
	}
	defer chain.Close()
	second, err := chain.Admit(ctx, admission.Request{Object: objects(t, strings.TrimPrefix(ingress("b", "shop.example.com"), "\n---\n"))[0]})
	if err != nil {
		t.Fatal(err)
	}
	if second.Allowed || !strings.Contains(second.Message, "served by apps/a") {
		t.Errorf("second Ingress: allowed=%v %q, want denied by unique-host", second.Allowed, second.Message)
	}
}
