// Package deploy holds the kustomize manifests that run `truce webhook
// serve` in a cluster; this test builds them as `kubectl apply -k` would and
// checks them against the usual production hardening for admission webhooks
// (replicas spread over nodes, exclusions, short timeouts) and against
// kube-apiserver's admission chain.
package deploy

import (
	"context"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/internal/certs"
	"github.com/truce-dev/truce/webhook/configuration"
)

// build renders deploy/ from a copy holding fresh certificates, as a user
// does after `truce webhook certs --out deploy/certs`.
func build(t *testing.T) (objs []*unstructured.Unstructured, caPEM []byte) {
	t.Helper()
	dir := t.TempDir()
	err := filepath.WalkDir(".", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		target := filepath.Join(dir, p)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		// Certificates a developer generated locally are not the test's.
		if filepath.Dir(p) == "certs" || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Serving("truce-webhook.truce-system.svc", []string{"truce-webhook.truce-system.svc"}, []net.IP(nil), time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"ca.crt": ca.PEM, "tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM} {
		if err := os.WriteFile(filepath.Join(dir, "certs", name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}

	m, err := krusty.MakeKustomizer(krusty.MakeDefaultOptions()).Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build: %v", err)
	}
	for _, r := range m.Resources() {
		// Through JSON, so that numbers are int64 as in any decoded object.
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
	return objs, ca.PEM
}

func find(t *testing.T, objs []*unstructured.Unstructured, kind, namePrefix string) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == kind && strings.HasPrefix(o.GetName(), namePrefix) {
			return o
		}
	}
	t.Fatalf("no %s %s*", kind, namePrefix)
	return nil
}

func TestBuild(t *testing.T) {
	objs, caPEM := build(t)
	deployment := find(t, objs, "Deployment", "truce-webhook")
	pod, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template", "spec")
	containers, _, _ := unstructured.NestedSlice(pod, "containers")
	if len(containers) != 1 {
		t.Fatalf("%d containers", len(containers))
	}
	container := containers[0].(map[string]any)
	// The tag comes from deploy/image, the one place that sets it.
	if img, _, _ := unstructured.NestedString(container, "image"); img != "ghcr.io/truce-dev/truce:v0.1.0" {
		t.Errorf("image %q, want deploy/image's ghcr.io/truce-dev/truce:v0.1.0", img)
	}
	str := func(obj map[string]any, path ...string) string {
		s, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
		out, _ := yaml.Marshal(s)
		return strings.TrimSpace(string(out))
	}

	for _, tt := range []struct {
		name string
		ok   func() bool
	}{
		{"everything namespaced is in truce-system", func() bool {
			for _, o := range objs {
				clusterScoped := o.GetKind() == "Namespace" || o.GetKind() == "ClusterRole" || o.GetKind() == "ClusterRoleBinding"
				if !clusterScoped && o.GetNamespace() != "truce-system" {
					return false
				}
			}
			return true
		}},
		{"at least 2 replicas", func() bool {
			n, _, _ := unstructured.NestedInt64(deployment.Object, "spec", "replicas")
			return n >= 2
		}},
		{"rollouts keep every replica ready", func() bool {
			return str(deployment.Object, "spec", "strategy", "rollingUpdate", "maxUnavailable") == "0"
		}},
		{"spread over nodes, preferably", func() bool {
			spread := str(pod, "topologySpreadConstraints")
			return strings.Contains(spread, "topologyKey: kubernetes.io/hostname") && strings.Contains(spread, "whenUnsatisfiable: ScheduleAnyway") &&
				!strings.Contains(spread, "DoNotSchedule")
		}},
		{"preferred anti-affinity", func() bool {
			return strings.Contains(str(pod, "affinity", "podAntiAffinity", "preferredDuringSchedulingIgnoredDuringExecution"), "kubernetes.io/hostname")
		}},
		{"PodDisruptionBudget keeps one", func() bool {
			pdb := find(t, objs, "PodDisruptionBudget", "truce-webhook")
			return str(pdb.Object, "spec", "minAvailable") == "1" &&
				str(pdb.Object, "spec", "selector") == str(deployment.Object, "spec", "selector")
		}},
		{"readiness on /readyz, liveness on /healthz, on the probe port", func() bool {
			return str(container, "readinessProbe", "httpGet", "path") == "/readyz" && str(container, "livenessProbe", "httpGet", "path") == "/healthz" &&
				str(container, "readinessProbe", "httpGet", "port") == "probes" && strings.Contains(str(container, "ports"), "containerPort: 8081\n  name: probes")
		}},
		{"the Service targets the webhook port", func() bool {
			svc := find(t, objs, "Service", "truce-webhook")
			return str(svc.Object, "spec", "ports") == "- name: webhook\n  port: 443\n  protocol: TCP\n  targetPort: webhook" &&
				strings.Contains(str(container, "ports"), "containerPort: 8443\n  name: webhook") &&
				str(svc.Object, "spec", "selector") == str(deployment.Object, "spec", "selector", "matchLabels")
		}},
		{"the server's arguments", func() bool {
			return str(container, "args") == strings.Join([]string{"- webhook", "- serve",
				"- --policies", "- /etc/truce/policies", "- --tls-cert", "- /etc/truce/tls/tls.crt", "- --tls-key", "- /etc/truce/tls/tls.key",
				"- --addr", "- :8443", "- --probe-addr", "- :8081", "- --watch-namespaces"}, "\n")
		}},
		{"resources requested and limited", func() bool {
			return str(container, "resources", "requests", "memory") != "null" && str(container, "resources", "limits", "memory") != "null"
		}},
		{"restricted security context", func() bool {
			sc := str(container, "securityContext")
			return str(pod, "securityContext", "runAsNonRoot") == "true" && str(pod, "securityContext", "seccompProfile", "type") == "RuntimeDefault" &&
				strings.Contains(sc, "readOnlyRootFilesystem: true") && strings.Contains(sc, "allowPrivilegeEscalation: false") &&
				strings.Contains(sc, "drop:\n  - ALL")
		}},
		{"least privilege: read namespaces, nothing else", func() bool {
			var roles []string
			for _, o := range objs {
				switch o.GetKind() {
				case "Role", "RoleBinding":
					return false
				case "ClusterRole":
					roles = append(roles, str(o.Object, "rules"))
				case "ClusterRoleBinding":
					if str(o.Object, "subjects") != "- kind: ServiceAccount\n  name: truce-webhook\n  namespace: truce-system" {
						return false
					}
				}
			}
			return len(roles) == 1 && roles[0] == "- apiGroups:\n  - \"\"\n  resources:\n  - namespaces\n  verbs:\n  - get\n  - list\n  - watch" &&
				str(pod, "serviceAccountName") == "truce-webhook"
		}},
		{"the TLS Secret and the policies are mounted under their generated names", func() bool {
			secret := find(t, objs, "Secret", "truce-webhook-tls-")
			cm := find(t, objs, "ConfigMap", "truce-policies-")
			volumes := str(pod, "volumes")
			return secret.Object["type"] == "kubernetes.io/tls" && strings.Contains(volumes, "secretName: "+secret.GetName()) &&
				strings.Contains(volumes, "name: "+cm.GetName())
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if !tt.ok() {
				t.Error("not the case in the built manifests")
			}
		})
	}

	// The policies the pods serve give webhook configurations for this
	// Service.
	t.Run("the mounted policies generate configurations for the Service", func(t *testing.T) {
		cm := find(t, objs, "ConfigMap", "truce-policies-")
		data, _, _ := unstructured.NestedStringMap(cm.Object, "data")
		var policies []*unstructured.Unstructured
		for _, k := range slices.Sorted(func(yield func(string) bool) {
			for k := range data {
				if !yield(k) {
					return
				}
			}
		}) {
			for _, doc := range strings.Split(data[k], "\n---\n") {
				m := map[string]any{}
				if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
					t.Fatalf("%s: %v", k, err)
				}
				policies = append(policies, &unstructured.Unstructured{Object: m})
			}
		}
		svc := find(t, objs, "Service", "truce-webhook")
		got, err := configuration.Generate(policies, configuration.Options{
			Service:  &configuration.Service{Namespace: svc.GetNamespace(), Name: svc.GetName(), Port: 443},
			CABundle: caPEM,
		})
		if err != nil {
			t.Fatal(err)
		}
		if got.Mutating == nil || got.Validating == nil || len(got.Warnings) != 0 {
			t.Errorf("mutating %v, validating %v, warnings %q", got.Mutating != nil, got.Validating != nil, got.Warnings)
		}
	})
}

// TestAdmitted writes the built objects, in order, through kube-apiserver's
// admission chain offline: each must be valid, and the pods must satisfy
// Pod Security "restricted", which the namespace enforces.
func TestAdmitted(t *testing.T) {
	objs, _ := build(t)
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
		// Pod Security warns about workloads whose pods it would reject.
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
	// The namespace first, as kubectl apply orders it.
	slices.SortStableFunc(objs, func(a, b *unstructured.Unstructured) int {
		return boolInt(b.GetKind() == "Namespace") - boolInt(a.GetKind() == "Namespace")
	})
	for _, o := range objs {
		admit(o)
	}

	// Pod Security enforce applies to pods, not to the Deployment: write
	// one of its pods too.
	deployment := find(t, objs, "Deployment", "truce-webhook")
	template, _, _ := unstructured.NestedMap(deployment.Object, "spec", "template")
	pod := &unstructured.Unstructured{Object: template}
	pod.SetAPIVersion("v1")
	pod.SetKind("Pod")
	pod.SetName("truce-webhook-test")
	pod.SetNamespace("truce-system")
	admit(pod)
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}
