package lint

import (
	"context"
	"strings"
	"testing"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/admission"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/manifest"
)

// objects decodes YAML documents separated by "---" into input objects,
// each at line 1 of a file named after its position.
func objects(t *testing.T, docs ...string) *Input {
	t.Helper()
	in := &Input{}
	for i, d := range docs {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(d), &m); err != nil {
			t.Fatalf("doc %d: %v", i, err)
		}
		in.Objects = append(in.Objects, manifest.Object{
			Source: manifest.Source{File: "doc" + string(rune('a'+i)) + ".yaml", Line: 1},
			Object: &unstructured.Unstructured{Object: m},
		})
	}
	return in
}

func TestSelectorMatches(t *testing.T) {
	ns := func(name string, extra ...string) labels.Set {
		set := labels.Set{namespaceNameLabel: name}
		for i := 0; i+1 < len(extra); i += 2 {
			set[extra[i]] = extra[i+1]
		}
		return set
	}
	notIn := func(values ...string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: values}}}
	}
	tests := []struct {
		name string
		sel  *metav1.LabelSelector
		ns   labels.Set
		want bool
	}{
		{"nil selects everything (v1 default {})", nil, ns("kube-system"), true},
		{"empty selects everything", &metav1.LabelSelector{}, ns("kube-system"), true},
		{"NotIn excludes", notIn("kube-system", "policy"), ns("kube-system"), false},
		{"NotIn excludes the other", notIn("kube-system", "policy"), ns("policy"), false},
		{"NotIn keeps the rest", notIn("kube-system"), ns("policy"), true},
		{"opt-in label absent", &metav1.LabelSelector{MatchLabels: map[string]string{"inject": "on"}}, ns("kube-system"), false},
		{"opt-in label present", &metav1.LabelSelector{MatchLabels: map[string]string{"inject": "on"}}, ns("app", "inject", "on"), true},
		{"opt-out label DoesNotExist, namespace labelled",
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "control-plane", Operator: metav1.LabelSelectorOpDoesNotExist}}},
			ns("kube-system", "control-plane", "true"), false},
		{"opt-out label DoesNotExist, namespace not labelled",
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "control-plane", Operator: metav1.LabelSelectorOpDoesNotExist}}},
			ns("kube-system"), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := selectorMatches(tt.sel, tt.ns)
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
	if _, err := selectorMatches(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}, ns("x")); err == nil {
		t.Error("an invalid selector must be an error")
	}
}

func TestNamespaceLabelsFromInput(t *testing.T) {
	in := objects(t, `{apiVersion: v1, kind: Namespace, metadata: {name: kube-system, labels: {control-plane: "true"}}}`)
	got := namespaceLabels(in, "kube-system")
	if got["control-plane"] != "true" || got[namespaceNameLabel] != "kube-system" {
		t.Errorf("got %v", got)
	}
	if got := namespaceLabels(in, "other"); len(got) != 1 || got[namespaceNameLabel] != "other" {
		t.Errorf("a namespace not in the input has only its name label; got %v", got)
	}
}

func TestRuleMatchesLeases(t *testing.T) {
	update := probe{
		gvr:       k8sschema.GroupVersionResource{Group: "coordination.k8s.io", Version: "v1", Resource: "leases"},
		namespace: "kube-node-lease", op: admission.Update,
	}
	rule := func(groups, versions, resources []string, ops ...admissionregistrationv1.OperationType) admissionregistrationv1.RuleWithOperations {
		if len(ops) == 0 {
			ops = []admissionregistrationv1.OperationType{admissionregistrationv1.OperationAll}
		}
		return admissionregistrationv1.RuleWithOperations{Operations: ops, Rule: admissionregistrationv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources}}
	}
	exact, equivalent := admissionregistrationv1.Exact, admissionregistrationv1.Equivalent
	cluster := admissionregistrationv1.ClusterScope
	clusterRule := rule([]string{"*"}, []string{"*"}, []string{"*"})
	clusterRule.Scope = &cluster
	tests := []struct {
		name   string
		rule   admissionregistrationv1.RuleWithOperations
		policy *admissionregistrationv1.MatchPolicyType
		want   bool
	}{
		{"named", rule([]string{"coordination.k8s.io"}, []string{"v1"}, []string{"leases"}), nil, true},
		{"*/* wildcard", rule([]string{"*"}, []string{"*"}, []string{"*/*"}), nil, true},
		{"* resources", rule([]string{"*"}, []string{"*"}, []string{"*"}), nil, true},
		{"* group, named resource", rule([]string{"*"}, []string{"v1"}, []string{"leases"}), nil, true},
		{"named group, * resources", rule([]string{"coordination.k8s.io"}, []string{"*"}, []string{"*"}), nil, true},
		{"other resource", rule([]string{""}, []string{"v1"}, []string{"pods"}), nil, false},
		{"status subresources only", rule([]string{"*"}, []string{"*"}, []string{"*/status"}), nil, false},
		{"other version, Equivalent (default)", rule([]string{"coordination.k8s.io"}, []string{"v1beta1"}, []string{"leases"}), nil, true},
		{"other version, Equivalent", rule([]string{"coordination.k8s.io"}, []string{"v1beta1"}, []string{"leases"}), &equivalent, true},
		{"other version, Exact", rule([]string{"coordination.k8s.io"}, []string{"v1beta1"}, []string{"leases"}), &exact, false},
		{"other operation", rule([]string{"*"}, []string{"*"}, []string{"*"}, admissionregistrationv1.Delete), nil, false},
		{"cluster scope", clusterRule, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := ruleMatches(tt.rule, tt.policy, update); got != tt.want {
				t.Errorf("got %v, want %v", got, tt.want)
			}
		})
	}
}

