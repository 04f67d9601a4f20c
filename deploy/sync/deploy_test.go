// Package deploysync holds the kustomize manifests that run `truce sync` in
// a cluster; this test builds them as `kubectl apply -k` would and checks
// them: the flags parse, leader election and probes are wired, the grace
// period covers the shutdown, RBAC grants exactly what a sync uses, and
// everything passes kube-apiserver's admission chain under Pod Security
// "restricted".
package deploysync

import (
	"bytes"
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/internal/cli"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
	"github.com/truce-dev/truce/reconcile/gitsync"
)

func build(t *testing.T) []*unstructured.Unstructured {
	t.Helper()
	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), ".")
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	var objs []*unstructured.Unstructured
	for _, r := range m.Resources() {
		data, err := r.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(data); err != nil {
			t.Fatal(err)
		}
		objs = append(objs, u)
	}
	return objs
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	t.Fatalf("no %s %s", kind, name)
	return nil
}

func str(obj map[string]any, path ...string) string {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	out, _ := yaml.Marshal(v)
	return strings.TrimSpace(string(out))
}

// flag returns the value of --name=value in args.
func flag(args []string, name string) string {
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, "--"+name+"="); ok {
			return v
		}
	}
	return ""
}

func TestBuild(t *testing.T) {
	objs := build(t)
	deployment := find(t, objs, "Deployment", "truce-sync")
	pod, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template", "spec")
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	container := containers[0].(map[string]any)
	args, _, _ := unstructured.NestedStringSlice(container, "args")
	// The tag comes from deploy/image, shared with deploy/.
	if img, _, _ := unstructured.NestedString(container, "image"); img != "ghcr.io/truce-dev/truce:v0.1.0" {
		t.Errorf("image %q, want deploy/image's ghcr.io/truce-dev/truce:v0.1.0", img)
	}

	for _, tt := range []struct {
		name string
		ok   func() bool
	}{
		{"the CRD is the one truce embeds", func() bool {
			data, err := os.ReadFile("crd.yaml")
			return err == nil && bytes.Equal(data, gitsync.CRDYAML)
		}},
		{"namespaced objects are in truce-system, the app grant in the app's namespace", func() bool {
			for _, o := range objs {
				switch o.GetKind() {
				case "Namespace", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition":
				case "RoleBinding":
					if o.GetName() == "truce-sync-apply" {
						if o.GetNamespace() != "shop" {
							return false
						}
						continue
					}
					fallthrough
				default:
					if o.GetNamespace() != "truce-system" {
						return false
					}
				}
			}
			return true
		}},
		{"2 replicas, rollouts keep them ready", func() bool {
			n, _, _ := unstructured.NestedInt64(deployment.Object, "spec", "replicas")
			return n == 2 && str(deployment.Object, "spec", "strategy", "rollingUpdate", "maxUnavailable") == "0"
		}},
		{"a controller in the cluster, with leader election (its default there)", func() bool {
			return len(args) > 2 && args[0] == "sync" && slices.Contains(args, "--in-cluster") && flag(args, "interval") != "" &&
				!slices.Contains(args, "--once") && !slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--leader-elect") })
		}},
		{"the arguments are truce sync's flags", func() bool {
			var out, errOut bytes.Buffer
			code := cli.Execute(context.Background(), append(slices.Clone(args), "--help"), strings.NewReader(""), &out, &errOut)
			if code != 0 {
				t.Logf("truce %s --help: exit %d: %s", strings.Join(args, " "), code, errOut.String())
			}
			return code == 0
		}},
		{"the SOURCE parses as a Git URL", func() bool {
			_, ok := manifest.ParseGitArg(args[1])
			return ok
		}},
		{"the Lease rbac.yaml names is the sync's", func() bool {
			role := find(t, objs, "Role", "truce-sync")
			return strings.Contains(str(role.Object, "rules"), "resourceNames:\n  - truce-sync-"+flag(args, "name")+"\n")
		}},
		{"readiness on /readyz, liveness on /healthz, on --health-addr", func() bool {
			return str(container, "readinessProbe", "httpGet", "path") == "/readyz" && str(container, "livenessProbe", "httpGet", "path") == "/healthz" &&
				str(container, "readinessProbe", "httpGet", "port") == "probes" && str(container, "livenessProbe", "httpGet", "port") == "probes" &&
				strings.Contains(str(container, "ports"), "containerPort: 8081\n  name: probes") && flag(args, "health-addr") == ":8081"
		}},
		{"metrics on --metrics-addr", func() bool {
			return strings.Contains(str(container, "ports"), "containerPort: 8080\n  name: metrics") && flag(args, "metrics-addr") == ":8080"
		}},
		{"the grace period covers the pass's grace and the manager's shutdown", func() bool {
			grace, err := time.ParseDuration(flag(args, "shutdown-grace"))
			period, _, _ := unstructured.NestedInt64(pod, "terminationGracePeriodSeconds")
			// truce sync gives the manager the pass's grace plus 10s.
			return err == nil && time.Duration(period)*time.Second >= grace+10*time.Second+5*time.Second
		}},
		{"resources requested and limited", func() bool {
			return str(container, "resources", "requests", "memory") != "null" && str(container, "resources", "limits", "memory") != "null" &&
				str(container, "resources", "requests", "cpu") != "null"
		}},
		{"restricted security context", func() bool {
			sc := str(container, "securityContext")
			return str(pod, "securityContext", "runAsNonRoot") == "true" && str(pod, "securityContext", "seccompProfile", "type") == "RuntimeDefault" &&
				strings.Contains(sc, "readOnlyRootFilesystem: true") && strings.Contains(sc, "allowPrivilegeEscalation: false") &&
				strings.Contains(sc, "drop:\n  - ALL") && str(pod, "serviceAccountName") == "truce-sync"
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok() {
				t.Error("not the case in the built manifests")
			}
		})
	}
}

