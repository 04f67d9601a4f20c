package helm

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/argovalues"
)

// valuesRepo is a repository with a chart directory and values files.
func valuesRepo(t *testing.T) (root, chartDir string) {
	t.Helper()
	root = t.TempDir()
	writeFiles(t, root, map[string]string{
		"apps/web/Chart.yaml":      "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"apps/web/values.yaml":     "a: chart\n",
		"apps/web/base.yaml":       "a: base\nlist: [1, 2]\nnested: {x: 1, z: 1}\n",
		"apps/web/prod.yaml":       "a: prod\nnested: {z: 2}\n",
		"apps/web/env/1-dev.yaml":  "env: dev\norder: [dev]\n",
		"apps/web/env/2-prod.yaml": "env: prod\n",
		"apps/web/cert.pem":        "-----BEGIN-----\n",
		"shared/common.yaml":       "common: true\n",
		"multi.yaml":               "a: first\n---\nb: second\n",
	})
	root, _ = realPath(root)
	return root, filepath.Join(root, "apps/web")
}

func TestArgoValuesMerge(t *testing.T) {
	root, dir := valuesRepo(t)
	other := t.TempDir()
	writeFiles(t, other, map[string]string{"team/values.yaml": "team: platform\n"})
	tests := []struct {
		name string
		v    ArgoValues
		want map[string]any
	}{
		{"nothing", ArgoValues{}, map[string]any{}},
		{"files in order, maps merged", ArgoValues{Files: []string{"base.yaml", "prod.yaml"}},
			map[string]any{"a": "prod", "list": []any{float64(1), float64(2)}, "nested": map[string]any{"x": float64(1), "z": float64(2)}}},
		{"absolute path is relative to the repository root", ArgoValues{Files: []string{"/shared/common.yaml"}},
			map[string]any{"common": true}},
		{"relative path may leave the chart within the repository", ArgoValues{Files: []string{"../../shared/common.yaml"}},
			map[string]any{"common": true}},
		{"multi-document values file", ArgoValues{Files: []string{"/multi.yaml"}},
			map[string]any{"a": "first", "b": "second"}},
		{"inline values after files", ArgoValues{Files: []string{"prod.yaml"}, Values: "a: inline\n"},
			map[string]any{"a": "inline", "nested": map[string]any{"z": float64(2)}}},
		{"valuesObject wins over values", ArgoValues{Values: "a: values\nb: 1\n", ValuesObject: map[string]any{"a": "object"}},
			map[string]any{"a": "object"}},
		{"parameters after inline values", ArgoValues{Values: "a: inline\n", Parameters: []Parameter{{Name: "a", Value: "set"}}},
			map[string]any{"a": "set"}},
		{"set types values, set-string does not", ArgoValues{Parameters: []Parameter{
			{Name: "n", Value: "3"}, {Name: "b", Value: "true"}, {Name: "s", Value: "3", ForceString: true}}},
			map[string]any{"n": int64(3), "b": true, "s": "3"}},
		{"set-string after set", ArgoValues{Parameters: []Parameter{
			{Name: "x", Value: "1", ForceString: true}, {Name: "x", Value: "2"}}},
			map[string]any{"x": "1"}},
		{"a repeated name keeps its last value", ArgoValues{Parameters: []Parameter{
			{Name: "x", Value: "1"}, {Name: "x", Value: "2"}}},
			map[string]any{"x": int64(2)}},
		{"commas are escaped", ArgoValues{Parameters: []Parameter{{Name: "csv", Value: "a,b,c"}}},
			map[string]any{"csv": "a,b,c"}},
		{"a {list} is a list", ArgoValues{Parameters: []Parameter{{Name: "l", Value: "{a,b}"}}},
			map[string]any{"l": []any{"a", "b"}}},
		{"nested and indexed names", ArgoValues{Parameters: []Parameter{{Name: "a.b[1]", Value: "x"}}},
			map[string]any{"a": map[string]any{"b": []any{nil, "x"}}}},
		{"file parameter", ArgoValues{FileParameters: []FileParameter{{Name: "tls.cert", Path: "cert.pem"}}},
			map[string]any{"tls": map[string]any{"cert": "-----BEGIN-----\n"}}},
		{"missing file ignored when asked", ArgoValues{Files: []string{"nope.yaml", "prod.yaml"}, IgnoreMissingValueFiles: true},
			map[string]any{"a": "prod", "nested": map[string]any{"z": float64(2)}}},
		{"glob in lexical order", ArgoValues{Files: []string{"env/*.yaml"}},
			map[string]any{"env": "prod", "order": []any{"dev"}}},
		{"explicit file after a glob keeps its place", ArgoValues{Files: []string{"env/*.yaml", "env/1-dev.yaml"}},
			map[string]any{"env": "dev", "order": []any{"dev"}}},
		{"glob matching nothing ignored when asked", ArgoValues{Files: []string{"none/*.yaml"}, IgnoreMissingValueFiles: true},
			map[string]any{}},
		{"ref source", ArgoValues{Files: []string{"$values/team/values.yaml"}, RefSources: map[string]string{"$values": other}},
			map[string]any{"team": "platform"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.v.RepositoryRoot = root
			got, err := tc.v.Merge(context.Background(), dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("values (-want +got):\n%s", diff)
			}
		})
	}
}

