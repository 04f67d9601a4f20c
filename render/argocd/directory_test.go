package argocd

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/jsonnet"
)

func TestDirectoryExampleApps(t *testing.T) {
	tests := []struct {
		dir  string
		spec DirectorySpec
		want []string
	}{
		{dir: "guestbook", want: []string{
			"guestbook/guestbook-ui-deployment.yaml:1 Deployment/guestbook-ui",
			"guestbook/guestbook-ui-svc.yaml:1 Service/guestbook-ui",
		}},
		{dir: "sync-waves", want: []string{
			"sync-waves/manifests.yaml:2 Job/upgrade-sql-schema*",
			"sync-waves/manifests.yaml:17 ReplicaSet/backend",
			"sync-waves/manifests.yaml:35 Service/backend",
			"sync-waves/manifests.yaml:47 Job/maint-page-up",
			"sync-waves/manifests.yaml:65 ReplicaSet/frontend",
			"sync-waves/manifests.yaml:85 Service/frontend",
			"sync-waves/manifests.yaml:99 Job/maint-page-down",
		}},
		{dir: "jsonnet-guestbook", want: []string{
			"jsonnet-guestbook/guestbook-ui.jsonnet Service/jsonnet-guestbook-ui",
			"jsonnet-guestbook/guestbook-ui.jsonnet Deployment/jsonnet-guestbook-ui",
		}},
		{dir: "jsonnet-guestbook-tla", spec: DirectorySpec{Jsonnet: JsonnetSpec{TLAs: []jsonnet.Var{
			{Name: "name", Value: "$ARGOCD_APP_NAME-ui"}, {Name: "replicas", Value: "2+1", Code: true},
		}}, Env: App{Name: "truce"}.Env()}, want: []string{
			"jsonnet-guestbook-tla/guestbook-ui.jsonnet Service/truce-ui",
			"jsonnet-guestbook-tla/guestbook-ui.jsonnet Deployment/truce-ui",
		}},
		// The Helm chart's templates are not read: Chart.yaml says Helm.
		// Read as a directory, the kustomization (no kind) is skipped as
		// unrelated YAML and the overlay patch is an object.
		{dir: "plugins/kustomized-helm", want: []string{
			"plugins/kustomized-helm/overlays/guestbook-deployment.yaml:1 Deployment/release-name-helm-guestbook",
		}, spec: DirectorySpec{Recurse: true}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			objs, err := Directory(context.Background(), filepath.Join(examples, tt.dir), tt.spec, exampleOpts())
			if err != nil {
				t.Fatal(err)
			}
			got := describe(examples, objs)
			for i, o := range objs {
				if o.Object.GetName() == "" {
					got[i] = strings.TrimSuffix(got[i], "/") + "/" + o.Object.GetGenerateName() + "*"
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

// TestJsonnetMatchesCLI compares the objects of the Jsonnet example apps
// with what the go-jsonnet command line interpreter printed for them
// (testdata/jsonnet-cli).
func TestJsonnetMatchesCLI(t *testing.T) {
	tests := []struct {
		dir, golden string
		spec        DirectorySpec
	}{
		{dir: "jsonnet-guestbook", golden: "jsonnet-guestbook.json"},
		{dir: "jsonnet-guestbook-tla", golden: "jsonnet-guestbook-tla.json", spec: DirectorySpec{Jsonnet: JsonnetSpec{TLAs: []jsonnet.Var{
			{Name: "name", Value: "truce-ui"}, {Name: "replicas", Value: "2+1", Code: true},
		}}}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata/jsonnet-cli", tt.golden))
			if err != nil {
				t.Fatal(err)
			}
			var want []map[string]any
			if err := utiljson.Unmarshal(data, &want); err != nil {
				t.Fatal(err)
			}
			objs, err := Directory(context.Background(), filepath.Join(examples, tt.dir), tt.spec, exampleOpts())
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != len(want) {
				t.Fatalf("got %d objects, the CLI printed %d", len(objs), len(want))
			}
			for i, o := range objs {
				if !reflect.DeepEqual(o.Object.Object, want[i]) {
					got, _ := json.Marshal(o.Object.Object)
					t.Errorf("object %d = %s\nCLI printed %v", i, got, want[i])
				}
			}
		})
	}
}

// dirFixture is a directory source exercising Argo CD's file selection.
var dirFixture = map[string]string{
	"a.yaml":           cm("a"),
	"b.yaml":           cm("b"),
	"c.yml":            cm("c"),
	".hidden.yaml":     cm("hidden"),
	"README.md":        "# not read",
	"values.yaml":      "replicaCount: 1\nimage: nginx\n",
	"skipped.yaml":     "# +argocd:skip-file-rendering\n" + cm("skipped"),
	"data.json":        `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "json"}}`,
	"gen.jsonnet":      `{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "jsonnet"}}`,
	"sub/d.yaml":       cm("d"),
	"sub/deep/e.yaml":  cm("e"),
	"sub/notes.txt":    cm("txt"),
	"other/f.yaml":     cm("f"),
	"other/f.yaml.bak": cm("bak"),
}

func TestDirectorySelection(t *testing.T) {
	tests := []struct {
		name string
		spec DirectorySpec
		want []string
	}{
		{name: "top level only", want: []string{"hidden", "a", "b", "c", "json", "jsonnet"}},
		{name: "recurse", spec: DirectorySpec{Recurse: true},
			want: []string{"hidden", "a", "b", "c", "json", "jsonnet", "f", "d", "e"}},
		{name: "brace list", spec: DirectorySpec{Include: "{a.yaml,c.yml}"}, want: []string{"a", "c"}},
		{name: "star crosses directories", spec: DirectorySpec{Recurse: true, Include: "*.yaml"},
			want: []string{"hidden", "a", "b", "f", "d", "e"}},
		{name: "exclude a subtree", spec: DirectorySpec{Recurse: true, Exclude: "sub/*"},
			want: []string{"hidden", "a", "b", "c", "json", "jsonnet", "f"}},
		{name: "include and exclude", spec: DirectorySpec{Recurse: true, Include: "sub/**", Exclude: "*/deep/*"},
			want: []string{"d"}},
		{name: "character class", spec: DirectorySpec{Include: "[a-b].yaml"}, want: []string{"a", "b"}},
		{name: "negated class", spec: DirectorySpec{Include: "[!a].y*ml"}, want: []string{"b", "c"}},
		{name: "include relative to the source, not the repository", spec: DirectorySpec{Recurse: true, Include: "d.yaml"},
			want: []string{}},
		{name: "invalid include matches nothing", spec: DirectorySpec{Include: "[a"}, want: []string{}},
		{name: "invalid exclude excludes nothing", spec: DirectorySpec{Exclude: "[a"},
			want: []string{"hidden", "a", "b", "c", "json", "jsonnet"}},
		{name: "extension filter disabled", spec: DirectorySpec{Recurse: true, DisableExtensionFilter: true, Include: "{*.txt,*.bak,README.md}"},
			want: []string{"bak", "txt"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, dirFixture)
			objs, err := Directory(context.Background(), dir, tt.spec, render.Options{Manifest: manifest.Options{RepositoryRoot: dir}})
			if err != nil {
				t.Fatal(err)
			}
			got := []string{}
			for _, o := range objs {
				got = append(got, o.Object.GetName())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
		})
	}
}

func TestDirectoryPositions(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"app/two.yaml":   cm("one") + "---\n" + cm("two"),
		"app/x.jsonnet":  `[{apiVersion: "v1", kind: "ConfigMap", metadata: {name: "j"}}]`,
		"app/list.yaml":  "apiVersion: v1\nkind: List\nitems:\n- " + strings.ReplaceAll(cm("item"), "\n", "\n  "),
		"app/.git-keep":  "",
		"app/empty.yaml": "",
	})
	objs, err := Directory(context.Background(), filepath.Join(dir, "app"), DirectorySpec{}, render.Options{Manifest: manifest.Options{RepositoryRoot: dir}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"app/list.yaml:4 ConfigMap/item",
		"app/two.yaml:1 ConfigMap/one",
		"app/two.yaml:6 ConfigMap/two",
		"app/x.jsonnet ConfigMap/j",
	}
	if got := describe(dir, objs); !slices.Equal(got, want) {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	if objs[3].Source.Renderer != manifest.RendererJsonnet {
		t.Errorf("jsonnet object source = %+v", objs[3].Source)
	}
}

func TestDirectoryJsonnet(t *testing.T) {
	const program = `local lib = import "lib.libsonnet";
function(name, replicas) {
  apiVersion: "apps/v1", kind: "Deployment",
  metadata: {name: name, labels: {lib: lib.v, ext: std.toString(std.extVar("ext"))}},
  spec: {replicas: replicas},
}`
	tests := []struct {
		name      string
		spec      JsonnetSpec
		env       map[string]string
		wantName  string
		wantRepl  any
		wantExt   string
		wantErr   error
		errText   string
		extraFile map[string]string
	}{
		{name: "strings and code", spec: JsonnetSpec{Libs: []string{"vendor"},
			TLAs:    []jsonnet.Var{{Name: "name", Value: "web"}, {Name: "replicas", Value: "4", Code: true}},
			ExtVars: []jsonnet.Var{{Name: "ext", Value: "true", Code: true}}},
			wantName: "web", wantRepl: int64(4), wantExt: "true"},
		{name: "string stays a string", spec: JsonnetSpec{Libs: []string{"vendor"},
			TLAs:    []jsonnet.Var{{Name: "name", Value: "web"}, {Name: "replicas", Value: "4"}},
			ExtVars: []jsonnet.Var{{Name: "ext", Value: "true"}}},
			wantName: "web", wantRepl: "4", wantExt: "true"},
		{name: "absolute lib is inside the repository", spec: JsonnetSpec{Libs: []string{"/vendor"},
			TLAs:    []jsonnet.Var{{Name: "name", Value: "$ARGOCD_APP_NAME"}, {Name: "replicas", Value: "1", Code: true}},
			ExtVars: []jsonnet.Var{{Name: "ext", Value: "${ARGOCD_APP_NAMESPACE}"}}},
			env:      App{Name: "guestbook", Namespace: "prod"}.Env(),
			wantName: "guestbook", wantRepl: int64(1), wantExt: "prod"},
		{name: "lib outside the repository", spec: JsonnetSpec{Libs: []string{"../.."}},
			wantErr: manifest.ErrOutsideRoot, errText: `jsonnet library "../.." resolves outside the repository root`},
		{name: "no lib path", spec: JsonnetSpec{
			TLAs:    []jsonnet.Var{{Name: "name", Value: "x"}, {Name: "replicas", Value: "1"}},
			ExtVars: []jsonnet.Var{{Name: "ext", Value: "x"}}},
			wantErr: jsonnet.ErrEvaluation, errText: `app/main.jsonnet:1: couldn't open import "lib.libsonnet"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{
				"app/main.jsonnet":       program,
				"vendor/lib.libsonnet":   `{v: "vendored"}`,
				"app/other.yaml":         cm("plain"),
				"app/sub/skip.jsonnet":   "error 'not read without recurse'",
				"vendor/x/lib.libsonnet": "{}",
			})
			objs, err := Directory(context.Background(), filepath.Join(dir, "app"),
				DirectorySpec{Jsonnet: tt.spec, Env: tt.env}, render.Options{Manifest: manifest.Options{RepositoryRoot: dir}})
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) || !strings.Contains(filepath.ToSlash(err.Error()), tt.errText) {
					t.Fatalf("error = %v, want %v containing %q", err, tt.wantErr, tt.errText)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != 2 {
				t.Fatalf("got %d objects", len(objs))
			}
			d := objs[0].Object
			if d.GetName() != tt.wantName || d.Object["spec"].(map[string]any)["replicas"] != tt.wantRepl ||
				d.GetLabels()["ext"] != tt.wantExt || d.GetLabels()["lib"] != "vendored" {
				t.Errorf("got name %q replicas %#v labels %v", d.GetName(), d.Object["spec"], d.GetLabels())
			}
		})
	}
}

func TestDirectoryProblems(t *testing.T) {
	outside := writeFiles(t, map[string]string{"secret.yaml": cm("secret")})
	tests := []struct {
		name    string
		files   map[string]string
		opts    manifest.Options
		want    []string
		wantErr error
		errText string
	}{
		{name: "symlink inside the repository is read", files: map[string]string{"app/a.yaml": "->../shared/a.yaml", "shared/a.yaml": cm("shared")},
			want: []string{"shared"}},
		{name: "dangling symlink is skipped", files: map[string]string{"app/a.yaml": "->nowhere.yaml", "app/b.yaml": cm("b")},
			want: []string{"b"}},
		{name: "symlink to a directory is skipped", files: map[string]string{"app/d.yaml": "->../shared", "shared/x.yaml": cm("x")},
			want: []string{}},
		{name: "symlink out of the repository", files: map[string]string{"app/a.yaml": "->" + filepath.Join(outside, "secret.yaml"), "app/b.yaml": cm("b")},
			want: []string{"b"}, wantErr: manifest.ErrOutsideRoot, errText: "app/a.yaml: refusing to read: the symlink leads outside the repository root"},
		{name: "several values in a JSON file", files: map[string]string{"app/x.json": `{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}} {}`},
			want: []string{}, wantErr: manifest.ErrInvalidObject, errText: "only a single object in a JSON file"},
		{name: "JSON file that is not JSON", files: map[string]string{"app/x.json": "kind: ConfigMap"},
			want: []string{}, wantErr: manifest.ErrSyntax},
		{name: "broken manifest is an error", files: map[string]string{"app/x.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x\n"},
			want: []string{}, wantErr: manifest.ErrSyntax},
		{name: "object without kind that looks like a manifest", files: map[string]string{"app/x.yaml": "apiVersion: v1\nmetadata:\n  name: x\n# kind: forgotten\n"},
			want: []string{}, wantErr: manifest.ErrInvalidObject},
		{name: "unrelated YAML is skipped", files: map[string]string{"app/ci.yaml": "on: push\njobs:\n  test: {}\n", "app/a.yaml": cm("a")},
			want: []string{"a"}},
		{name: "alias bomb is refused, not skipped", files: map[string]string{"app/bomb.yaml": "a: &a [x, x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]\n"},
			opts: manifest.Options{MaxAliasNodes: 1000}, want: []string{}, wantErr: manifest.ErrAliasExpansion},
		{name: "file over the size limit", files: map[string]string{"app/big.yaml": cm("big") + "data:\n  x: " + strings.Repeat("x", 2000) + "\n"},
			opts: manifest.Options{MaxFileBytes: 1000}, want: []string{}, wantErr: manifest.ErrTooLarge},
		{name: "files over the total limit", files: map[string]string{"app/a.yaml": cm("a"), "app/b.yaml": cm("b"), "app/c.yaml": cm("c")},
			opts: manifest.Options{MaxTotalBytes: 100}, want: []string{"a"}, wantErr: manifest.ErrTooLarge, errText: "MaxTotalBytes"},
		{name: "jsonnet failure keeps the other files", files: map[string]string{"app/a.jsonnet": "{\n  x: error 'broken'\n}", "app/b.yaml": cm("b")},
			want: []string{"b"}, wantErr: jsonnet.ErrEvaluation, errText: "app/a.jsonnet:2: broken"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, tt.files)
			opts := tt.opts
			opts.RepositoryRoot = dir
			objs, err := Directory(context.Background(), filepath.Join(dir, "app"), DirectorySpec{}, render.Options{Manifest: opts})
			got := []string{}
			for _, o := range objs {
				got = append(got, o.Object.GetName())
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("got  %q\nwant %q", got, tt.want)
			}
			if tt.wantErr == nil {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, tt.wantErr) || !strings.Contains(filepath.ToSlash(err.Error()), tt.errText) {
				t.Fatalf("error = %v, want %v containing %q", err, tt.wantErr, tt.errText)
			}
		})
	}
}

func TestDirectoryOutsideRoot(t *testing.T) {
	dir := writeFiles(t, map[string]string{"repo/a.yaml": cm("a"), "elsewhere/b.yaml": cm("b")})
	_, err := Directory(context.Background(), filepath.Join(dir, "elsewhere"), DirectorySpec{},
		render.Options{Manifest: manifest.Options{RepositoryRoot: filepath.Join(dir, "repo")}})
	if !errors.Is(err, manifest.ErrOutsideRoot) {
		t.Fatalf("error = %v, want ErrOutsideRoot", err)
	}
}

func TestDirectoryHonoursContext(t *testing.T) {
	dir := writeFiles(t, map[string]string{"a.yaml": cm("a")})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Directory(ctx, dir, DirectorySpec{}, render.Options{Manifest: manifest.Options{RepositoryRoot: dir}})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("error = %v, want context.Canceled", err)
	}
}
