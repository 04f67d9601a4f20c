package check

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/report"
)

const repo = `apiVersion: v1
kind: Namespace
metadata: {name: shop}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: mirror}
spec: {policyName: mirror}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: injected
  annotations: {cert-manager.io/inject-ca-from: sys/cert}
webhooks: []
---
apiVersion: truce.dev/v1alpha1
kind: Writers
metadata: {name: w}
spec:
  detect: false
  writers:
  - {type: Operator, target: {kind: ConfigMap, name: c}, set: {/data/k: v}}
---
apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop}
spec:
  destination: {namespace: shop}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: shop}
data: {k: git}
`

func TestSplit(t *testing.T) {
	objs, err := manifest.Decode("repo.yaml", strings.NewReader(repo), manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	r, err := Split(Input{Repository: objs})
	if err != nil {
		t.Fatal(err)
	}
	var desired, base []string
	for _, d := range r.Desired {
		desired = append(desired, d.Object.GetKind()+"/"+d.Object.GetName()+"@"+d.Source.String())
	}
	for _, b := range r.Base {
		base = append(base, b.Object.GetKind()+"/"+b.Object.GetName())
	}
	// The namespace exists before the sync and is applied too; the binding
	// is the cluster's; a webhook configuration cainjector manages stays a
	// manifest; the Writers document and the Application are settings.
	if got, want := strings.Join(desired, " "), "Namespace/shop@repo.yaml:1 ValidatingWebhookConfiguration/injected@repo.yaml:10 ConfigMap/c@repo.yaml:31"; got != want {
		t.Errorf("desired %s, want %s", got, want)
	}
	if got, want := strings.Join(base, " "), "Namespace/shop MutatingAdmissionPolicyBinding/mirror"; got != want {
		t.Errorf("base %s, want %s", got, want)
	}
	if len(r.Settings.Applications) != 1 {
		t.Errorf("applications %d", len(r.Settings.Applications))
	}
	ws, err := r.Writers()
	if err != nil || len(ws) != 1 || r.detect {
		t.Errorf("writers %v, %v, detect %v", ws, err, r.detect)
	}
	if got := focus(r.Desired, cluster.RefOf(r.Desired[2].Object)); len(got) != 2 {
		t.Errorf("focus kept %d manifests, want the ConfigMap and the namespace", len(got))
	}
}

func TestBrief(t *testing.T) {
	for in, want := range map[string]string{
		"short":                 "short",
		strings.Repeat("x", 70): strings.Repeat("x", 60) + "… (70 bytes)",
		"a: 1\nb: 2":            "a: 1… (9 bytes)",
	} {
		if got := brief(in); got != want {
			t.Errorf("brief(%q) = %q, want %q", in, got, want)
		}
	}
}

// The settings' findings keep the file and line apart from the message:
// gitops' warnings and the ignore rules that do nothing.
func TestSplitFindings(t *testing.T) {
	const app = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop}
spec:
  syncPolicy:
    syncOptions: [ServerSideApply=True]
  ignoreDifferences:
  - {group: apps, kind: Deployment, jsonPointers: [/spec/replicas]}
`
	objs, err := manifest.Decode("argocd/app.yaml", strings.NewReader(app), manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	r, err := Split(Input{Repository: objs})
	if err != nil {
		t.Fatal(err)
	}
	want := []report.Finding{
		{Source: "argocd/app.yaml:1", Message: `spec.syncPolicy.syncOptions[0]: "ServerSideApply=True" is not "ServerSideApply=true": Argo CD compares sync options as exact strings and ignores this one`},
		{Source: "argocd/app.yaml:1", Message: "spec.ignoreDifferences[0]: target {group: apps, kind: Deployment} matches none of the 0 objects"},
	}
	if len(r.Findings) != len(want) {
		t.Fatalf("findings %+v", r.Findings)
	}
	for i, f := range r.Findings {
		if f.Source != want[i].Source || !strings.HasPrefix(f.Message, want[i].Message) {
			t.Errorf("finding %d: %+v, want %+v", i, f, want[i])
		}
	}
}