func TestArgoValuesMergeErrors(t *testing.T) {
	root, dir := valuesRepo(t)
	outside := filepath.Join(t.TempDir(), "secret.yaml")
	writeFiles(t, filepath.Dir(outside), map[string]string{"secret.yaml": "x: 1\n"})
	if err := os.Symlink(outside, filepath.Join(dir, "link.yaml")); err != nil {
		t.Fatal(err)
	}
	writeFiles(t, dir, map[string]string{"big.yaml": "a: " + strings.Repeat("x", 2048) + "\n"})
	tests := []struct {
		name            string
		v               ArgoValues
		want            []string
		wantUnpredicted bool
	}{
		{name: "escape with ..", v: ArgoValues{Files: []string{"../../../etc/passwd"}}, want: []string{"resolved to outside repository root"}},
		{name: "symlink out of the repository", v: ArgoValues{Files: []string{"link.yaml"}}, want: []string{"resolved to outside repository root"}},
		{name: "repository root itself", v: ArgoValues{Files: []string{"/"}}, want: []string{"repository root"}},
		{name: "missing file", v: ArgoValues{Files: []string{"nope.yaml"}}, want: []string{"nope.yaml", "does not exist"}},
		{name: "glob matching nothing", v: ArgoValues{Files: []string{"none/*.yaml"}}, want: []string{"matched no files"}},
		{name: "doublestar glob", v: ArgoValues{Files: []string{"**/*.yaml"}}, want: []string{"not supported"}},
		{name: "URL scheme", v: ArgoValues{Files: []string{"s3://bucket/values.yaml"}}, want: []string{"URL scheme 's3' is not allowed"}},
		{name: "directory", v: ArgoValues{Files: []string{"env"}}, want: []string{"not a regular file"}},
		{name: "too large", v: ArgoValues{Files: []string{"big.yaml"}, MaxFileBytes: 1024}, want: []string{"big.yaml", "1 KiB limit"}},
		{name: "file parameter escape", v: ArgoValues{FileParameters: []FileParameter{{Name: "k", Path: "../../../etc/hostname"}}}, want: []string{"helm.fileParameters k", "outside repository root"}},
		{name: "invalid inline values", v: ArgoValues{Values: "a: [1\n"}, want: []string{"spec.source.helm.values"}},
		{name: "invalid set", v: ArgoValues{Parameters: []Parameter{{Name: "a[x]", Value: "1"}}}, want: []string{"--set"}},
		{name: "remote values file offline", v: ArgoValues{Files: []string{"https://example.com/values.yaml"}}, wantUnpredicted: true, want: []string{"https://example.com/values.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.v.RepositoryRoot = root
			_, err := tc.v.Merge(context.Background(), dir, nil)
			if err == nil {
				t.Fatal("no error")
			}
			if _, ok := render.AsUnpredictable(err); ok != tc.wantUnpredicted {
				t.Errorf("Unpredictable = %v, want %v (%v)", ok, tc.wantUnpredicted, err)
			}
			if !contains(err.Error(), tc.want...) {
				t.Errorf("error = %v, want it to contain %q", err, tc.want)
			}
			if strings.Contains(err.Error(), os.TempDir()+"/truce-argocd-values") {
				t.Errorf("error names the temporary values file: %v", err)
			}
		})
	}
}

func TestArgoValuesRemoteFile(t *testing.T) {
	root, dir := valuesRepo(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/values.yaml" {
			http.NotFound(w, r)
			return
		}
		w.Write([]byte("remote: true\na: remote\n"))
	}))
	defer srv.Close()
	v := ArgoValues{RepositoryRoot: root, Files: []string{"prod.yaml", srv.URL + "/values.yaml"}}

	got, err := v.Merge(context.Background(), dir, &Puller{CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"a": "remote", "remote": true, "nested": map[string]any{"z": float64(2)}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("values (-want +got):\n%s", diff)
	}
	_, err = v.Merge(context.Background(), dir, &Puller{CacheDir: t.TempDir(), Offline: true})
	if u, ok := render.AsUnpredictable(err); !ok || !strings.Contains(u.Subject, srv.URL) {
		t.Errorf("offline: error = %v, want Unpredictable naming %s", err, srv.URL)
	}
}

