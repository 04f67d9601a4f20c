package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsyaml "sigs.k8s.io/yaml"
)

// kubectlDecode decodes a stream the way kubectl's resource builder does
// (cli-runtime's StreamVisitor): apimachinery's YAMLOrJSONDecoder into a
// RawExtension, skipping empty and null documents. It returns the decoded
// JSON of every document.
func kubectlDecode(in []byte) ([]map[string]any, error) {
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(in), 4096)
	var out []map[string]any
	for {
		var ext runtime.RawExtension
		if err := d.Decode(&ext); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return out, err
		}
		raw := bytes.TrimSpace(ext.Raw)
		if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
			continue
		}
		var m map[string]any
		if err := unmarshalJSON(raw, &m); err != nil {
			return out, fmt.Errorf("document %d: %w", len(out), err)
		}
		out = append(out, m)
	}
}

// trickyScalars are values whose JSON type differs between YAML 1.1
// (go-yaml v2, used by kubectl via sigs.k8s.io/yaml) and YAML 1.2.
var trickyScalars = []string{
	"yes", "no", "on", "off", "y", "n", "Yes", "NO", "True", "TRUE", "false",
	"~", "null", "Null", "",
	"0x1F", "0o17", "017", "0b101", "1_000", "+1", "-0", "1e3", "1.0", "1.5", "-1.5e-3", ".5",
	"9007199254740993", "12345678901234567890", "-9223372036854775808",
	"2024-01-01", "2024-01-01T10:00:00Z", "12:30:45", "1:20",
	"'quoted'", `"123"`, "'true'", "!!str 123", "!!str yes", "!!int '7'",
	"|\n    block\n    text", ">-\n    folded\n    text",
	"'multi word'", "a#b", "[1, yes, 0x10]", "{k: on}",
}

func TestTypingMatchesKubectl(t *testing.T) {
	var b strings.Builder
	b.WriteString("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: tricky\nspec:\n")
	for i, v := range trickyScalars {
		fmt.Fprintf(&b, "  k%d: %s\n", i, v)
	}
	// Keys are resolved too: y becomes "true", 1 becomes "1".
	b.WriteString("  y: key-is-bool\n  1: key-is-int\n")
	in := b.String()

	objs, err := decodeString(in, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := sigsyaml.YAMLToJSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var wantObj map[string]any
	if err := unmarshalJSON(want, &wantObj); err != nil {
		t.Fatal(err)
	}
	got := objs[0].Object.Object
	if !reflect.DeepEqual(got, wantObj) {
		spec, wantSpec := got["spec"].(map[string]any), wantObj["spec"].(map[string]any)
		for k, v := range wantSpec {
			if !reflect.DeepEqual(spec[k], v) {
				t.Errorf("spec.%s = %#v (%T), sigs.k8s.io/yaml gives %#v (%T)", k, spec[k], spec[k], v, v)
			}
		}
		t.Fatalf("object differs from sigs.k8s.io/yaml")
	}

	// Spot checks, documenting kubectl's YAML 1.1 behaviour explicitly.
	spec := got["spec"].(map[string]any)
	for key, wantVal := range map[string]any{
		"k0":   true,        // yes
		"k3":   false,       // off
		"k15":  int64(31),   // 0x1F
		"k16":  int64(15),   // 0o17: go-yaml v2.4 also accepts YAML 1.2 octal
		"k17":  int64(15),   // 017 is octal
		"k19":  int64(1000), // 1_000
		"k22":  int64(1000), // 1e3 is an integral float, which becomes int64
		"k23":  int64(1),    // 1.0
		"k24":  1.5,
		"k30":  "2024-01-01",
		"k35":  "123",  // "123"
		"k36":  "true", // 'true'
		"k37":  "123",  // !!str 123
		"true": "key-is-bool",
		"1":    "key-is-int",
	} {
		if !reflect.DeepEqual(spec[key], wantVal) {
			t.Errorf("spec.%s = %#v (%T), want %#v (%T)", key, spec[key], spec[key], wantVal, wantVal)
		}
	}
	if trickyScalars[0] != "yes" || trickyScalars[15] != "0x1F" || trickyScalars[35] != `"123"` || trickyScalars[37] != "!!str 123" {
		t.Fatal("trickyScalars was reordered; update the spot checks")
	}
}

// TestStreamsMatchKubectl compares whole streams against kubectl's decoder:
// the same documents must come out, in the same order, with identical
// values.
func TestStreamsMatchKubectl(t *testing.T) {
	streams := map[string]string{
		"multi-document YAML": "---\napiVersion: v1\nkind: A\nmetadata: {name: a}\ndata: {x: yes, y: 012}\n---\n# c\n---\n" +
			"apiVersion: v1\nkind: B\nmetadata:\n  name: b\n  labels: &l {a: '1'}\nspec:\n  <<: *l\n  a: '2'\n  n: [1, 2.5, .5, 1e3]\n",
		"JSON stream":        `{"apiVersion":"v1","kind":"A","metadata":{"name":"a"},"n":1e3,"f":1.5,"big":12345678901234567890}` + "\n" + `{"apiVersion":"v1","kind":"B","metadata":{"name":"b"}}`,
		"JSON then YAML":     `{"apiVersion":"v1","kind":"A","metadata":{"name":"a"}}` + "\n---\napiVersion: v1\nkind: B\nmetadata: {name: b}\nx: on\n",
		"YAML flow mappings": "{apiVersion: v1, kind: A, metadata: {name: a}, x: yes}\n---\n{apiVersion: v1, kind: B, metadata: {name: b}}\n",
		"CRLF":               "apiVersion: v1\r\nkind: A\r\nmetadata: {name: a}\r\n---\r\napiVersion: v1\r\nkind: B\r\nmetadata: {name: b}\r\n",
		"block scalars":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata:\n  script: |\n    #!/bin/sh\n    echo ---\n    ---\n  folded: >\n    a\n    b\n",
	}
	for name, in := range streams {
		t.Run(name, func(t *testing.T) {
			want, err := kubectlDecode([]byte(in))
			if err != nil {
				t.Fatalf("kubectl decoder: %v", err)
			}
			objs, err := decodeString(in, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if len(objs) != len(want) {
				t.Fatalf("got %d objects, kubectl %d", len(objs), len(want))
			}
			for i := range want {
				if !reflect.DeepEqual(objs[i].Object.Object, want[i]) {
					t.Errorf("object %d:\n got  %#v\n kubectl %#v", i, objs[i].Object.Object, want[i])
				}
			}
		})
	}
}
