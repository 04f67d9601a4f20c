package main

import (
	"strings"
	"testing"
)

const crdHead = `---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names:
    kind: Widget
    plural: widgets
  scope: Namespaced
  versions:
`

func version(name string, served, storage bool) string {
	b := func(v bool) string {
		if v {
			return "true"
		}
		return "false"
	}
	return "  - name: " + name + "\n    schema:\n      openAPIV3Schema:\n        type: object\n" +
		"    served: " + b(served) + "\n    storage: " + b(storage) + "\n"
}

func TestDropUnserved(t *testing.T) {
	for _, tc := range []struct {
		name        string
		in          string
		wantDropped []string
		wantServed  []string // versions left, when the input changed
		wantErr     string
	}{
		{
			name: "all served, kept byte for byte",
			in:   crdHead + "  # comment and   odd  spacing kept\n" + version("v1", true, true) + version("v1beta1", true, false),
		},
		{
			name:        "unserved version dropped",
			in:          crdHead + version("v1", true, true) + version("v1beta1", false, false),
			wantDropped: []string{"widgets.example.com/v1beta1"},
			wantServed:  []string{"v1"},
		},
		{
			name:        "served absent means not served",
			in:          crdHead + version("v1", true, true) + "  - name: v0\n    storage: false\n",
			wantDropped: []string{"widgets.example.com/v0"},
			wantServed:  []string{"v1"},
		},
		{
			name:        "every document",
			in:          crdHead + version("v1", true, true) + version("v1alpha1", false, false) + crdHead + version("v2", true, true) + version("v1", false, false),
			wantDropped: []string{"widgets.example.com/v1alpha1", "widgets.example.com/v1"},
			wantServed:  []string{"v1", "v2"},
		},
		{name: "unserved storage version", in: crdHead + version("v1", false, true), wantErr: "storage version v1 is not served"},
		{name: "nothing served", in: crdHead + version("v1", false, false), wantErr: "no version is served"},
		{name: "served not a boolean", in: crdHead + "  - name: v1\n    served: [x]\n", wantErr: "field served"},
		{name: "bad YAML", in: "a: [\n", wantErr: "parsing YAML"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, dropped, err := dropUnserved([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if strings.Join(dropped, " ") != strings.Join(tc.wantDropped, " ") {
				t.Errorf("dropped = %v, want %v", dropped, tc.wantDropped)
			}
			if len(tc.wantDropped) == 0 {
				if string(out) != tc.in {
					t.Errorf("unchanged file was rewritten:\n%s", out)
				}
				return
			}
			crds, err := inspect(out)
			if err != nil {
				t.Fatalf("output does not decode: %v\n%s", err, out)
			}
			var served []string
			for _, c := range crds {
				served = append(served, c.Served...)
			}
			if strings.Join(served, " ") != strings.Join(tc.wantServed, " ") {
				t.Errorf("served versions = %v, want %v\n%s", served, tc.wantServed, out)
			}
		})
	}
}

func TestInspect(t *testing.T) {
	for _, tc := range []struct {
		name    string
		in      string
		want    string // Kind.Group/storage
		wantErr string
	}{
		{name: "one CRD", in: crdHead + version("v1", true, true) + version("v2", true, false), want: "Widget.example.com/v1"},
		{name: "not a CRD", in: "apiVersion: v1\nkind: ConfigMap\n", wantErr: "not an apiextensions.k8s.io/v1"},
		{name: "v1beta1 CRD", in: strings.Replace(crdHead, "apiextensions.k8s.io/v1", "apiextensions.k8s.io/v1beta1", 1) + version("v1", true, true), wantErr: "not an apiextensions.k8s.io/v1"},
		{name: "no storage", in: crdHead + version("v1", true, false), wantErr: "no storage version"},
		{name: "two storage", in: crdHead + version("v1", true, true) + version("v2", true, true), wantErr: "two storage versions"},
		{name: "empty", in: "---\n", wantErr: "no CustomResourceDefinition"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crds, err := inspect([]byte(tc.in))
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(crds) != 1 || crds[0].Kind+"."+crds[0].Group+"/"+crds[0].Storage != tc.want {
				t.Errorf("got %+v, want %s", crds, tc.want)
			}
		})
	}
}

func FuzzDropUnserved(f *testing.F) {
	f.Add([]byte(crdHead + version("v1", true, true) + version("v1beta1", false, false)))
	f.Add([]byte(crdHead + version("v1", true, true)))
	f.Add([]byte("a: b\n---\n- c\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		out, dropped, err := dropUnserved(data)
		if err != nil {
			return
		}
		if len(dropped) == 0 && string(out) != string(data) {
			t.Error("nothing dropped but output differs")
		}
		if len(dropped) > 0 {
			if _, again, err := dropUnserved(out); err != nil || len(again) > 0 {
				t.Errorf("output not stable: dropped %v, err %v", again, err)
			}
		}
	})
}
