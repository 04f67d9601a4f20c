package configuration

import (
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/internal/certs"
)

// parse decodes multi-document YAML into unstructured objects.
func parse(t testing.TB, docs string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(docs, -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			t.Fatalf("parsing YAML: %v\n%s", err, doc)
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out
}

// policy returns a policy of kind with the given resourceRules (YAML flow).
func policy(kind, name string, rules ...string) string {
	var b strings.Builder
	b.WriteString("apiVersion: admissionregistration.k8s.io/v1\nkind: " + kind + "\nmetadata:\n  name: " + name + "\nspec:\n  matchConstraints:\n    resourceRules:\n")
	for _, r := range rules {
		b.WriteString("    - " + r + "\n")
	}
	return b.String() + "---\n"
}

func mapPolicy(name string, rules ...string) string {
	return policy("MutatingAdmissionPolicy", name, rules...)
}

func vapPolicy(name string, rules ...string) string {
	return policy("ValidatingAdmissionPolicy", name, rules...)
}

const (
	deployments  = `{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [deployments]}`
	statefulsets = `{apiGroups: [apps], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [statefulsets]}`
	podsCreate   = `{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}`
	podsUpdate   = `{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [pods]}`
	everything   = `{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"]}`
	leases       = `{apiGroups: [coordination.k8s.io], apiVersions: [v1], operations: [UPDATE], resources: [leases]}`
)

func testCA(t testing.TB) []byte {
	t.Helper()
	ca, err := certs.NewCA("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca.PEM
}

func serviceOptions(ca []byte) Options {
	return Options{Service: &Service{Namespace: "truce-system", Name: "truce-webhook"}, CABundle: ca}
}

// rules is the compact form of webhook rules tests compare.
type testRule struct {
	Ops, Groups, Versions, Resources string
	Scope                            string
}

func compact(rs []admissionregistrationv1.RuleWithOperations) []testRule {
	var out []testRule
	for _, r := range rs {
		ops := make([]string, 0, len(r.Operations))
		for _, op := range r.Operations {
			ops = append(ops, string(op))
		}
		tr := testRule{
			Ops: strings.Join(ops, ","), Groups: strings.Join(r.APIGroups, ","),
			Versions: strings.Join(r.APIVersions, ","), Resources: strings.Join(r.Resources, ","),
		}
		if r.Scope != nil {
			tr.Scope = string(*r.Scope)
		}
		out = append(out, tr)
	}
	return out
}

func TestGenerateRules(t *testing.T) {
	ca := testCA(t)
	tests := []struct {
		name           string
		policies       string
		wantMutating   []testRule // nil: no mutating configuration
		wantValidating []testRule
		wantLeases     bool // the lease-excluding matchCondition
		wantWarnings   []string
	}{
		{
			name:           "one policy of each kind",
			policies:       mapPolicy("m", deployments) + vapPolicy("v", deployments),
			wantMutating:   []testRule{{"CREATE,UPDATE", "apps", "v1", "deployments", "*"}},
			wantValidating: []testRule{{"CREATE,UPDATE", "apps", "v1", "deployments", "*"}},
		},
		{
			name:           "only validating policies: no mutating configuration",
			policies:       vapPolicy("v", podsCreate),
			wantValidating: []testRule{{"CREATE", "", "v1", "pods", "*"}},
		},
		{
			name:         "bindings and other objects are skipped",
			policies:     mapPolicy("m", podsCreate) + "apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {name: b}\nspec: {policyName: m}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n",
			wantMutating: []testRule{{"CREATE", "", "v1", "pods", "*"}},
		},
		{
			name:         "operations of the same resources are united",
			policies:     mapPolicy("a", podsCreate) + mapPolicy("b", podsUpdate),
			wantMutating: []testRule{{"CREATE,UPDATE", "", "v1", "pods", "*"}},
		},
		{
			name:         "resources of the same group are united",
			policies:     mapPolicy("a", statefulsets) + mapPolicy("b", deployments),
			wantMutating: []testRule{{"CREATE,UPDATE", "apps", "v1", "deployments,statefulsets", "*"}},
		},
		{
			name:         "different groups and resources stay apart (uniting them would widen the match)",
			policies:     mapPolicy("a", podsCreate) + mapPolicy("b", `{apiGroups: [apps], apiVersions: [v1], operations: [DELETE], resources: [deployments]}`),
			wantMutating: []testRule{{"CREATE", "", "v1", "pods", "*"}, {"DELETE", "apps", "v1", "deployments", "*"}},
		},
		{
			name:         "duplicates within a rule and across policies",
			policies:     mapPolicy("a", `{apiGroups: [apps, apps], apiVersions: [v1], operations: [UPDATE, CREATE, UPDATE], resources: [deployments]}`) + mapPolicy("b", deployments),
			wantMutating: []testRule{{"CREATE,UPDATE", "apps", "v1", "deployments", "*"}},
		},
		{
			name: "a covered rule is dropped",
			policies: mapPolicy("narrow", `{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments/scale], scope: Namespaced}`) +
				mapPolicy("wide", `{apiGroups: [apps], apiVersions: ["*"], operations: ["*"], resources: ["deployments/*"]}`),
			wantMutating: []testRule{{"*", "apps", "*", "deployments/*", "*"}},
		},
		{
			name:           "scopes stay apart",
			policies:       vapPolicy("a", `{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps], scope: Namespaced}`) + vapPolicy("b", `{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [namespaces], scope: Cluster}`),
			wantValidating: []testRule{{"CREATE", "", "v1", "configmaps", "Namespaced"}, {"CREATE", "", "v1", "namespaces", "Cluster"}},
		},
		{
			name:           "wildcards absorb what they cover, so the API server accepts the list",
			policies:       vapPolicy("a", `{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods, "*", "pods/status", "*/status", configmaps]}`),
			wantValidating: []testRule{{"CREATE", "", "v1", "*,*/status", "*"}},
			wantWarnings:   []string{`ValidatingAdmissionPolicy "a" matches every resource (*) of API groups "": the webhook is called for all of them (the server matches the policy itself) except anything in kube-system`},
		},
		{
			name:           "resourceNames are dropped: the server matches them",
			policies:       vapPolicy("a", `{apiGroups: [""], apiVersions: [v1], operations: [UPDATE], resources: [configmaps], resourceNames: [one]}`),
			wantValidating: []testRule{{"UPDATE", "", "v1", "configmaps", "*"}},
		},
		{
			name:           "older API versions of the policies",
			policies:       strings.Replace(vapPolicy("a", podsCreate), "admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1beta1", 1) + strings.Replace(mapPolicy("b", podsCreate), "admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v1alpha1", 1),
			wantMutating:   []testRule{{"CREATE", "", "v1", "pods", "*"}},
			wantValidating: []testRule{{"CREATE", "", "v1", "pods", "*"}},
		},
		{
			name:           "a wildcard policy: Leases excluded, warned",
			policies:       vapPolicy("all", everything) + vapPolicy("pods", podsCreate),
			wantValidating: []testRule{{"*", "*", "*", "*", "*"}},
			wantLeases:     true,
			wantWarnings:   []string{`ValidatingAdmissionPolicy "all" matches every resource (*) of API groups "*": the webhook is called for all of them (the server matches the policy itself) except webhook configurations and admission policies and their bindings (the API server never sends them to webhooks, so that a broken webhook cannot block its own repair); TokenReviews and access reviews (not persisted, never sent to webhooks); coordination.k8s.io Leases`},
		},
		{
			name: "a policy selecting kube-system: warned",
			policies: strings.Replace(vapPolicy("sys", podsCreate), "  matchConstraints:\n",
				"  matchConstraints:\n    namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: In, values: [kube-system, apps]}]}\n", 1),
			wantValidating: []testRule{{"CREATE", "", "v1", "pods", "*"}},
			wantWarnings:   []string{`ValidatingAdmissionPolicy "sys": ValidatingAdmissionPolicy "sys" selects namespace kube-system (matchConstraints.namespaceSelector), which the webhook excludes`},
		},
		{
			name: "a binding selecting the webhook's namespace: warned; a selector for other namespaces and an empty one: not",
			policies: mapPolicy("m", podsCreate) + mapPolicy("other", podsCreate) + mapPolicy("all", podsCreate) +
				"apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {name: b}\nspec: {policyName: m, matchResources: {namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [prod]}]}}}\n---\n" +
				"apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {name: o}\nspec: {policyName: other, matchResources: {namespaceSelector: {matchLabels: {team: shop}}}}\n---\n" +
				"apiVersion: admissionregistration.k8s.io/v1\nkind: MutatingAdmissionPolicyBinding\nmetadata: {name: a}\nspec: {policyName: all, matchResources: {namespaceSelector: {}}}\n",
			wantMutating: []testRule{{"CREATE", "", "v1", "pods", "*"}},
			wantWarnings: []string{`MutatingAdmissionPolicy "m": its binding "b" selects namespace kube-system and truce-system (matchResources.namespaceSelector)`},
		},
		{
			name:         "a policy naming Leases: excluded, warned",
			policies:     mapPolicy("l", leases),
			wantMutating: []testRule{{"UPDATE", "coordination.k8s.io", "v1", "leases", "*"}},
			wantLeases:   true,
			wantWarnings: []string{`MutatingAdmissionPolicy "l" matches coordination.k8s.io Leases: the webhook excludes them`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Generate(parse(t, tt.policies), serviceOptions(ca))
			if err != nil {
				t.Fatal(err)
			}
			if (got.Mutating != nil) != (tt.wantMutating != nil) || (got.Validating != nil) != (tt.wantValidating != nil) {
				t.Fatalf("mutating %v, validating %v; want %v, %v", got.Mutating != nil, got.Validating != nil, tt.wantMutating != nil, tt.wantValidating != nil)
			}
			var conditions [][]admissionregistrationv1.MatchCondition
			if got.Mutating != nil {
				w := got.Mutating.Webhooks[0]
				if diff := cmp.Diff(tt.wantMutating, compact(w.Rules)); diff != "" {
					t.Errorf("mutating rules (-want +got):\n%s", diff)
				}
				conditions = append(conditions, w.MatchConditions)
			}
			if got.Validating != nil {
				w := got.Validating.Webhooks[0]
				if diff := cmp.Diff(tt.wantValidating, compact(w.Rules)); diff != "" {
					t.Errorf("validating rules (-want +got):\n%s", diff)
				}
				conditions = append(conditions, w.MatchConditions)
			}
			for _, mc := range conditions {
				if has := len(mc) == 1 && mc[0].Name == ExcludeLeasesCondition; has != tt.wantLeases || (!has && len(mc) > 0) {
					t.Errorf("matchConditions %+v, want the lease exclusion: %v", mc, tt.wantLeases)
				}
			}
			if len(got.Warnings) != len(tt.wantWarnings) {
				t.Fatalf("warnings %q, want %d", got.Warnings, len(tt.wantWarnings))
			}
			for i, w := range tt.wantWarnings {
				if !strings.HasPrefix(got.Warnings[i], w) {
					t.Errorf("warning %d = %q, want prefix %q", i, got.Warnings[i], w)
				}
			}
		})
	}
}

// TestGenerateDefaults pins every field of the generated configurations: the
// safe defaults, and every field the API server would otherwise default, so
// that what is applied is what is stored (no drift for a GitOps tool).
func TestGenerateDefaults(t *testing.T) {
	ca := testCA(t)
	got, err := Generate(parse(t, mapPolicy("m", deployments)+vapPolicy("v", deployments)), serviceOptions(ca))
	if err != nil {
		t.Fatal(err)
	}
	selector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
		Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"kube-system", "truce-system"},
	}}}
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{"CREATE", "UPDATE"},
		Rule: admissionregistrationv1.Rule{
			APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"},
			Scope: new(admissionregistrationv1.AllScopes),
		},
	}}
	service := func(path string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{
			Service:  &admissionregistrationv1.ServiceReference{Namespace: "truce-system", Name: "truce-webhook", Path: &path, Port: new(int32(443))},
			CABundle: ca,
		}
	}
	wantMutating := &admissionregistrationv1.MutatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "truce"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name:                    "truce.mutate.truce.dev",
			ClientConfig:            service("/mutate"),
			Rules:                   rules,
			FailurePolicy:           new(admissionregistrationv1.Ignore),
			MatchPolicy:             new(admissionregistrationv1.Equivalent),
			NamespaceSelector:       selector,
			ObjectSelector:          &metav1.LabelSelector{},
			SideEffects:             new(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          new(int32(2)),
			AdmissionReviewVersions: []string{"v1"},
			ReinvocationPolicy:      new(admissionregistrationv1.IfNeededReinvocationPolicy),
		}},
	}
	wantValidating := &admissionregistrationv1.ValidatingWebhookConfiguration{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"},
		ObjectMeta: metav1.ObjectMeta{Name: "truce"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "truce.validate.truce.dev",
			ClientConfig:            service("/validate"),
			Rules:                   rules,
			FailurePolicy:           new(admissionregistrationv1.Fail),
			MatchPolicy:             new(admissionregistrationv1.Equivalent),
			NamespaceSelector:       selector,
			ObjectSelector:          &metav1.LabelSelector{},
			SideEffects:             new(admissionregistrationv1.SideEffectClassNone),
			TimeoutSeconds:          new(int32(2)),
			AdmissionReviewVersions: []string{"v1"},
		}},
	}
	if diff := cmp.Diff(wantMutating, got.Mutating); diff != "" {
		t.Errorf("mutating (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(wantValidating, got.Validating); diff != "" {
		t.Errorf("validating (-want +got):\n%s", diff)
	}
	if len(got.Warnings) != 0 {
		t.Errorf("warnings: %q", got.Warnings)
	}
}