// leaseWebhook is a validating webhook for every resource; extra is
// appended to its entry.
func leaseWebhook(extra string) string {
	return `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: all}
webhooks:
- name: all.example.com
  sideEffects: None
  admissionReviewVersions: [v1]
  clientConfig: {url: "https://example.com"}
  rules: [{operations: ["*"], apiGroups: ["*"], apiVersions: ["*"], resources: ["*"]}]
` + extra
}

func TestMatchesLeases(t *testing.T) {
	tests := []struct {
		name  string
		extra string
		want  string // the finding's severity, "" for none
		msg   string
	}{
		{"fail closed", "  failurePolicy: Fail\n", "error", "UPDATE and CREATE in kube-node-lease, UPDATE and CREATE in kube-system"},
		{"fail open", "  failurePolicy: Ignore\n", "warning", "fails open"},
		{"namespaces excluded", "  namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system, kube-node-lease]}]}\n", "", ""},
		{"kube-system excluded only", "  namespaceSelector: {matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [kube-system]}]}\n", "error", "in kube-node-lease"},
		{"opt-in objectSelector", "  objectSelector: {matchLabels: {validate: \"true\"}}\n", "", ""},
		{"matchCondition excluding leases (truce webhook config)",
			"  matchConditions:\n  - name: exclude-leases\n    expression: '!(request.resource.group == \"coordination.k8s.io\" && request.resource.resource == \"leases\")'\n", "", ""},
		{"matchCondition excluding system users",
			"  matchConditions:\n  - name: not-system\n    expression: '!request.userInfo.username.startsWith(\"system:\")'\n", "", ""},
		{"matchCondition on something else",
			"  matchConditions:\n  - name: only-creates\n    expression: 'request.operation == \"CREATE\"'\n", "error", "CREATE in kube-node-lease, CREATE in kube-system"},
		{"matchCondition that errors, fail closed",
			"  failurePolicy: Fail\n  matchConditions:\n  - name: broken\n    expression: 'object.spec.noSuchField == \"x\"'\n", "error", "kube-node-lease"},
		{"matchCondition that errors, fail open",
			"  failurePolicy: Ignore\n  matchConditions:\n  - name: broken\n    expression: 'object.spec.noSuchField == \"x\"'\n", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := checkMatchesLeases(context.Background(), objects(t, leaseWebhook(tt.extra)))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == "" {
				if len(fs) != 0 {
					t.Errorf("want no finding, got %+v", fs)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("want one finding, got %+v", fs)
			}
			if sev := cmpSeverity(fs[0].Severity); sev != tt.want {
				t.Errorf("severity %s, want %s", sev, tt.want)
			}
			if !strings.Contains(fs[0].Message, tt.msg) {
				t.Errorf("message %q does not contain %q", fs[0].Message, tt.msg)
			}
		})
	}
}

// cmpSeverity is a finding's severity as Run reports it: the rule's when
// the check leaves it empty.
func cmpSeverity(s Severity) string {
	if s == "" {
		return string(SeverityError)
	}
	return string(s)
}

