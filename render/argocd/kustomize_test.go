package argocd

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

func TestKustomizeExampleApps(t *testing.T) {
	const kg = " (kustomization kustomize-guestbook/kustomization.yaml)"
	tests := []struct {
		name  string
		dir   string
		spec  KustomizeSpec
		want  []string
		check func(t *testing.T, objs map[string]*unstructured.Unstructured)
	}{
		{name: "as it is", dir: "kustomize-guestbook", want: []string{
			"kustomize-guestbook/guestbook-ui-svc.yaml:1" + kg + " Service/kustomize-guestbook-ui",
			"kustomize-guestbook/guestbook-ui-deployment.yaml:1" + kg + " Deployment/kustomize-guestbook-ui",
		}},
		{name: "name prefix replaces the kustomization's, suffix added", dir: "kustomize-guestbook",
			spec: KustomizeSpec{NamePrefix: "argo-", NameSuffix: "-v2"}, want: []string{
				"kustomize-guestbook/guestbook-ui-svc.yaml:1" + kg + " Service/argo-guestbook-ui-v2",
				"kustomize-guestbook/guestbook-ui-deployment.yaml:1" + kg + " Deployment/argo-guestbook-ui-v2",
			}},
		{name: "namespace, images, replicas", dir: "kustomize-guestbook", spec: KustomizeSpec{
			Namespace: "prod",
			Images:    []string{"gcr.io/google-samples/gb-frontend=quay.io/truce/frontend:$ARGOCD_APP_REVISION_SHORT"},
			Replicas:  []Replica{{Name: "kustomize-guestbook-ui", Count: intstr.FromString("3")}},
			Env:       App{Revision: "abcdef0123"}.Env(),
		}, check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			d := objs["Deployment/kustomize-guestbook-ui"]
			if d.GetNamespace() != "prod" || objs["Service/kustomize-guestbook-ui"].GetNamespace() != "prod" {
				t.Errorf("namespace not set")
			}
			if img := field(d, "spec", "template", "spec", "containers", 0, "image"); img != "quay.io/truce/frontend:abcdef0" {
				t.Errorf("image = %v", img)
			}
			if r := field(d, "spec", "replicas"); r != int64(3) {
				t.Errorf("replicas = %v", r)
			}
		}},
		{name: "common labels reach selectors", dir: "kustomize-guestbook", spec: KustomizeSpec{
			CommonLabels: map[string]string{"team": "$ARGOCD_APP_NAME"}, Env: App{Name: "gb"}.Env(),
		}, check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			d := objs["Deployment/kustomize-guestbook-ui"]
			if d.GetLabels()["team"] != "gb" || field(d, "spec", "selector", "matchLabels", "team") != "gb" ||
				field(d, "spec", "template", "metadata", "labels", "team") != "gb" {
				t.Errorf("labels: %v", d.Object)
			}
		}},
		{name: "labels without selector", dir: "kustomize-guestbook", spec: KustomizeSpec{
			CommonLabels: map[string]string{"team": "a"}, LabelWithoutSelector: true,
		}, check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			d := objs["Deployment/kustomize-guestbook-ui"]
			if d.GetLabels()["team"] != "a" || field(d, "spec", "selector", "matchLabels", "team") != nil ||
				field(d, "spec", "template", "metadata", "labels", "team") != nil {
				t.Errorf("labels: %v", d.Object)
			}
		}},
		{name: "labels without selector, with templates", dir: "kustomize-guestbook", spec: KustomizeSpec{
			CommonLabels: map[string]string{"team": "a"}, LabelWithoutSelector: true, LabelIncludeTemplates: true,
		}, check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			d := objs["Deployment/kustomize-guestbook-ui"]
			if field(d, "spec", "selector", "matchLabels", "team") != nil || field(d, "spec", "template", "metadata", "labels", "team") != "a" {
				t.Errorf("labels: %v", d.Object)
			}
		}},
		{name: "annotations substituted only when asked", dir: "kustomize-guestbook", spec: KustomizeSpec{
			CommonAnnotations: map[string]string{"a": "$ARGOCD_APP_NAME", "b": `"quoted: yes"`}, Env: App{Name: "gb"}.Env(),
		}, check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			a := objs["Service/kustomize-guestbook-ui"].GetAnnotations()
			if a["a"] != "$ARGOCD_APP_NAME" || a["b"] != "quoted: yes" {
				t.Errorf("annotations = %v", a)
			}
		}},
		{name: "annotations substituted", dir: "kustomize-guestbook", spec: KustomizeSpec{
			CommonAnnotations: map[string]string{"a": "$ARGOCD_APP_NAME"}, CommonAnnotationsEnvsubst: true, Env: App{Name: "gb"}.Env(),
		}, check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			if a := objs["Service/kustomize-guestbook-ui"].GetAnnotations(); a["a"] != "gb" {
				t.Errorf("annotations = %v", a)
			}
		}},
		{name: "patches", dir: "kustomize-guestbook", spec: KustomizeSpec{Patches: []map[string]any{
			{"target": map[string]any{"kind": "Deployment"}, "patch": `[{"op": "replace", "path": "/spec/replicas", "value": 7}]`},
			{"patch": "apiVersion: v1\nkind: Service\nmetadata:\n  name: guestbook-ui\nspec:\n  type: NodePort\n"},
		}}, check: func(t *testing.T, objs map[string]*unstructured.Unstructured) {
			if r := field(objs["Deployment/kustomize-guestbook-ui"], "spec", "replicas"); r != int64(7) {
				t.Errorf("replicas = %v", r)
			}
			if ty := field(objs["Service/kustomize-guestbook-ui"], "spec", "type"); ty != "NodePort" {
				t.Errorf("type = %v", ty)
			}
		}},
		{name: "overlay with bases", dir: "pre-post-sync", spec: KustomizeSpec{NamePrefix: "x-"}, want: []string{
			"kustomize-guestbook/guestbook-ui-svc.yaml:1 (kustomization pre-post-sync/kustomization.yaml) Service/x-kustomize-guestbook-ui",
			"kustomize-guestbook/guestbook-ui-deployment.yaml:1 (kustomization pre-post-sync/kustomization.yaml) Deployment/x-kustomize-guestbook-ui",
			"pre-post-sync/post-sync-job.yaml:1 (kustomization pre-post-sync/kustomization.yaml) Job/x-after",
			"pre-post-sync/pre-sync-job.yaml:1 (kustomization pre-post-sync/kustomization.yaml) Job/x-before",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			kfile := filepath.Join(examples, tt.dir, "kustomization.yaml")
			before, _ := os.ReadFile(kfile)
			objs, err := Kustomize(context.Background(), filepath.Join(examples, tt.dir), tt.spec, exampleOpts())
			if err != nil {
				t.Fatal(err)
			}
			if tt.want != nil {
				if got := describe(examples, objs); !slices.Equal(got, tt.want) {
					t.Errorf("got  %q\nwant %q", got, tt.want)
				}
			}
			if tt.check != nil {
				tt.check(t, byKindName(objs))
			}
			if after, _ := os.ReadFile(kfile); !bytes.Equal(before, after) {
				t.Error("the kustomization in the repository was changed")
			}
		})
	}
}