func TestGenerateOptions(t *testing.T) {
	ca := testCA(t)
	tests := []struct {
		name string
		opts Options
		// check inspects the validating webhook.
		check func(t *testing.T, w admissionregistrationv1.ValidatingWebhook, name string)
	}{
		{
			name: "URL, name, timeout and an out-of-cluster webhook (no own namespace)",
			opts: Options{Name: "policies", URL: "https://webhook.example.com:8443/", CABundle: ca, TimeoutSeconds: 5},
			check: func(t *testing.T, w admissionregistrationv1.ValidatingWebhook, name string) {
				if w.ClientConfig.URL == nil || *w.ClientConfig.URL != "https://webhook.example.com:8443/validate" || w.ClientConfig.Service != nil {
					t.Errorf("clientConfig %+v", w.ClientConfig)
				}
				if name != "policies" || w.Name != "policies.validate.truce.dev" || *w.TimeoutSeconds != 5 {
					t.Errorf("name %q, webhook %q, timeout %d", name, w.Name, *w.TimeoutSeconds)
				}
				if got := w.NamespaceSelector.MatchExpressions[0].Values; !cmp.Equal(got, []string{"kube-system"}) {
					t.Errorf("excluded namespaces %q", got)
				}
			},
		},
		{
			name: "URL with the webhook's namespace",
			opts: Options{URL: "https://10.0.0.1", CABundle: ca, Namespace: "policy"},
			check: func(t *testing.T, w admissionregistrationv1.ValidatingWebhook, _ string) {
				if *w.ClientConfig.URL != "https://10.0.0.1/validate" {
					t.Errorf("url %q", *w.ClientConfig.URL)
				}
				if got := w.NamespaceSelector.MatchExpressions[0].Values; !cmp.Equal(got, []string{"kube-system", "policy"}) {
					t.Errorf("excluded namespaces %q", got)
				}
			},
		},
		{
			name: "service port; the webhook in kube-system is excluded once",
			opts: Options{Service: &Service{Namespace: "kube-system", Name: "truce", Port: 8443}, CABundle: ca},
			check: func(t *testing.T, w admissionregistrationv1.ValidatingWebhook, _ string) {
				if *w.ClientConfig.Service.Port != 8443 {
					t.Errorf("port %d", *w.ClientConfig.Service.Port)
				}
				if got := w.NamespaceSelector.MatchExpressions[0].Values; !cmp.Equal(got, []string{"kube-system"}) {
					t.Errorf("excluded namespaces %q", got)
				}
			},
		},
		{
			name: "a CA bundle of two certificates",
			opts: Options{Service: &Service{Namespace: "a", Name: "b"}, CABundle: append(append([]byte{}, ca...), testCA(t)...)},
			check: func(t *testing.T, w admissionregistrationv1.ValidatingWebhook, _ string) {
				if n := strings.Count(string(w.ClientConfig.CABundle), "BEGIN CERTIFICATE"); n != 2 {
					t.Errorf("%d certificates in caBundle", n)
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Generate(parse(t, vapPolicy("v", podsCreate)), tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, got.Validating.Webhooks[0], got.Validating.Name)
		})
	}
}

func TestGenerateErrors(t *testing.T) {
	ca := testCA(t)
	_, pair, err := certs.Loopback()
	if err != nil {
		t.Fatal(err)
	}
	okPolicies := vapPolicy("v", podsCreate)
	tests := []struct {
		name     string
		policies string
		opts     Options
		want     string
		// wantIndex is the PolicyError's index, -1 for an error of the
		// options.
		wantIndex int
	}{
		{name: "no policies", policies: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: c}\n", opts: serviceOptions(ca), want: "no MutatingAdmissionPolicy or ValidatingAdmissionPolicy found", wantIndex: -1},
		{name: "no CA bundle", policies: okPolicies, opts: serviceOptions(nil), want: "no CA bundle", wantIndex: -1},
		{name: "CA bundle not PEM", policies: okPolicies, opts: serviceOptions([]byte("not a certificate")), want: "CA bundle holds no PEM certificate", wantIndex: -1},
		{name: "private key in the CA bundle", policies: okPolicies, opts: serviceOptions(append(append([]byte{}, ca...), pair.KeyPEM...)), want: "CA bundle holds a PEM block of type EC PRIVATE KEY", wantIndex: -1},
		{name: "garbage after the CA", policies: okPolicies, opts: serviceOptions(append(append([]byte{}, ca...), "junk"...)), want: "unexpected data after certificate 1", wantIndex: -1},
		{name: "broken certificate", policies: okPolicies, opts: serviceOptions([]byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")), want: "CA bundle certificate 1", wantIndex: -1},
		{name: "service and URL", policies: okPolicies, opts: Options{Service: &Service{Namespace: "a", Name: "b"}, URL: "https://x", CABundle: ca}, want: "a Service and a URL", wantIndex: -1},
		{name: "neither service nor URL", policies: okPolicies, opts: Options{CABundle: ca}, want: "neither a Service nor a URL", wantIndex: -1},
		{name: "http URL", policies: okPolicies, opts: Options{URL: "http://x", CABundle: ca}, want: "over https only", wantIndex: -1},
		{name: "URL with a query", policies: okPolicies, opts: Options{URL: "https://x/?a=b", CABundle: ca}, want: "a query is not allowed", wantIndex: -1},
		{name: "bad service name", policies: okPolicies, opts: Options{Service: &Service{Namespace: "a", Name: "B_"}, CABundle: ca}, want: `service name "B_"`, wantIndex: -1},
		{name: "bad port", policies: okPolicies, opts: Options{Service: &Service{Namespace: "a", Name: "b", Port: 70000}, CABundle: ca}, want: "service port 70000", wantIndex: -1},
		{name: "timeout too long", policies: okPolicies, opts: Options{Service: &Service{Namespace: "a", Name: "b"}, CABundle: ca, TimeoutSeconds: 31}, want: "1 to 30 seconds", wantIndex: -1},
		{name: "bad name", policies: okPolicies, opts: Options{Name: "Truce", Service: &Service{Namespace: "a", Name: "b"}, CABundle: ca}, want: `name "Truce"`, wantIndex: -1},
		{
			name:     "policy without matchConstraints",
			policies: okPolicies + "apiVersion: admissionregistration.k8s.io/v1\nkind: ValidatingAdmissionPolicy\nmetadata: {name: bare}\nspec: {}\n",
			opts:     serviceOptions(ca), want: `ValidatingAdmissionPolicy "bare": no spec.matchConstraints`, wantIndex: 1,
		},
		{
			name:     "rule without resources",
			policies: mapPolicy("m", `{apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: []}`),
			opts:     serviceOptions(ca), want: `MutatingAdmissionPolicy "m": spec.matchConstraints.resourceRules[0].resources is empty`, wantIndex: 0,
		},
		{
			name:     "malformed matchConstraints",
			policies: mapPolicy("m", `{apiGroups: apps}`),
			opts:     serviceOptions(ca), want: `MutatingAdmissionPolicy "m": spec.matchConstraints:`, wantIndex: 0,
		},
		{
			name:     "unknown policy version",
			policies: strings.Replace(mapPolicy("m", podsCreate), "admissionregistration.k8s.io/v1", "admissionregistration.k8s.io/v2", 1),
			opts:     serviceOptions(ca), want: "unsupported apiVersion admissionregistration.k8s.io/v2", wantIndex: 0,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Generate(parse(t, tt.policies), tt.opts)
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q, want %q", err, tt.want)
			}
			var perr *PolicyError
			index := -1
			if errors.As(err, &perr) {
				index = perr.Index
			}
			if index != tt.wantIndex {
				t.Errorf("policy index %d, want %d", index, tt.wantIndex)
			}
		})
	}
}

// TestGenerateStable: the output does not depend on the order of the
// policies or of their rules.
func TestGenerateStable(t *testing.T) {
	ca := testCA(t)
	docs := []string{
		mapPolicy("a", podsCreate, statefulsets), mapPolicy("b", deployments), mapPolicy("c", podsUpdate),
		vapPolicy("d", leases), vapPolicy("e", deployments, podsCreate),
	}
	render := func(order []int) string {
		var in string
		for _, i := range order {
			in += docs[i]
		}
		got, err := Generate(parse(t, in), serviceOptions(ca))
		if err != nil {
			t.Fatal(err)
		}
		objs, err := got.Objects()
		if err != nil {
			t.Fatal(err)
		}
		var out string
		for _, o := range objs {
			data, err := yaml.Marshal(o.Object)
			if err != nil {
				t.Fatal(err)
			}
			out += string(data) + "---\n"
		}
		return out
	}
	want := render([]int{0, 1, 2, 3, 4})
	for _, order := range [][]int{{4, 3, 2, 1, 0}, {2, 4, 0, 3, 1}, {1, 0, 4, 2, 3}} {
		if got := render(order); got != want {
			t.Errorf("order %v:\n%s\nwant:\n%s", order, got, want)
		}
	}
	if strings.Contains(want, "creationTimestamp") {
		t.Errorf("creationTimestamp in the output:\n%s", want)
	}
}

// TestGenerateUnboundPolicies: with bindings among the objects, a policy
// no binding names gets no rules; without any, every policy counts.
func TestGenerateUnboundPolicies(t *testing.T) {
	binding := func(kind, name, policy string) string {
		return "apiVersion: admissionregistration.k8s.io/v1\nkind: " + kind + "Binding\nmetadata: {name: " + name + "}\nspec: {policyName: " + policy + "}\n---\n"
	}
	for _, tc := range []struct {
		name           string
		docs           string
		wantValidating []testRule
		wantMutating   bool
		wantWarning    string
	}{
		{
			name:           "no bindings given: all policies count",
			docs:           vapPolicy("a", deployments) + vapPolicy("b", podsCreate),
			wantValidating: compact(webhookRules(mergeRules(mustRules(t, deployments, podsCreate)))),
		},
		{
			name:           "unbound validating policy left out",
			docs:           vapPolicy("a", deployments) + vapPolicy("b", podsCreate) + binding("ValidatingAdmissionPolicy", "a", "a"),
			wantValidating: compact(webhookRules(mergeRules(mustRules(t, deployments)))),
			wantWarning:    "ValidatingAdmissionPolicy b has no binding",
		},
		{
			name:           "a validating binding says nothing about mutating policies",
			docs:           vapPolicy("a", deployments) + mapPolicy("m", podsCreate) + binding("ValidatingAdmissionPolicy", "a", "a"),
			wantValidating: compact(webhookRules(mergeRules(mustRules(t, deployments)))),
			wantMutating:   true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Generate(parse(t, tc.docs), serviceOptions(testCA(t)))
			if err != nil {
				t.Fatal(err)
			}
			if got.Validating == nil || !reflect.DeepEqual(compact(got.Validating.Webhooks[0].Rules), tc.wantValidating) {
				t.Fatalf("validating rules %v, want %v", got.Validating, tc.wantValidating)
			}
			if (got.Mutating != nil) != tc.wantMutating {
				t.Fatalf("mutating configuration %v, want one: %v", got.Mutating, tc.wantMutating)
			}
			if tc.wantWarning != "" && !strings.Contains(strings.Join(got.Warnings, "\n"), tc.wantWarning) {
				t.Fatalf("warnings %q do not say %q", got.Warnings, tc.wantWarning)
			}
		})
	}
}

func mustRules(t *testing.T, rules ...string) []rule {
	t.Helper()
	p := parse(t, vapPolicy("x", rules...))[0]
	out, err := policyRules(p)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