func TestMergeFlux(t *testing.T) {
	tests := []struct {
		name   string
		layers []map[string]any
		want   map[string]any
	}{
		{"none", nil, map[string]any{}},
		{"later wins, maps merge", []map[string]any{
			{"a": 1, "m": map[string]any{"x": 1, "y": 1}},
			{"a": 2, "m": map[string]any{"y": 2}}},
			map[string]any{"a": 2, "m": map[string]any{"x": 1, "y": 2}}},
		{"a scalar replaces a map", []map[string]any{{"m": map[string]any{"x": 1}}, {"m": "flat"}},
			map[string]any{"m": "flat"}},
		{"a map replaces a scalar", []map[string]any{{"m": "flat"}, {"m": map[string]any{"x": 1}}},
			map[string]any{"m": map[string]any{"x": 1}}},
		{"lists are replaced, not merged", []map[string]any{{"l": []any{1, 2}}, {"l": []any{3}}},
			map[string]any{"l": []any{3}}},
		{"null is kept as a value", []map[string]any{{"a": 1}, {"a": nil}},
			map[string]any{"a": nil}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, MergeFlux(tc.layers...)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestSetValue(t *testing.T) {
	tests := []struct {
		name, path, value string
		literal           bool
		want              map[string]any
	}{
		{"typed", "a.b", "3", false, map[string]any{"a": map[string]any{"b": int64(3)}}},
		{"quoted is a string", "a", `"3"`, false, map[string]any{"a": "3"}},
		{"single quoted is a string", "a", `'true'`, false, map[string]any{"a": "true"}},
		{"index", "l[1]", "x", false, map[string]any{"l": []any{nil, "x"}}},
		{"escaped dot in the path", `annotations.example\.com/x`, "y", false, map[string]any{"annotations": map[string]any{"example.com/x": "y"}}},
		{"literal keeps commas and braces", "cfg", "a,b={c}", true, map[string]any{"cfg": "a,b={c}"}},
		{"literal keeps backslashes", "cfg", `C:\x`, true, map[string]any{"cfg": `C:\x`}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := map[string]any{}
			set := SetValue
			if tc.literal {
				set = SetLiteralValue
			}
			if err := set(got, tc.path, tc.value); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFluxValues(t *testing.T) {
	values := map[string]any{"a": "spec", "keep": true}
	tests := []struct {
		name    string
		refs    []FluxValuesRef
		want    map[string]any
		wantErr string
	}{
		{"values on top of references", []FluxValuesRef{{Name: "cm", Data: []byte("a: ref\nb: ref\n")}},
			map[string]any{"a": "spec", "b": "ref", "keep": true}, ""},
		{"target path sees values merged first", []FluxValuesRef{{Name: "s", Data: []byte("secret"), TargetPath: "a"}},
			map[string]any{"a": "spec", "keep": true}, ""},
		{"a later reference overrides values merged by a target path", []FluxValuesRef{
			{Name: "s", Data: []byte("x"), TargetPath: "t"}, {Name: "cm", Data: []byte("keep: false\n")}},
			map[string]any{"a": "spec", "keep": true, "t": "x"}, ""},
		{"literal target path", []FluxValuesRef{{Name: "s", Data: []byte("a,b"), TargetPath: "csv", Literal: true}},
			map[string]any{"a": "spec", "keep": true, "csv": "a,b"}, ""},
		{"invalid YAML", []FluxValuesRef{{Name: "ConfigMap ns/bad key values.yaml", Data: []byte("a: [")}}, nil, "ConfigMap ns/bad key values.yaml"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := FluxValues(values, tc.refs...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

func TestFluxReleaseName(t *testing.T) {
	long := strings.Repeat("a", 30)
	tests := []struct{ name, target, release, want string }{
		{"app", "", "", "app"},
		{"app", "prod", "", "prod-app"},
		{"app", "prod", "custom", "custom"},
		{long, long, "", (long + "-" + long)[:40] + "-"},
	}
	for _, tc := range tests {
		got := FluxReleaseName(tc.name, tc.target, tc.release)
		if !strings.HasPrefix(got, tc.want) || len(got) > 53 || (len(tc.want) <= 40 && got != tc.want) {
			t.Errorf("FluxReleaseName(%q, %q, %q) = %q, want %q", tc.name, tc.target, tc.release, got, tc.want)
		}
	}
}

// TestArgoValuesInlineParity: what a source sets itself (argovalues, read
// by the engines and lint without rendering) is what Merge gives helm
// template when the source names no value files.
func TestArgoValuesInlineParity(t *testing.T) {
	root, dir := valuesRepo(t)
	for _, s := range []argovalues.Source{
		{Values: "a: 1\nb: {c: [x, y]}\n"},
		{Values: "a: 1\n", ValuesObject: map[string]any{"b": "object"}},
		{ValuesObject: map[string]any{"l": []any{"x", "y"}, "n": map[string]any{"m": 1}}, Parameters: []argovalues.Parameter{
			{Name: "l[1]", Value: "z"}, {Name: "n.m", Value: "2"}, {Name: "s", Value: "3", ForceString: true},
			{Name: "csv", Value: "a,b"}, {Name: "list", Value: "{a,b}"}, {Name: "n.m", Value: "4"}, {Name: "t", Value: "true"}}},
	} {
		want, err := ArgoValues{Values: s.Values, ValuesObject: s.ValuesObject, Parameters: s.Parameters, RepositoryRoot: root}.Merge(context.Background(), dir, nil)
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Inline()
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%+v: inline values differ from Merge (-Merge +Inline):\n%s", s, diff)
		}
	}
}