// rule is an RBAC policy rule; grants are the rules that apply to the
// service account in a namespace ("" for cluster-wide ones).
type rule struct {
	APIGroups, Resources, ResourceNames, Verbs []string
}

type grant struct {
	namespace string
	rules     []rule
}

// grants resolves the built RBAC for the ServiceAccount truce-sync.
func grants(t *testing.T, objs []*unstructured.Unstructured) []grant {
	t.Helper()
	rulesOf := func(kind, name string) []rule {
		var rs []rule
		role := find(t, objs, kind, name)
		data, _ := yaml.Marshal(role.Object["rules"])
		if err := yaml.Unmarshal(data, &rs); err != nil {
			t.Fatal(err)
		}
		return rs
	}
	var out []grant
	for _, o := range objs {
		if o.GetKind() != "RoleBinding" && o.GetKind() != "ClusterRoleBinding" {
			continue
		}
		if s := str(o.Object, "subjects"); s != "- kind: ServiceAccount\n  name: truce-sync\n  namespace: truce-system" {
			t.Errorf("%s %s binds %s", o.GetKind(), o.GetName(), s)
		}
		kind, _, _ := unstructured.NestedString(o.Object, "roleRef", "kind")
		name, _, _ := unstructured.NestedString(o.Object, "roleRef", "name")
		out = append(out, grant{namespace: o.GetNamespace(), rules: rulesOf(kind, name)})
	}
	return out
}

func match(list []string, v string) bool { return slices.Contains(list, v) }

// allowed reports whether the grants allow verb on group/resource (name
// may be empty) in namespace ("" for a cluster-scoped or all-namespace
// request, which only cluster-wide grants allow).
func allowed(gs []grant, verb, group, resource, namespace, name string) bool {
	for _, g := range gs {
		if g.namespace != "" && g.namespace != namespace {
			continue
		}
		for _, r := range g.rules {
			if match(r.Verbs, verb) && match(r.APIGroups, group) && match(r.Resources, resource) &&
				(len(r.ResourceNames) == 0 || match(r.ResourceNames, name)) {
				return true
			}
		}
	}
	return false
}

func TestLeastPrivilege(t *testing.T) {
	objs := build(t)
	gs := grants(t, objs)
	for _, o := range objs {
		if o.GetKind() == "Role" || o.GetKind() == "ClusterRole" {
			if s := str(o.Object, "rules"); strings.Contains(s, "'*'") || strings.Contains(s, `"*"`) {
				t.Errorf("%s %s has a wildcard:\n%s", o.GetKind(), o.GetName(), s)
			}
		}
	}
	type request struct{ verb, group, resource, namespace, name string }
	var needed []request
	for _, verb := range []string{"get", "list"} {
		for _, gvk := range admission.ConfigurationKinds {
			plural, _ := meta.UnsafeGuessKindToResource(gvk)
			needed = append(needed, request{verb, gvk.Group, plural.Resource, "", ""})
		}
		needed = append(needed, request{verb, "", "namespaces", "", ""}, request{verb, "apiextensions.k8s.io", "customresourcedefinitions", "", ""})
	}
	needed = append(needed,
		// leader election (controller-runtime's LeaseLock)
		request{"create", "coordination.k8s.io", "leases", "truce-system", ""},
		request{"get", "coordination.k8s.io", "leases", "truce-system", "truce-sync-shop"},
		request{"update", "coordination.k8s.io", "leases", "truce-system", "truce-sync-shop"},
		// events: the sync's own, cluster-scoped objects', the app's
		request{"create", "", "events", "truce-system", ""},
		request{"create", "events.k8s.io", "events", "truce-system", ""},
		request{"create", "", "events", "shop", ""},
		// the GitSync: Check lists, Load gets, Save applies (creating it)
		request{"list", "truce.dev", "gitsyncs", "truce-system", ""},
		request{"get", "truce.dev", "gitsyncs", "truce-system", "shop"},
		request{"create", "truce.dev", "gitsyncs", "truce-system", "shop"},
		request{"patch", "truce.dev", "gitsyncs", "truce-system", "shop"},
		request{"patch", "truce.dev", "gitsyncs/status", "truce-system", "shop"},
		// the example application
		request{"get", "apps", "deployments", "shop", "web"},
		request{"create", "apps", "deployments", "shop", "web"},
		request{"patch", "apps", "deployments", "shop", "web"},
		request{"delete", "", "configmaps", "shop", "settings"},
	)
	for _, r := range needed {
		if !allowed(gs, r.verb, r.group, r.resource, r.namespace, r.name) {
			t.Errorf("not allowed: %+v", r)
		}
	}
	for _, r := range []request{
		{"update", "coordination.k8s.io", "leases", "truce-system", "someone-else"},
		{"delete", "truce.dev", "gitsyncs", "truce-system", "shop"},
		{"get", "", "secrets", "truce-system", "x"},
		{"get", "", "secrets", "shop", "x"},
		{"patch", "apps", "deployments", "kube-system", "coredns"},
		{"patch", "admissionregistration.k8s.io", "mutatingwebhookconfigurations", "", "x"},
		{"create", "", "namespaces", "", "x"},
		{"list", "apps", "deployments", "", ""},
		{"update", "apps", "deployments", "shop", "web"},
	} {
		if allowed(gs, r.verb, r.group, r.resource, r.namespace, r.name) {
			t.Errorf("allowed, should not be: %+v", r)
		}
	}
}

