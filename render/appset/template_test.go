package appset

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// Rows of Argo CD's TestRenderTemplateParams (applicationset/utils).
func TestReplaceFasttemplate(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		params         map[string]any
	}{
		{"simple substitution", "{{one}}", "two", map[string]any{"one": "two"}},
		{"simple substitution with whitespace", "{{ one }}", "two", map[string]any{"one": "two"}},
		{"template characters but not in a template", "}} {{", "}} {{", map[string]any{"one": "two"}},
		{"nested template", "{{ }}", "{{ }}", map[string]any{"one": "{{ }}"}},
		{"field with whitespace", "{{ }}", "{{ }}", map[string]any{" ": "two", "": "three"}},
		{"template contains itself, containing itself", "{{one}}", "{{one}}", map[string]any{"{{one}}": "{{one}}"}},
		{"template contains itself, containing something else", "{{one}}", "{{one}}", map[string]any{"{{one}}": "{{two}}"}},
		{"templates are case sensitive", "{{ONE}}", "{{ONE}}", map[string]any{"{{one}}": "two"}},
		{"multiple on a line", "{{one}}{{one}}", "twotwo", map[string]any{"one": "two"}},
		{"multiple different on a line", "{{one}}{{three}}", "twofour", map[string]any{"one": "two", "three": "four"}},
		{"multiple different on a line with quote", "{{one}} {{three}}", "\"hello\" world four", map[string]any{"one": "\"hello\" world", "three": "four"}},
		// Beyond Argo CD's rows: parameters that are no strings stay as
		// written; a tag must close on its line to be looked at.
		{"not a string", "{{n}}", "{{n}}", map[string]any{"n": 3.0}},
		{"across lines", "{{one\n}}", "{{one\n}}", map[string]any{"one": "two"}},
		{"dotted keys", "{{path.basename}}-{{path[0]}}", "b-a", map[string]any{"path.basename": "b", "path[0]": "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := newEngine(context.Background(), false, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.replace(tc.in, tc.params)
			if err != nil || got != tc.want {
				t.Errorf("replace(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// Argo CD's Test_Render_Replace_no_panic_on_missing_closing_brace.
func TestReplaceFasttemplateUnclosed(t *testing.T) {
	e, _ := newEngine(context.Background(), false, nil)
	if _, err := e.replace("{{properly.closed}} {{improperly.closed}", nil); err == nil {
		t.Error("an unclosed tag is no error")
	}
}

// Rows of Argo CD's TestRenderTemplateParamsGoTemplate, errors word for
// word.
func TestReplaceGoTemplate(t *testing.T) {
	image := map[string]any{"replicas": 3, "image": map[string]any{"name": "busybox", "version": "latest"}}
	hpa := func(on bool) map[string]any {
		return map[string]any{"replicas": 3, "hpa": map[string]any{"enabled": on, "minReplicas": 1, "maxReplicas": 5}}
	}
	unused := map[string]any{"unused": "this is not used"}
	for _, tc := range []struct {
		name, in, want, err string
		params              map[string]any
		options             []string
	}{
		{name: "simple substitution", in: "{{ .one }}", want: "two", params: map[string]any{"one": "two"}},
		{name: "template contains itself", in: "{{ .one }}", want: "{{one}}", params: map[string]any{"one": "{{one}}"}},
		{name: "multiple on a line", in: "{{.one}}{{.one}}", want: "twotwo", params: map[string]any{"one": "two"}},
		{name: "multiple different on a line with quote", in: "{{.one}} {{.three}}", want: "\"hello\" world four", params: map[string]any{"one": "\"hello\" world", "three": "four"}},
		{name: "depth", in: "{{ .image.version }}", want: "latest", params: image},
		{name: "multiple depth", in: "{{ .image.name }}:{{ .image.version }}", want: "busybox:latest", params: image},
		{name: "if ok", in: "{{ if .hpa.enabled }}{{ .hpa.maxReplicas }}{{ else }}{{ .replicas }}{{ end }}", want: "5", params: hpa(true)},
		{name: "if not ok", in: "{{ if .hpa.enabled }}{{ .hpa.maxReplicas }}{{ else }}{{ .replicas }}{{ end }}", want: "3", params: hpa(false)},
		{name: "loop", in: "{{ range .volumes }}[{{ .name }}]{{ end }}", want: "[volume-one][volume-two]",
			params: map[string]any{"volumes": []map[string]any{{"name": "volume-one"}, {"name": "volume-two"}}}},
		{name: "Index", in: `{{ index .admin "admin-ca" }}, {{ index .admin "admin-jks" }}`, want: "value admin ca, value admin jks",
			params: map[string]any{"admin": map[string]any{"admin-ca": "value admin ca", "admin-jks": "value admin jks"}}},
		{name: "quote", in: `{{.quote}}`, want: `"`, params: map[string]any{"quote": `"`}},
		{name: "Test Parse Error", in: `{{functiondoesnotexist}}`, params: map[string]any{"data": "a data string"},
			err: `failed to parse template {{functiondoesnotexist}}: template: base:1: function "functiondoesnotexist" not defined`},
		{name: "Test template error", in: `{{.data.test}}`, params: map[string]any{"data": "a data string"},
			err: `failed to execute go template {{.data.test}}: template: base:1:7: executing "base" at <.data.test>: can't evaluate field test in type interface {}`},
		{name: "lookup missing value with missingkey=default", in: `--> {{.doesnotexist}} <--`, want: `--> <no value> <--`, params: unused},
		{name: "lookup missing value with missingkey=error", in: `--> {{.doesnotexist}} <--`, params: unused, options: []string{"missingkey=error"},
			err: `failed to execute go template --> {{.doesnotexist}} <--: template: base:1:6: executing "base" at <.doesnotexist>: map has no entry for key "doesnotexist"`},
		{name: "toYaml", in: `{{ toYaml . | indent 2 }}`, want: "  foo:\n    bar:\n      bool: true\n      number: 2\n      str: Hello world",
			params: map[string]any{"foo": map[string]any{"bar": map[string]any{"bool": true, "number": 2, "str": "Hello world"}}}},
		{name: "fromYaml", in: `{{ get (fromYaml .value) "hello" }}`, want: "world", params: map[string]any{"value": "hello: world"}},
		{name: "fromYaml error", in: `{{ get (fromYaml .value) "hello" }}`, params: map[string]any{"value": "non\n compliant\n yaml"},
			err: "failed to execute go template {{ get (fromYaml .value) \"hello\" }}: template: base:1:8: executing \"base\" at <fromYaml .value>: error calling fromYaml: error unmarshaling JSON: while decoding JSON: json: cannot unmarshal string into Go value of type map[string]interface {}"},
		{name: "fromYamlArray", in: `{{ fromYamlArray .value | last }}`, want: "bonjour tout le monde", params: map[string]any{"value": "- hello world\n- bonjour tout le monde"}},
		// Argo CD's additions and removals.
		{name: "normalize", in: `{{ normalize .n }}`, want: "my-app.v1", params: map[string]any{"n": "-My_App.v1-"}},
		{name: "env removed", in: `{{ env "HOME" }}`, params: unused, err: `failed to parse template {{ env "HOME" }}: template: base:1: function "env" not defined`},
		{name: "expandenv removed", in: `{{ expandenv "$HOME" }}`, params: unused, err: `failed to parse template {{ expandenv "$HOME" }}: template: base:1: function "expandenv" not defined`},
		{name: "getHostByName removed", in: `{{ getHostByName "x" }}`, params: unused, err: `failed to parse template {{ getHostByName "x" }}: template: base:1: function "getHostByName" not defined`},
		{name: "sprig", in: `{{ .n | upper | trunc 3 }}-{{ until 3 | len }}-{{ repeat 2 "ab" }}`, want: "ABC-3-abab", params: map[string]any{"n": "abcdef"}},
		// Bounds.
		{name: "repeat bounded", in: `{{ repeat 100000000 "ab" }}`, params: unused,
			err: `failed to execute go template {{ repeat 100000000 "ab" }}: template: base:1:3: executing "base" at <repeat 100000000 "ab">: error calling repeat: repeat: more than 1048576 bytes`},
		{name: "until bounded", in: `{{ until 1000000000 | len }}`, params: unused,
			err: `failed to execute go template {{ until 1000000000 | len }}: template: base:1:3: executing "base" at <until 1000000000>: error calling until: until: more than 100000 items`},
		{name: "output bounded", in: `{{ range until 2000 }}{{ repeat 1000 "x" }}{{ end }}`, params: unused,
			err: `failed to execute go template {{ range until 2000 }}{{ repeat 1000 "x" }}{{ end }}: the template writes more than 1048576 bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e, err := newEngine(context.Background(), true, tc.options)
			if err != nil {
				t.Fatal(err)
			}
			got, err := e.replace(tc.in, tc.params)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Errorf("error\n %v\nwant\n %s", err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("replace(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
			}
		})
	}
}

// slugify is Argo CD's. The first four rows are Argo CD v3.6.1's own
// (applicationset/utils/utils_test.go, TestSlugify); the others call it
// from a template as users do.
func TestSlugify(t *testing.T) {
	const long = "feat/a_really+long_pull_request_name_to_test_argo_slugification_and_branch_name_shortening_feature"
	const oneWord = "feat/areallylongpullrequestnametotestargoslugificationandbranchnameshorteningfeature"
	e, _ := newEngine(context.Background(), true, nil)
	tests := []struct {
		template string
		name     any
		want     string
		err      string
	}{
		{template: "{{ slugify 50 false .n }}", name: long, want: "feat-a-really-long-pull-request-name-to-test-argo"},
		{template: "{{ slugify 53 true .n }}", name: long, want: "feat-a-really-long-pull-request-name-to-test-argo"},
		{template: "{{ slugify 50 true .n }}", name: oneWord, want: "feat"},
		{template: "{{ slugify 50 false .n }}", name: oneWord, want: "feat-areallylongpullrequestnametotestargoslugifica"},
		{template: "{{ slugify .n }}", name: long, want: "feat-a-really-long-pull-request-name-to-test-argo"},
		{template: "{{ slugify 10 .n }}", name: "Feature/ÄÖÜ Branch", want: "feature"},
		// normalize runs first and drops what is not ASCII, as in Argo CD.
		{template: "{{ slugify .n }}", name: "Feature/Ünïcode Bränch", want: "feature-n-code-br-nch"},
		{template: "{{ slugify 20 true 7 .n }}", name: "ignored-extra-argument", want: "ignored-extra"},
		{template: "{{ slugify .n }}", name: 7, err: "slugify: argument 1 is int"},
		{template: "{{ slugify -1 false .n }}", name: "x", err: "slugify: maxSize -1"},
	}
	for _, tc := range tests {
		got, err := e.replace(tc.template, map[string]any{"n": tc.name})
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s with %v: %q, %v; want an error with %q", tc.template, tc.name, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("%s with %v = %q, %v; want %q", tc.template, tc.name, got, err, tc.want)
		}
	}
}

// A template that loops for ever is abandoned at the context's end, and
// stops at its next function call.
func TestReplaceLoopForever(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	e, _ := newEngine(ctx, true, nil)
	_, err := e.replace(`{{ range until 100000 }}{{ range until 100000 }}{{ range until 100000 }}{{ end }}{{ end }}{{ end }}`, map[string]any{"x": "y"})
	if err == nil || !strings.Contains(err.Error(), "did not finish in time") {
		t.Errorf("got %v", err)
	}
	if !e.stop.Load() {
		t.Error("the engine is not stopped")
	}
}

func TestUnknownGoTemplateOption(t *testing.T) {
	if _, err := newEngine(context.Background(), true, []string{"missingkey=maybe"}); err == nil {
		t.Error("an unknown option is accepted (text/template would panic)")
	}
}

// Argo CD's TestRenderTemplateKeys: map keys are templated too; and
// nulls in maps are left out as deeplyReplace leaves them.
func TestReplaceDeep(t *testing.T) {
	for _, goTemplate := range []bool{false, true} {
		key, value := "annotation-{{key}}", "annotation-{{value}}"
		if goTemplate {
			key, value = "annotation-{{ .key }}", "annotation-{{ .value }}"
		}
		e, _ := newEngine(context.Background(), goTemplate, nil)
		got, err := e.replaceDeep(map[string]any{"metadata": map[string]any{"annotations": map[string]any{key: value}},
			"spec": map[string]any{"n": int64(3), "list": []any{key, true}, "gone": nil}},
			map[string]any{"key": "some-key", "value": "some-value"})
		if err != nil {
			t.Fatal(err)
		}
		m := got.(map[string]any)
		if a := m["metadata"].(map[string]any)["annotations"].(map[string]any); a["annotation-some-key"] != "annotation-some-value" {
			t.Errorf("goTemplate %v: annotations %v", goTemplate, a)
		}
		spec := m["spec"].(map[string]any)
		if _, ok := spec["gone"]; ok || spec["n"] != int64(3) || spec["list"].([]any)[1] != true || spec["list"].([]any)[0] != "annotation-some-key" {
			t.Errorf("goTemplate %v: spec %v", goTemplate, spec)
		}
	}
}

func TestSanitizeName(t *testing.T) {
	for in, want := range map[string]string{
		"app_3":                  "app-3",
		"file_name.yaml":         "file-name.yaml",
		"-Hello World!-":         "hello-world",
		strings.Repeat("a", 300): strings.Repeat("a", 253),
		"..":                     "",
	} {
		if got := SanitizeName(in); got != want {
			t.Errorf("SanitizeName(%q) = %q, want %q", in, got, want)
		}
	}
}

// The template code takes any string without panicking, and bounds
// what it writes.
func FuzzReplace(f *testing.F) {
	for _, s := range []string{"{{one}}", "{{ .one }}", "{{", "}}{{", "{{ range until 5 }}{{ . }}{{ end }}", "{{ toYaml . }}", "{{ repeat 3 .one }}", "{{ fromYaml .one }}", "{{ slugify .one }}", "{{ template \"base\" . }}"} {
		f.Add(s, "two", false)
		f.Add(s, "two", true)
	}
	f.Fuzz(func(t *testing.T, tmpl, value string, goTemplate bool) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e, err := newEngine(ctx, goTemplate, []string{"missingkey=error"})
		if err != nil {
			t.Fatal(err)
		}
		params := map[string]any{"one": value, "path": map[string]any{"basename": value, "segments": []string{value}}}
		got, err := e.replace(tmpl, params)
		if err != nil {
			return
		}
		if len(got) > maxStringBytes {
			t.Fatalf("%d bytes out", len(got))
		}
		if !goTemplate && !strings.Contains(tmpl, "{{") && got != tmpl {
			t.Fatalf("fasttemplate changed %q without a tag into %q", tmpl, got)
		}
		if !goTemplate && utf8.ValidString(tmpl) && utf8.ValidString(value) && !utf8.ValidString(got) {
			t.Fatalf("invalid UTF-8 out of %q", tmpl)
		}
	})
}
