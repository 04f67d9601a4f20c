package gitops

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/drift/ignore"
)

func TestDiscover(t *testing.T) {
	web := deploymentWithAnnotation(t, "/spec/replicas")
	svc := object(t, "apps/svc.yaml:1", "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\nspec:\n  clusterIP: 10.0.0.1\n")
	other := object(t, "apps/cm.yaml:1", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: not-argocd-cm\n")
	objs := []Object{
		object(t, "argocd/cm.yaml:1", argoCM),
		web,
		object(t, "argocd/shop.yaml:1", shopApp),
		svc,
		object(t, "flux/app.yaml:1", podinfoKustomization),
		other,
	}
	s, rest, err := Discover(objs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range rest {
		got = append(got, o.Position.String())
	}
	if strings.Join(got, " ") != "apps/web.yaml:12 apps/svc.yaml:1 apps/cm.yaml:1" {
		t.Errorf("rest = %v", got)
	}
	if len(s.Applications) != 1 || len(s.Kustomizations) != 1 || s.ArgoConfig.Source != "argocd/cm.yaml:1" || len(s.ResourceRules) != 1 {
		t.Fatalf("settings: %+v", s)
	}

	// The Application's rules, the annotation and argocd-cm together, as
	// the Argo CD strategy uses them.
	set, err := ignore.Compile(s.ComparisonFor(Unit{Tool: ignore.ArgoCD, App: s.Applications[0]}).Rules, ignore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	desired := web.DeepCopy()
	ms, err := set.Normalize(context.Background(), desired)
	if err != nil {
		t.Fatal(err)
	}
	if _, found, _ := unstructured.NestedFieldNoCopy(desired.Object, "spec", "replicas"); found {
		t.Error("annotation rule did not remove spec.replicas")
	}
	if len(ms) != 1 || ms[0].Rule.Source != "apps/web.yaml:12" {
		t.Errorf("matches: %+v", ms)
	}
	if r := set.IgnoredBy(svc.Unstructured, "/spec/clusterIP"); r == nil || r.Source != "argocd/cm.yaml:1" {
		t.Errorf("clusterIP ignored by %+v", r)
	}
	// argocd-cm says ignoreResourceStatusField: crd, so a Deployment's
	// status counts.
	if r := set.IgnoredBy(web.Unstructured, "/status/readyReplicas"); r != nil {
		t.Errorf("status ignored by %+v", r)
	}
	// shopApp turns server-side diff on itself, so only argocd-cm's
	// core-kind managers warning is expected.
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0].Field, "ignoreDifferences.Service") {
		t.Errorf("warnings: %v", s.Warnings)
	}
	if rules := s.ComparisonFor(Unit{Tool: ignore.ArgoCD}).Rules; len(rules) == 0 {
		t.Error("the Argo CD comparison without an Application lost the argocd-cm rules")
	}
}

func TestDiscoverErrors(t *testing.T) {
	badApp := object(t, "argocd/a.yaml:3", "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: a\nspec:\n  ignoreDifferences:\n  - kind: Deployment\n    group: apps\n    jqPathExpressions: ['.spec[']\n")
	badKs := object(t, "flux/k.yaml:9", "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\nmetadata:\n  name: k\nspec:\n  ignore:\n  - paths: [/a]\n    target:\n      kind: '('\n")
	cm1 := object(t, "argocd/cm1.yaml:1", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\n")
	cm2 := object(t, "argocd/cm2.yaml:1", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cm\n  namespace: other\n")
	badAnnotation := deploymentWithAnnotation(t, "spec/replicas")
	_, _, err := Discover([]Object{badApp, badKs, cm1, cm2, badAnnotation, {Source: "x.yaml:1"}})
	if err == nil {
		t.Fatal("want errors")
	}
	for _, want := range []string{
		`argocd/a.yaml:3: spec.ignoreDifferences[0]: jqPathExpressions[0] ".spec["`,
		"flux/k.yaml:9: spec.ignore[0]: target: invalid kind regex",
		"argocd/cm2.yaml:1: a second argocd-cm ConfigMap (the first is at argocd/cm1.yaml:1)",
		`apps/web.yaml:12: metadata.annotations[argocd.argoproj.io/ignore-differences]: jsonPointers[0]`,
		"x.yaml:1: empty object",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q\nlacks %q", err, want)
		}
	}
}

func TestDiscoverMutationWebhookWithoutServerSideDiff(t *testing.T) {
	app := object(t, "app.yaml:1", "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata:\n  name: a\n  annotations:\n    argocd.argoproj.io/compare-options: IncludeMutationWebhook=true\n")
	s, _, err := Discover([]Object{app})
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Warnings) != 1 || !strings.Contains(s.Warnings[0].String(), "app.yaml:1: metadata.annotations[argocd.argoproj.io/compare-options]: IncludeMutationWebhook=true has no effect without server-side diff") {
		t.Fatalf("warnings: %v", s.Warnings)
	}
	params := object(t, "params.yaml:1", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: argocd-cmd-params-cm\ndata:\n  controller.diff.server.side: \"true\"\n")
	if s, _, err = Discover([]Object{app, params}); err != nil || len(s.Warnings) != 0 {
		t.Fatalf("with server-side diff on: %v %v", s.Warnings, err)
	}
}