func byKindName(objs []manifest.Object) map[string]*unstructured.Unstructured {
	m := make(map[string]*unstructured.Unstructured)
	for _, o := range objs {
		m[o.Object.GetKind()+"/"+o.Object.GetName()] = o.Object
	}
	return m
}

// field returns the value at path (strings for keys, ints for indexes).
func field(u *unstructured.Unstructured, path ...any) any {
	var v any = u.Object
	for _, p := range path {
		switch p := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[p]
		case int:
			s, ok := v.([]any)
			if !ok || p >= len(s) {
				return nil
			}
			v = s[p]
		}
	}
	return v
}

const (
	baseKustomization = `resources: [app.yaml]
commonLabels:
  app: web
images:
- name: nginx
  newTag: "1.0"
`
	appYAML = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  replicas: 1
  selector: {matchLabels: {x: y}}
  template:
    metadata: {labels: {x: y}}
    spec:
      containers:
      - {name: web, image: nginx}
`
	component = "apiVersion: kustomize.config.k8s.io/v1alpha1\nkind: Component\nresources: [cm.yaml]\n"
)

func TestKustomizeOptions(t *testing.T) {
	tests := []struct {
		name    string
		spec    KustomizeSpec
		want    []string // kind/name of the objects
		image   string
		wantErr error
		errText string
	}{
		{name: "existing label without force", spec: KustomizeSpec{CommonLabels: map[string]string{"app": "other"}},
			wantErr: manifest.ErrKustomize, errText: "app/kustomization.yaml: applying the Application's kustomize options: kustomize edit add label: label app already in kustomization file. Use --force to override."},
		{name: "existing label with force", spec: KustomizeSpec{CommonLabels: map[string]string{"app": "other"}, ForceCommonLabels: true},
			want: []string{"Deployment/web"}},
		{name: "include templates needs without selector", spec: KustomizeSpec{CommonLabels: map[string]string{"a": "b"}, LabelIncludeTemplates: true},
			wantErr: manifest.ErrKustomize, errText: "--without-selector flag must be specified for --include-templates to work"},
		{name: "empty label name", spec: KustomizeSpec{CommonLabels: map[string]string{"": "b"}},
			wantErr: manifest.ErrKustomize, errText: "invalid label: ':b'"},
		{name: "replica count not a number", spec: KustomizeSpec{Replicas: []Replica{{Name: "web", Count: intstr.FromString("many")}}},
			wantErr: manifest.ErrKustomize, errText: "expected integer value for count. Received: many"},
		{name: "image without change", spec: KustomizeSpec{Images: []string{"nginx"}},
			wantErr: manifest.ErrKustomize, errText: "invalid format of image"},
		{name: "image keeps the tag with *", spec: KustomizeSpec{Images: []string{"nginx=example.com/nginx:*"}},
			want: []string{"Deployment/web"}, image: "example.com/nginx:1.0"},
		{name: "image digest", spec: KustomizeSpec{Images: []string{"nginx@sha256:" + strings.Repeat("a", 64)}},
			want: []string{"Deployment/web"}, image: "nginx@sha256:" + strings.Repeat("a", 64)},
		{name: "unknown patch field", spec: KustomizeSpec{Patches: []map[string]any{{"paht": "x.yaml"}}},
			wantErr: manifest.ErrKustomize, errText: `unknown field "paht"`},
		{name: "component", spec: KustomizeSpec{Components: []string{"../components/a"}},
			want: []string{"ConfigMap/comp-a", "Deployment/web"}},
		{name: "component glob", spec: KustomizeSpec{Components: []string{"../components/*"}},
			want: []string{"ConfigMap/comp-a", "ConfigMap/comp-b", "Deployment/web"}},
		{name: "missing component", spec: KustomizeSpec{Components: []string{"../components/nope"}},
			wantErr: manifest.ErrKustomize, errText: "../components/nope has no match"},
		{name: "ignore missing components stops at the first found, as Argo CD 3.6 does",
			spec: KustomizeSpec{Components: []string{"../components/nope", "../components/b", "../components/a"}, IgnoreMissingComponents: true},
			want: []string{"ConfigMap/comp-b", "Deployment/web"}},
		{name: "ignore missing components, none found", spec: KustomizeSpec{Components: []string{"../components/nope"}, IgnoreMissingComponents: true},
			want: []string{"Deployment/web"}},
		{name: "remote component is unpredictable", spec: KustomizeSpec{Components: []string{"https://github.com/org/repo//components/x?ref=v1"}},
			wantErr: manifest.ErrRemoteReference, errText: "remote"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeFiles(t, map[string]string{
				"app/kustomization.yaml":          baseKustomization,
				"app/app.yaml":                    appYAML,
				"components/a/kustomization.yaml": component,
				"components/a/cm.yaml":            cm("comp-a"),
				"components/b/kustomization.yaml": component,
				"components/b/cm.yaml":            cm("comp-b"),
			})
			objs, err := Kustomize(context.Background(), filepath.Join(root, "app"), tt.spec,
				render.Options{Manifest: manifest.Options{RepositoryRoot: root}})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(filepath.ToSlash(err.Error()), tt.errText) {
					t.Fatalf("error = %v, want %v containing %q", err, tt.wantErr, tt.errText)
				}
				if errors.Is(err, manifest.ErrRemoteReference) {
					if _, ok := render.AsUnpredictable(err); !ok {
						t.Errorf("a remote reference is not Unpredictable: %v", err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, o := range objs {
				got = append(got, o.Object.GetKind()+"/"+o.Object.GetName())
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if tt.image != "" {
				if img := field(byKindName(objs)["Deployment/web"], "spec", "template", "spec", "containers", 0, "image"); img != tt.image {
					t.Errorf("image = %v, want %s", img, tt.image)
				}
			}
		})
	}
}

func TestKustomizeRemoteBaseIsUnpredictable(t *testing.T) {
	root := writeFiles(t, map[string]string{
		"app/kustomization.yaml": "resources:\n- https://github.com/org/repo//base?ref=v1\n",
	})
	_, err := Kustomize(context.Background(), filepath.Join(root, "app"), KustomizeSpec{},
		render.Options{Manifest: manifest.Options{RepositoryRoot: root}})
	u, ok := render.AsUnpredictable(err)
	if !ok || !errors.Is(err, manifest.ErrRemoteReference) {
		t.Fatalf("error = %v, want Unpredictable and ErrRemoteReference", err)
	}
	if !strings.Contains(u.Subject, "kustomization.yaml:2") {
		t.Errorf("subject = %q, want the kustomization line", u.Subject)
	}
}

func TestKustomizeWithoutKustomization(t *testing.T) {
	root := writeFiles(t, map[string]string{"app/a.yaml": cm("a")})
	_, err := Kustomize(context.Background(), filepath.Join(root, "app"), KustomizeSpec{NamePrefix: "x-"},
		render.Options{Manifest: manifest.Options{RepositoryRoot: root}})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error = %v, want a missing kustomization", err)
	}
}
