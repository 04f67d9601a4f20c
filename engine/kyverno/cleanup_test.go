package kyverno_test

import (
	"slices"
	"strings"
	"testing"

	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/engine/kyverno"
)

// cleanupPolicy is a kyverno.io/v2 ClusterCleanupPolicy (or, with a
// namespace, a CleanupPolicy) named cleanup, every ten minutes, with extra
// spec lines.
func cleanupPolicy(kind, namespace, spec string) string {
	ns := ""
	if namespace != "" {
		ns = ", namespace: " + namespace
	}
	return `
apiVersion: kyverno.io/v2
kind: ` + kind + `
metadata: {name: cleanup` + ns + `}
spec:
  schedule: "*/10 * * * *"
` + spec
}

const cleanupConfigMaps = `
  match:
    any:
    - resources:
        kinds: [ConfigMap]
`

// The writers derived from the legacy cleanup policies delete, when their
// schedule comes, what Kyverno's cleanup controller deletes: what match,
// exclude and conditions select, never what Kyverno's resource filters
// exclude (kube-system), within its namespace for a CleanupPolicy.
func TestCleanupWriters(t *testing.T) {
	tests := []struct {
		name     string
		policies []string
		describe string
		deleted  []string // ConfigMaps, namespace/name; the others stay
	}{
		{
			name:     "every ConfigMap it matches, outside the filtered namespaces",
			policies: []string{cleanupPolicy("ClusterCleanupPolicy", "", cleanupConfigMaps)},
			describe: `Kyverno ClusterCleanupPolicy cleanup deletes the ConfigMap it matches on its schedule "*/10 * * * *"`,
			deleted:  []string{"shop/a", "shop/b", "team-a/c"},
		},
		{
			name: "conditions",
			policies: []string{cleanupPolicy("ClusterCleanupPolicy", "", cleanupConfigMaps+`
  conditions:
    all:
    - key: "{{ target.data.mode }}"
      operator: Equals
      value: debug
`)},
			deleted: []string{"shop/a", "team-a/c"},
		},
		{
			name: "selector and namespaceSelector",
			policies: []string{cleanupPolicy("ClusterCleanupPolicy", "", `
  match:
    any:
    - resources:
        kinds: [ConfigMap]
        selector: {matchLabels: {temporary: "yes"}}
        namespaceSelector: {matchLabels: {env: prod}}
`)},
			deleted: []string{"team-a/c"},
		},
		{
			name: "exclude",
			policies: []string{cleanupPolicy("ClusterCleanupPolicy", "", cleanupConfigMaps+`
  exclude:
    any:
    - resources:
        namespaces: [team-a]
`)},
			deleted: []string{"shop/a", "shop/b"},
		},
		{
			name:     "namespaced: only its own namespace",
			policies: []string{cleanupPolicy("CleanupPolicy", "shop", cleanupConfigMaps)},
			describe: `Kyverno CleanupPolicy shop/cleanup deletes the ConfigMap it matches on its schedule "*/10 * * * *"`,
			deleted:  []string{"shop/a", "shop/b"},
		},
		{
			name: "a DeletingPolicy of the same name is another policy",
			policies: []string{
				cleanupPolicy("ClusterCleanupPolicy", "", cleanupConfigMaps+`
  conditions:
    all:
    - {key: "{{ target.data.mode }}", operator: Equals, value: production}
`),
				deletingPolicy("DeletingPolicy", "", configMapRules+`
  conditions:
  - name: never
    expression: object.data.mode == "staging"
`),
			},
			describe: `Kyverno ClusterCleanupPolicy cleanup deletes the ConfigMap it matches on its schedule "*/10 * * * *"`,
			deleted:  []string{"shop/b"},
		},
		{
			name: "nothing matches",
			policies: []string{cleanupPolicy("ClusterCleanupPolicy", "", cleanupConfigMaps+`
  conditions:
    any:
    - {key: "{{ target.data.mode }}", operator: Equals, value: staging}
`)},
		},
	}
	all := []string{"shop/a", "shop/b", "team-a/c", "kube-system/d"}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, c, bg := generateEnv(t, tc.policies...)
			if u := bg.Unpredictable(); len(u) != 0 {
				t.Fatalf("unpredictable: %v", u)
			}
			writers := bg.Writers()
			if len(writers) != len(tc.policies) {
				t.Fatalf("%d writers, want %d", len(writers), len(tc.policies))
			}
			for _, o := range objs(t, deletingObjects) {
				if _, err := c.Create(ctx, o, cluster.WriteOptions{FieldManager: "test"}); err != nil {
					t.Fatal(err)
				}
			}
			for _, w := range writers {
				if !strings.Contains(w.Describe(), "CleanupPolicy") {
					continue
				}
				if tc.describe != "" && w.Describe() != tc.describe {
					t.Errorf("describe %q\nwant     %q", w.Describe(), tc.describe)
				}
				if w.Name() != "kyverno-cleanup-controller" {
					t.Errorf("name %q", w.Name())
				}
				if w.Watches(ref("ConfigMap", "", "v1", "shop", "a")) {
					t.Error("a scheduled writer should watch nothing")
				}
				if err := w.Act(ctx, c); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range all {
				ns, n, _ := strings.Cut(name, "/")
				gone := get(t, ctx, c, ref("ConfigMap", "", "v1", ns, n)) == nil
				want := false
				for _, d := range tc.deleted {
					want = want || d == name
				}
				if gone != want {
					t.Errorf("ConfigMap %s deleted: %v, want %v", name, gone, want)
				}
			}
		})
	}
}