// TestAdmitted writes the built objects through kube-apiserver's admission
// chain offline, namespaces and the CRD first: each must be valid, the pods
// must satisfy Pod Security "restricted", and the GitSync the pods write
// must fit the CRD.
func TestAdmitted(t *testing.T) {
	objs := build(t)
	ctx := context.Background()
	state, err := admission.NewState()
	if err != nil {
		t.Fatal(err)
	}
	chain, err := admission.NewChain(ctx, state, admission.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { chain.Close() }()
	admit := func(o *unstructured.Unstructured) {
		t.Helper()
		res, err := chain.Admit(ctx, admission.Request{Object: o})
		if err != nil {
			t.Fatalf("%s %s: %v", o.GetKind(), o.GetName(), err)
		}
		if !res.Allowed {
			t.Fatalf("%s %s denied: %s", o.GetKind(), o.GetName(), res.Message)
		}
		if len(res.Warnings) != 0 {
			t.Errorf("%s %s: warnings %q", o.GetKind(), o.GetName(), res.Warnings)
		}
		reconfigure, err := chain.Commit(res)
		if err != nil {
			t.Fatal(err)
		}
		if reconfigure {
			chain.Close()
			if chain, err = admission.NewChain(ctx, state, admission.Options{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	// The application's namespace exists before its RoleBinding.
	shop := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": "shop"}}}
	first := func(o *unstructured.Unstructured) int {
		switch o.GetKind() {
		case "Namespace":
			return 0
		case "CustomResourceDefinition":
			return 1
		}
		return 2
	}
	objs = append([]*unstructured.Unstructured{shop}, objs...)
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int { return first(a) - first(b) })
	for _, o := range objs {
		admit(o)
	}

	deployment := find(t, objs, "Deployment", "truce-sync")
	template, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template")
	pod := &unstructured.Unstructured{Object: template}
	pod.SetAPIVersion("v1")
	pod.SetKind("Pod")
	pod.SetName("truce-sync-test")
	pod.SetNamespace("truce-system")
	admit(pod)

	// The GitSync the pods apply, for their arguments.
	containers, _, _ := unstructured.NestedSlice(template, "spec", "containers")
	args, _, _ := unstructured.NestedStringSlice(containers[0].(map[string]any), "args")
	src, _ := manifest.ParseGitArg(args[1])
	opts := reconcile.DefaultOptions()
	opts.Prune = true
	interval, err := time.ParseDuration(flag(args, "interval"))
	if err != nil {
		t.Fatal(err)
	}
	spec := gitsync.SpecFor(src, opts, interval, nil)
	data, err := yaml.Marshal(map[string]any{"apiVersion": "truce.dev/v1alpha1", "kind": "GitSync",
		"metadata": map[string]any{"name": flag(args, "name"), "namespace": flag(args, "namespace")}, "spec": spec})
	if err != nil {
		t.Fatal(err)
	}
	gs := &unstructured.Unstructured{}
	if err := yaml.Unmarshal(data, &gs.Object); err != nil {
		t.Fatal(err)
	}
	admit(gs)
	if got, _ := strconv.Atoi(strings.TrimSuffix(str(gs.Object, "spec", "loop", "threshold"), "\n")); got != 3 {
		t.Errorf("loop threshold %d", got)
	}
}
