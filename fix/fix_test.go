package fix

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

func TestCELPath(t *testing.T) {
	cases := map[string]string{
		"/spec/template/spec/containers/0/image":      "object.spec.template.spec.containers[0].image",
		"/metadata/annotations/example.com~1revision": `object.metadata.annotations["example.com/revision"]`,
		"/spec/in":        `object.spec["in"]`,
		"/data/log-level": `object.data["log-level"]`,
	}
	for ptr, want := range cases {
		got, err := celPath(ptr)
		if err != nil || got != want {
			t.Errorf("celPath(%q) = %q, %v; want %q", ptr, got, err, want)
		}
	}
	for v, want := range map[any]string{"a\"b": `"a\"b"`, int64(3): "3", true: "true", 1.5: "1.5"} {
		if got, err := celLiteral(v); err != nil || got != want {
			t.Errorf("celLiteral(%v) = %q, %v; want %q", v, got, err, want)
		}
	}
	if _, err := celLiteral(map[string]any{}); err == nil {
		t.Error("a map is not a literal")
	}
}

func TestRemoveDocument(t *testing.T) {
	const file = "# policies\napiVersion: v1\nkind: A\nmetadata: {name: a}\n---\n# the binding\napiVersion: v1\nkind: B\nmetadata: {name: b}\n---\napiVersion: v1\nkind: C\nmetadata: {name: c}\n"
	cases := []struct {
		line int
		want string
	}{
		{2, "# the binding\napiVersion: v1\nkind: B\nmetadata: {name: b}\n---\napiVersion: v1\nkind: C\nmetadata: {name: c}\n"},
		{7, "# policies\napiVersion: v1\nkind: A\nmetadata: {name: a}\n---\napiVersion: v1\nkind: C\nmetadata: {name: c}\n"},
		{11, "# policies\napiVersion: v1\nkind: A\nmetadata: {name: a}\n---\n# the binding\napiVersion: v1\nkind: B\nmetadata: {name: b}\n"},
	}
	for _, tc := range cases {
		got, err := removeDocument("p.yaml", []byte(file), tc.line)
		if err != nil {
			t.Fatalf("line %d: %v", tc.line, err)
		}
		if string(got) != tc.want {
			t.Errorf("line %d:\n%s\nwant:\n%s", tc.line, got, tc.want)
		}
	}
}

const web = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web   # the storefront
  namespace: shop
spec:
  template:
    spec:
      containers:
      - name: nginx
        image: nginx:1.27 # upstream
`

const app = `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata:
  name: shop
spec:
  syncPolicy:
    automated: {selfHeal: true}
`

const policy = `apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: mirror}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["deployments"]}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: mirror}
spec: {policyName: mirror}
`

func TestCandidatesForAnAdmissionLoop(t *testing.T) {
	files := map[string]string{"app/web.yaml": web, "argocd/app.yaml": app, "cluster/policy.yaml": policy}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errNotExist
	}
	p := imageLoop(t, "web", 1)
	cands, skipped := Candidates(p, read)
	var kinds []string
	for _, c := range cands {
		kinds = append(kinds, string(c.Kind))
	}
	if got := strings.Join(kinds, ","); got != "git-value,validating-policy,argocd-server-side-diff,ignore-rule" {
		t.Fatalf("kinds %s (skipped %v)", got, skipped)
	}
	// 1: only the image's bytes change; the comments stay.
	if got := string(cands[0].Files["app/web.yaml"]); got != strings.Replace(web, "image: nginx:1.27 # upstream", "image: registry.internal/nginx:1.27 # upstream", 1) {
		t.Errorf("git-value:\n%s", got)
	}
	// 2: the binding goes, a Warn policy comes.
	vap := string(cands[1].Files["cluster/mirror-validate.yaml"])
	for _, want := range []string{"kind: ValidatingAdmissionPolicy", `object.spec.template.spec.containers[0].image == "registry.internal/nginx:1.27"`, "- Warn", `object.metadata.name == "web"`} {
		if !strings.Contains(vap, want) {
			t.Errorf("validating policy lacks %q:\n%s", want, vap)
		}
	}
	if got := string(cands[1].Files["cluster/policy.yaml"]); strings.Contains(got, "MutatingAdmissionPolicyBinding") || !strings.Contains(got, "kind: MutatingAdmissionPolicy") {
		t.Errorf("policy file after the fix:\n%s", got)
	}
	// 3: compare options and server-side apply.
	if got := string(cands[2].Files["argocd/app.yaml"]); !strings.Contains(got, "argocd.argoproj.io/compare-options: ServerSideDiff=true,IncludeMutationWebhook=true") || !strings.Contains(got, "ServerSideApply=true") {
		t.Errorf("server-side diff:\n%s", got)
	}
	// 4: a jq path selecting the container by name, and RespectIgnoreDifferences.
	if got := string(cands[3].Files["argocd/app.yaml"]); !strings.Contains(got, `.spec.template.spec.containers[] | select(.name == "nginx") | .image`) || !strings.Contains(got, "RespectIgnoreDifferences=true") {
		t.Errorf("ignore rule:\n%s", got)
	}
	if cands[3].Warning == "" {
		t.Error("an ignore rule must warn that real drift becomes invisible")
	}
}

func TestNoFixForAControllerLoopButIgnoring(t *testing.T) {
	ref := cluster.Ref{Namespace: "shop", Name: "web"}
	ref.Group, ref.Version, ref.Kind = "apps", "v1", "Deployment"
	o := &simulate.Object{Ref: ref, InGit: true, Verdict: simulate.Loop,
		Loop:  &simulate.LoopInfo{Fields: []string{"/spec/replicas"}, Other: "kube-controller-manager", OtherKind: "controller"},
		Drift: &drift.Object{}}
	ks := "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata: {name: web}\nspec:\n  interval: 10m\n"
	read := func(string) ([]byte, error) { return []byte(ks), nil }
	cands, _ := Candidates(Problem{Tool: "flux", Object: o, Kustomization: &gitops.FluxKustomization{Name: "web", Source: manifest.Source{File: "ks.yaml", Line: 1}}}, read)
	if len(cands) != 1 || cands[0].Kind != KindIgnoreRule {
		t.Fatalf("candidates %+v", cands)
	}
	want := ks + "  ignore:\n    - paths:\n        - /spec/replicas\n      target:\n        group: apps\n        kind: Deployment\n        name: ^web$\n        namespace: ^shop$\n"
	if got := string(cands[0].Files["ks.yaml"]); got != want {
		t.Errorf("got:\n%s\nwant:\n%s", got, want)
	}
}