// What a cleanup policy reads that truce cannot give Kyverno offline, or
// the wall clock its conditions read (an age: what it deletes depends on
// when it runs), gives no writer but a finding naming the policy.
func TestCleanupUnpredictable(t *testing.T) {
	tests := []struct {
		name, spec, want string
	}{
		{
			name: "time_since",
			spec: cleanupConfigMaps + `
  conditions:
    all:
    - key: "{{ time_since('', '{{ target.metadata.creationTimestamp }}', '') }}"
      operator: GreaterThan
      value: 24h
`,
			want: `Kyverno ClusterCleanupPolicy cleanup: its conditions use time_since, which Kyverno reads from the wall clock, not the simulation's: which objects it deletes depends on when it runs`,
		},
		{
			name: "time_now_utc in a context variable",
			spec: cleanupConfigMaps + `
  context:
  - name: now
    variable: {jmesPath: "time_now_utc()"}
  conditions:
    all:
    - {key: "{{ now }}", operator: NotEquals, value: ""}
`,
			want: `Kyverno ClusterCleanupPolicy cleanup: its context uses time_now_utc, which Kyverno reads from the wall clock, not the simulation's: which objects it deletes depends on when it runs`,
		},
		{
			name: "apiCall to an API path",
			spec: cleanupConfigMaps + `
  context:
  - name: deployments
    apiCall:
      urlPath: /apis/apps/v1/namespaces/shop/deployments
      jmesPath: "items | length(@)"
  conditions:
    all:
    - {key: "{{ deployments }}", operator: Equals, value: 0}
`,
			want: `Kyverno ClusterCleanupPolicy cleanup: context entry "deployments" reads /apis/apps/v1/namespaces/shop/deployments from the API server, which the cleanup controller is not given offline`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, _, bg := generateEnv(t, cleanupPolicy("ClusterCleanupPolicy", "", tc.spec))
			if ws := bg.Writers(); len(ws) != 0 {
				t.Errorf("%d writers, want none", len(ws))
			}
			if u := bg.Unpredictable(); len(u) != 1 || u[0] != tc.want {
				t.Errorf("unpredictable %q\nwant %q", u, tc.want)
			}
		})
	}
	// Kyverno's validation refuses a configMap context in a cleanup policy
	// ("ConfigMap is not allowed in CleanUp Policy"): the API server never
	// stores it, so it deletes nothing and predicts nothing; the refusal
	// is a note for the user, as Kyverno's webhook answers it to theirs.
	t.Run("configMap refused", func(t *testing.T) {
		eng := kyverno.New(kyverno.Options{HelperPath: helperPath})
		t.Cleanup(eng.Close)
		policy := cleanupPolicy("ClusterCleanupPolicy", "", cleanupConfigMaps+`
  context:
  - name: settings
    configMap: {name: cleanup-settings, namespace: kyverno}
`)
		bg, err := eng.Background(testContext(t), append(objs(t, policy), objs(t, generateCluster)...))
		if err != nil {
			t.Fatal(err)
		}
		if ws, u := bg.Writers(), bg.Unpredictable(); len(ws) != 0 || len(u) != 0 {
			t.Errorf("%d writers, unpredictable %q; want none", len(ws), u)
		}
		if notes := strings.Join(eng.Notes(), "\n"); !strings.Contains(notes, "ClusterCleanupPolicy cleanup") || !strings.Contains(notes, "ConfigMap is not allowed") {
			t.Errorf("no note of the refused policy: %q", eng.Notes())
		}
	})
}

// Kyverno's cleanup controller validates the cleanup.kyverno.io/ttl label
// of every object that carries it (kyverno-ttl-validating-webhook-cfg,
// served on its own Service): it always admits, and warns about a value it
// cannot read.
func TestTTLLabel(t *testing.T) {
	const warning = "cleanup.kyverno.io/ttl label value cannot be parsed as any recognizable format"
	tests := []struct {
		name, labels string
		warns        bool
	}{
		{"a duration", "cleanup.kyverno.io/ttl: 2h", false},
		{"a date", "cleanup.kyverno.io/ttl: 2025-01-01", false},
		{"neither", "cleanup.kyverno.io/ttl: soon", true},
		{"no label", "app: x", false},
	}
	chain := newChain(t, namespaces, addLabel)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, configMap("c", tt.labels))})
			if err != nil {
				t.Fatal(err)
			}
			if !res.Allowed {
				t.Fatalf("denied: %s", res.Message)
			}
			warned := slices.ContainsFunc(res.Warnings, func(w string) bool { return strings.Contains(w, warning) })
			if warned != tt.warns {
				t.Errorf("warnings %q, want the TTL warning: %v", res.Warnings, tt.warns)
			}
		})
	}
	if _, ok := chain.State().Get(k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "ValidatingWebhookConfiguration"}, "", "kyverno-cleanup-validating-webhook-cfg"); !ok {
		t.Error("no kyverno-cleanup-validating-webhook-cfg in the state")
	}
}