func TestFailClosedWithoutExclusion(t *testing.T) {
	hook := func(client, selector, rules string) string {
		return `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: v}
webhooks:
- name: v.example.com
  sideEffects: None
  admissionReviewVersions: [v1]
  clientConfig: ` + client + `
  namespaceSelector: ` + selector + `
  rules: ` + rules
	}
	svc := `{service: {namespace: policy, name: hook}}`
	url := `{url: "https://hook.example.com"}`
	pods := `[{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}]`
	notIn := func(v string) string {
		return `{matchExpressions: [{key: kubernetes.io/metadata.name, operator: NotIn, values: [` + v + `]}]}`
	}
	tests := []struct {
		name  string
		docs  []string
		match []string // namespaces named in the message; nil: no finding
	}{
		{"nothing excluded", []string{hook(svc, `{}`, pods)}, []string{"kube-system", "policy (where its service hook runs)"}},
		{"kube-system excluded", []string{hook(svc, notIn("kube-system"), pods)}, []string{"namespace policy"}},
		{"both excluded", []string{hook(svc, notIn("kube-system, policy"), pods)}, nil},
		{"URL webhook: only kube-system counts", []string{hook(url, notIn("kube-system"), pods)}, nil},
		{"URL webhook, nothing excluded", []string{hook(url, `{}`, pods)}, []string{"kube-system"}},
		{"fail open", []string{strings.Replace(hook(svc, `{}`, pods), "sideEffects: None", "sideEffects: None\n  failurePolicy: Ignore", 1)}, nil},
		{"cluster-scoped resources only", []string{hook(svc, `{}`, `[{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [nodes, persistentvolumes]}]`)}, nil},
		{"namespaces are namespace-selected by their own labels", []string{hook(svc, `{}`, `[{operations: [UPDATE], apiGroups: [""], apiVersions: [v1], resources: [namespaces]}]`)}, []string{"kube-system"}},
		{"opt-in label that the namespaces do not have", []string{hook(svc, `{matchLabels: {policy: enforced}}`, pods)}, nil},
		{"opt-in label that the webhook's namespace has", []string{
			hook(svc, `{matchLabels: {policy: enforced}}`, pods),
			`{apiVersion: v1, kind: Namespace, metadata: {name: policy, labels: {policy: enforced}}}`,
		}, []string{"namespace policy (where"}},
		{"opt-out label on kube-system", []string{
			hook(svc, `{matchExpressions: [{key: control-plane, operator: DoesNotExist}, {key: kubernetes.io/metadata.name, operator: NotIn, values: [policy]}]}`, pods),
			`{apiVersion: v1, kind: Namespace, metadata: {name: kube-system, labels: {control-plane: "true"}}}`,
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := checkFailClosedWithoutExclusion(context.Background(), objects(t, tt.docs...))
			if err != nil {
				t.Fatal(err)
			}
			if tt.match == nil {
				if len(fs) != 0 {
					t.Errorf("want no finding, got %+v", fs)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("want one finding, got %+v", fs)
			}
			for _, m := range tt.match {
				if !strings.Contains(fs[0].Message, m) {
					t.Errorf("message %q does not contain %q", fs[0].Message, m)
				}
			}
		})
	}
}

func TestRuleNeverCalled(t *testing.T) {
	hook := func(rules string) string {
		return `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: m}
webhooks:
- name: m.example.com
  rules: ` + rules
	}
	tests := []struct {
		rules string
		want  []string
	}{
		{`[{operations: [CREATE], apiGroups: [authorization.k8s.io], apiVersions: [v1], resources: [subjectaccessreviews, selfsubjectrulesreviews]}]`,
			[]string{"subjectaccessreviews.authorization.k8s.io", "selfsubjectrulesreviews.authorization.k8s.io", "virtual"}},
		{`[{operations: [CREATE], apiGroups: [admissionregistration.k8s.io], apiVersions: [v1], resources: [validatingadmissionpolicies, mutatingadmissionpolicybindings]}]`,
			[]string{"validatingadmissionpolicies.admissionregistration.k8s.io", "mutatingadmissionpolicybindings.admissionregistration.k8s.io", "admission configuration"}},
		{`[{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods]}, {operations: [CREATE], apiGroups: [authentication.k8s.io], apiVersions: [v1], resources: [tokenreviews]}]`,
			[]string{"webhooks[0].rules[1]: tokenreviews.authentication.k8s.io"}},
		// Wildcards: their intent towards these resources is ambiguous
		// (kube-apiserver does not warn either).
		{`[{operations: [CREATE], apiGroups: ["*"], apiVersions: ["*"], resources: ["*"]}]`, nil},
		{`[{operations: [CREATE], apiGroups: [admissionregistration.k8s.io], apiVersions: [v1], resources: ["*"]}]`, nil},
		// Served to webhooks: included resources and other groups.
		{`[{operations: [CREATE], apiGroups: [""], apiVersions: [v1], resources: [pods/eviction, serviceaccounts/token]}]`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.rules, func(t *testing.T) {
			fs, err := checkRuleNeverCalled(context.Background(), objects(t, hook(tt.rules)))
			if err != nil {
				t.Fatal(err)
			}
			if tt.want == nil {
				if len(fs) != 0 {
					t.Errorf("want no finding, got %+v", fs)
				}
				return
			}
			if len(fs) != 1 {
				t.Fatalf("want one finding, got %+v", fs)
			}
			for _, w := range tt.want {
				if !strings.Contains(fs[0].Message, w) {
					t.Errorf("message %q does not contain %q", fs[0].Message, w)
				}
			}
		})
	}
}

func TestAdmissionConfigResourcesFromUpstream(t *testing.T) {
	got, err := admissionConfigResources()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"mutatingadmissionpolicies", "mutatingadmissionpolicybindings", "mutatingwebhookconfigurations",
		"validatingadmissionpolicies", "validatingadmissionpolicybindings", "validatingwebhookconfigurations",
	}
	for _, w := range want {
		found := false
		for _, gr := range got {
			if gr.Group == "admissionregistration.k8s.io" && gr.Resource == w {
				found = true
			}
		}
		if !found {
			t.Errorf("%s missing from %v", w, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("got %v, want the %d of %v", got, len(want), want)
	}
}

func TestSerialTimeouts(t *testing.T) {
	hook := func(name string, timeout string, resources string) string {
		to := ""
		if timeout != "" {
			to = "\n  timeoutSeconds: " + timeout
		}
		return `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata: {name: ` + name + `}
webhooks:
- name: ` + name + `.example.com` + to + `
  rules: [{operations: [CREATE], apiGroups: ["*"], apiVersions: [v1], resources: [` + resources + `]}]`
	}
	tests := []struct {
		name  string
		docs  []string
		want  int
		parts []string
	}{
		{"one webhook alone", []string{hook("a", "", "pods")}, 0, nil},
		{"two within the limit", []string{hook("a", "2", "pods"), hook("b", "3", "pods")}, 0, nil},
		{"two above", []string{hook("a", "3", "pods"), hook("b", "3", "pods")}, 1, []string{"a.example.com", "b.example.com", "6s"}},
		{"unset counts as 10s", []string{hook("a", "", "pods"), hook("b", "1", "pods")}, 1, []string{"11s"}},
		{"different resources", []string{hook("a", "4", "pods"), hook("b", "4", "services")}, 0, nil},
		{"a wildcard joins both", []string{hook("a", "2", "pods"), hook("b", "2", "services"), hook("c", "4", `"*"`)}, 2, []string{"c.example.com"}},
		{"the largest chain only", []string{hook("a", "2", "pods"), hook("b", "4", "pods, services"), hook("c", "4", "pods")}, 1, []string{"3 mutating webhooks", "10s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fs, err := checkSerialTimeouts(context.Background(), objects(t, tt.docs...))
			if err != nil {
				t.Fatal(err)
			}
			if len(fs) != tt.want {
				t.Fatalf("want %d findings, got %d: %+v", tt.want, len(fs), fs)
			}
			for _, f := range fs {
				for _, p := range tt.parts {
					if !strings.Contains(f.Message, p) {
						t.Errorf("message %q does not contain %q", f.Message, p)
					}
				}
			}
		})
	}
	// The limit is an option.
	in := objects(t, hook("a", "3", "pods"), hook("b", "3", "pods"))
	in.options.MaxWebhookTimeout = 10e9
	if fs, _ := checkSerialTimeouts(context.Background(), in); len(fs) != 0 {
		t.Errorf("with a 10s limit: %+v", fs)
	}
}

func TestObjectSelectorBypass(t *testing.T) {
	for _, tt := range []struct {
		kind, selector string
		want           bool
	}{
		{"ValidatingWebhookConfiguration", `{matchLabels: {enforce: "true"}}`, true},
		{"ValidatingWebhookConfiguration", `{matchExpressions: [{key: skip, operator: DoesNotExist}]}`, true},
		{"ValidatingWebhookConfiguration", `{}`, false},
		{"MutatingWebhookConfiguration", `{matchLabels: {inject: "true"}}`, false},
	} {
		doc := `
apiVersion: admissionregistration.k8s.io/v1
kind: ` + tt.kind + `
metadata: {name: x}
webhooks:
- name: x.example.com
  objectSelector: ` + tt.selector
		fs, err := checkObjectSelectorBypass(context.Background(), objects(t, doc))
		if err != nil {
			t.Fatal(err)
		}
		if got := len(fs) == 1; got != tt.want {
			t.Errorf("%s %s: got %+v, want a finding: %v", tt.kind, tt.selector, fs, tt.want)
		}
	}
}

func TestWebhookDecodeError(t *testing.T) {
	in := objects(t, `{apiVersion: admissionregistration.k8s.io/v1, kind: ValidatingWebhookConfiguration, metadata: {name: x}, webhooks: [{name: x, timeoutSeconds: "ten"}]}`)
	_, err := Run(context.Background(), in, Options{})
	if err == nil || !strings.Contains(err.Error(), "doca.yaml:1") {
		t.Errorf("want an error naming the file and line, got %v", err)
	}
}
