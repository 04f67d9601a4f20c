package flux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
)

func kustomization(t *testing.T, spec string) *unstructured.Unstructured {
	t.Helper()
	return object(t, "apiVersion: kustomize.toolkit.fluxcd.io/v1\nkind: Kustomization\n"+
		"metadata: {name: app, namespace: flux-system}\nspec:\n  "+indent(spec))
}

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %s\n"

func TestBuildSubstitution(t *testing.T) {
	root := writeFiles(t, map[string]string{
		"app/cm.yaml": fmt.Sprintf(configMap, "cm", `"${token}-${plain:=x}"`),
	})
	world := []*unstructured.Unstructured{
		object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: flux-system}\ndata: {token: c2VjcmV0LXZhbHVl}"),
		object(t, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain, namespace: flux-system}\ndata: {plain: from-configmap}"),
	}
	tests := []struct {
		name    string
		spec    string
		want    string
		wantErr string
	}{
		{"secret data is decoded", `path: app
postBuild:
  substituteFrom: [{kind: Secret, name: creds}]`, "secret-value-x", ""},
		{"inline substitute wins over substituteFrom", `path: app
postBuild:
  substitute: {token: inline}
  substituteFrom: [{kind: Secret, name: creds}, {kind: ConfigMap, name: plain}]`, "inline-from-configmap", ""},
		{"missing ConfigMap is an error naming it", `path: app
postBuild:
  substituteFrom: [{kind: ConfigMap, name: nope}]`, "", "ConfigMap/nope"},
		{"optional missing Secret is skipped", `path: app
postBuild:
  substitute: {token: t}
  substituteFrom: [{kind: Secret, name: nope, optional: true}]`, "t-x", ""},
		{"without variables nothing is substituted", `path: app
postBuild:
  substituteFrom: [{kind: Secret, name: nope, optional: true}]`, "${token}-${plain:=x}", ""},
		{"no postBuild, no substitution", `path: app`, "${token}-${plain:=x}", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objs, err := build(t, root, kustomization(t, tt.spec), world...)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one naming %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got, _, _ := unstructured.NestedString(objs[0].Object.Object, "data", "value")
			if got != tt.want {
				t.Errorf("value = %q, want %q", got, tt.want)
			}
			if want := filepath.Join(root, "app/cm.yaml"); objs[0].Source.File != want || objs[0].Source.Line != 1 {
				t.Errorf("source = %v, want %s:1", objs[0].Source, want)
			}
			if objs[0].Source.Kustomization != filepath.Join(root, "app/kustomization.yaml") {
				t.Errorf("kustomization = %q, want the generated one", objs[0].Source.Kustomization)
			}
		})
	}
}

func TestBuildNeverPrintsSecrets(t *testing.T) {
	// The secret becomes a metadata.name that is a number, which the
	// decoder reports quoting the value.
	root := writeFiles(t, map[string]string{
		"app/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: ${id}\n",
	})
	world := []*unstructured.Unstructured{
		object(t, "apiVersion: v1\nkind: Secret\nmetadata: {name: creds, namespace: flux-system}\nstringData: {id: \"987654321\"}"),
	}
	_, err := build(t, root, kustomization(t, "path: app\npostBuild:\n  substituteFrom: [{kind: Secret, name: creds}]"), world...)
	if err == nil {
		t.Fatal("want an error for a numeric name")
	}
	if strings.Contains(err.Error(), "987654321") {
		t.Errorf("error shows the secret: %v", err)
	}
	if !strings.Contains(err.Error(), "***") {
		t.Errorf("error does not show where the secret was masked: %v", err)
	}
}

func TestBuildDoesNotWriteTheRepository(t *testing.T) {
	root := writeFiles(t, map[string]string{"app/cm.yaml": fmt.Sprintf(configMap, "cm", "v")})
	if _, err := build(t, root, kustomization(t, "path: app\nnamePrefix: x-")); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Join(root, "app"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries after Build, want only cm.yaml", len(entries))
	}
}

