package simulate

import (
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func writersDocument(t testing.TB, spec string) *unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte("apiVersion: truce.dev/v1alpha1\nkind: Writers\nmetadata: {name: w}\nspec:\n"+spec), &m); err != nil {
		t.Fatal(err)
	}
	return &unstructured.Unstructured{Object: m}
}

func TestParseWriters(t *testing.T) {
	cases := []struct {
		name, spec string
		want       string // Describe of the first writer
		wantErr    string
		detect     bool
	}{
		{name: "operator", spec: "  writers:\n  - type: Operator\n    manager: op\n    target: {kind: ConfigMap, namespace: a, name: b}\n    set: {/data/k: v}\n",
			want: `Operator "op" writes /data/k of ConfigMap a/b`, detect: true},
		{name: "hpa", spec: "  detect: false\n  writers:\n  - type: HorizontalPodAutoscaler\n    target: {group: apps, kind: Deployment, name: web}\n    replicas: 4\n",
			want: `HorizontalPodAutoscaler "kube-controller-manager" writes /spec/replicas of Deployment.apps web`},
		{name: "generate", spec: "  writers:\n  - type: KyvernoGenerate\n    clone: {kind: Secret, namespace: a, name: s}\n    namespaces: [b, c]\n    synchronize: true\n",
			want: `KyvernoGenerate "kyverno-background-controller" clones Secret a/s into b, c (with synchronize)`, detect: true},
		{name: "aggregation", spec: "  detect: false\n  writers:\n  - type: ClusterRoleAggregation\n",
			want: `ClusterRoleAggregation "clusterrole-aggregation-controller" writes the rules of every ClusterRole with an aggregationRule`},
		{name: "unknown type", spec: "  writers:\n  - type: Argo\n", wantErr: `x.yaml:3: spec.writers[0]: type: want one of`},
		{name: "unknown field", spec: "  writers:\n  - type: Operator\n    sett: {}\n", wantErr: `unknown field "spec.writers[0].sett"`},
		{name: "no target", spec: "  writers:\n  - type: Operator\n    set: {/a: b}\n", wantErr: "target.kind is required"},
		{name: "bad pointer", spec: "  writers:\n  - type: Operator\n    target: {kind: ConfigMap}\n    set: {data: b}\n", wantErr: `"data" is not a JSON pointer`},
		{name: "bad duration", spec: "  writers:\n  - type: Operator\n    target: {kind: ConfigMap}\n    set: {/a: b}\n    after: soon\n", wantErr: "after: \"soon\" is not a duration"},
		{name: "hpa without replicas", spec: "  writers:\n  - type: HorizontalPodAutoscaler\n    target: {kind: Deployment}\n", wantErr: "replicas is required"},
		{name: "clone and data", spec: "  writers:\n  - type: KyvernoGenerate\n    clone: {kind: Secret, name: s}\n    namespaces: [b]\n    data: {apiVersion: v1, kind: Secret, metadata: {name: x}}\n", wantErr: "clone and data are alternatives"},
		{name: "bad operation", spec: "  writers:\n  - type: Operator\n    operation: Patch\n    target: {kind: ConfigMap}\n    set: {/a: b}\n", wantErr: "operation: want Update or Apply"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ws, detect, err := ParseWriters(writersDocument(t, tc.spec), "x.yaml:3")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := ws[0].Describe(); got != tc.want {
				t.Errorf("Describe() = %q, want %q", got, tc.want)
			}
			if detect != tc.detect {
				t.Errorf("detect = %v, want %v", detect, tc.detect)
			}
		})
	}
}

func TestDetectWriters(t *testing.T) {
	d := desiredOf(t, web+"---\n"+`apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web, namespace: shop}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 2
  maxReplicas: 7
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: hooks
  annotations: {cert-manager.io/inject-ca-from: sys/cert}
webhooks:
- {name: a.example.com, clientConfig: {service: {namespace: sys, name: a}}, admissionReviewVersions: [v1], sideEffects: None}
- {name: b.example.com, clientConfig: {service: {namespace: sys, name: b}}, admissionReviewVersions: [v1], sideEffects: None}
`)
	ws := DetectWriters(d)
	if len(ws) != 2 {
		t.Fatalf("%d writers, want 2", len(ws))
	}
	hpa := ws[0].(*FieldWriter)
	// Git says minReplicas already: the HPA is assumed to hold maxReplicas.
	if hpa.Set["/spec/replicas"] != int64(7) || hpa.After != 15*time.Second || hpa.Target.Name != "web" || hpa.Target.Group != "apps" {
		t.Errorf("hpa writer %+v", hpa)
	}
	ca := ws[1].(*FieldWriter)
	if len(ca.Set) != 2 || ca.Set["/webhooks/1/clientConfig/caBundle"] == nil || ca.Manager != "cert-manager-cainjector" {
		t.Errorf("cainjector writer %+v", ca)
	}
}

func FuzzParseWriters(f *testing.F) {
	f.Add("  writers:\n  - type: Operator\n    target: {kind: ConfigMap}\n    set: {/a: b}\n")
	f.Add("  writers:\n  - type: KyvernoGenerate\n    data: {apiVersion: v1, kind: Secret, metadata: {name: x}}\n")
	f.Add("  writers:\n  - type: HorizontalPodAutoscaler\n    target: {kind: Deployment}\n    replicas: 3\n    after: 1h\n")
	f.Fuzz(func(t *testing.T, spec string) {
		m := map[string]any{}
		if err := yaml.Unmarshal([]byte("apiVersion: truce.dev/v1alpha1\nkind: Writers\nspec:\n"+spec), &m); err != nil {
			return
		}
		ws, _, err := ParseWriters(&unstructured.Unstructured{Object: m}, "f.yaml:1")
		if err != nil {
			return
		}
		for _, w := range ws {
			_ = w.Describe()
			if w.Delay() < 0 {
				t.Fatalf("negative delay from %q", spec)
			}
		}
	})
}