func TestBuildHostile(t *testing.T) {
	outside := writeFiles(t, map[string]string{"secret.yaml": fmt.Sprintf(configMap, "outside", "x")})
	big := strings.Repeat("x", 64<<10)
	laughs := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: lol\ndata:\n  a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		laughs += fmt.Sprintf("  %s: &%s [*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s,*%s]\n", n, n, prev, prev, prev, prev, prev, prev, prev, prev, prev)
		prev = n
	}
	tests := []struct {
		name    string
		files   map[string]string
		link    [2]string // symlink name → target ("@outside" for the outside dir)
		spec    string
		world   string
		opts    manifest.Options
		wantIs  error
		wantErr string
	}{
		{name: "path escaping the root", files: map[string]string{"app/cm.yaml": fmt.Sprintf(configMap, "a", "b")},
			spec: "path: ../../etc", wantIs: manifest.ErrOutsideRoot},
		{name: "symlinked path leaving the root", link: [2]string{"app", "@outside"},
			spec: "path: app", wantIs: manifest.ErrOutsideRoot},
		{name: "missing path", spec: "path: nowhere", wantErr: "kustomization path not found"},
		{name: "resource outside the root", files: map[string]string{
			"app/kustomization.yaml": "resources: [../../" + filepath.Base(outside) + "/secret.yaml]",
		}, spec: "path: app", wantIs: manifest.ErrKustomize},
		{name: "remote base", files: map[string]string{
			"app/kustomization.yaml": "resources:\n- github.com/org/repo//deploy?ref=v1\n",
		}, spec: "path: app", wantIs: errRemote},
		{name: "remote file", files: map[string]string{
			"app/kustomization.yaml": "resources: [https://example.com/x.yaml]",
		}, spec: "path: app", wantIs: errRemote},
		{name: "remote base in a nested kustomization", files: map[string]string{
			"app/kustomization.yaml":  "resources: [../base]",
			"base/kustomization.yaml": "resources: [https://example.com/x.yaml]",
		}, spec: "path: app", wantIs: errRemote},
		{name: "file over MaxFileBytes", files: map[string]string{
			"app/cm.yaml": fmt.Sprintf(configMap, "big", big),
		}, spec: "path: app", opts: manifest.Options{MaxFileBytes: 32 << 10}, wantIs: manifest.ErrTooLarge},
		{name: "file over MaxFileBytes behind a kustomization", files: map[string]string{
			"app/kustomization.yaml": "resources: [cm.yaml]",
			"app/cm.yaml":            fmt.Sprintf(configMap, "big", big),
		}, spec: "path: app", opts: manifest.Options{MaxFileBytes: 32 << 10}, wantIs: manifest.ErrTooLarge},
		{name: "substitution blowing up the output", files: map[string]string{
			"app/cm.yaml": fmt.Sprintf(configMap, "blow", strings.Repeat("${v}", 64)),
		}, spec: "path: app\npostBuild:\n  substituteFrom: [{kind: ConfigMap, name: vars}]",
			world: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: vars, namespace: flux-system}\ndata: {v: " + big + "}",
			opts:  manifest.Options{MaxFileBytes: 1 << 20}, wantIs: manifest.ErrTooLarge},
		{name: "alias bomb", files: map[string]string{"app/cm.yaml": laughs},
			spec: "path: app", wantIs: errAliasBomb},
		{name: "alias bomb behind a kustomization", files: map[string]string{
			"app/kustomization.yaml": "resources: [cm.yaml]", "app/cm.yaml": laughs,
		}, spec: "path: app", wantIs: errAliasBomb},
		{name: "invalid patch", files: map[string]string{"app/cm.yaml": fmt.Sprintf(configMap, "a", "b")},
			spec: "path: app\npatches: [{patch: 'not: [a patch'}]", wantErr: "app"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := writeFiles(t, tt.files)
			if tt.link[0] != "" {
				if err := os.Symlink(outside, filepath.Join(root, tt.link[0])); err != nil {
					t.Fatal(err)
				}
			}
			var world []*unstructured.Unstructured
			if tt.world != "" {
				world = append(world, object(t, tt.world))
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			start := time.Now()
			_, err := Build(ctx, kustomization(t, tt.spec), BuildOptions{Root: root, Objects: world,
				Render: render.Options{Manifest: tt.opts}})
			if err == nil {
				t.Fatal("want an error")
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("err = %v, want %v", err, tt.wantIs)
			}
			if tt.wantErr != "" && !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to mention %q", err, tt.wantErr)
			}
			if !strings.Contains(err.Error(), "Flux Kustomization flux-system/app") {
				t.Errorf("err = %v, want it to name the Kustomization", err)
			}
			if d := time.Since(start); d > 20*time.Second {
				t.Errorf("took %v", d)
			}
		})
	}
}

func TestBuildPositions(t *testing.T) {
	root, err := filepath.Abs("testdata/parity")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := build(t, root, kustomization(t, "path: ./plain\nnamePrefix: pre-\nnameSuffix: -suf\ntargetNamespace: prod"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		kind, name, file string
		line             int
	}{
		{"Deployment", "pre-web-suf", "plain/deployment.yaml", 1},
		{"ConfigMap", "pre-settings-suf", "plain/config.yaml", 1},
		{"ConfigMap", "pre-script-suf", "plain/config.yaml", 8},
		{"Service", "pre-web-suf", "plain/sub/service.yaml", 1},
	}
	for _, tt := range tests {
		o := byKindName(objs, tt.kind, tt.name)
		if o == nil {
			t.Errorf("no %s %s", tt.kind, tt.name)
			continue
		}
		want := manifest.Source{File: filepath.Join(root, tt.file), Line: tt.line,
			Kustomization: filepath.Join(root, "plain/kustomization.yaml")}
		if o.Source != want {
			t.Errorf("%s %s: source %v, want %v", tt.kind, tt.name, o.Source, want)
		}
		if o.Object.GetNamespace() != "prod" {
			t.Errorf("%s %s: namespace %q, want prod", tt.kind, tt.name, o.Object.GetNamespace())
		}
		if _, ok := o.Object.GetAnnotations()[originAnnotation]; ok {
			t.Errorf("%s %s keeps the origin annotation truce asked for", tt.kind, tt.name)
		}
	}
}
