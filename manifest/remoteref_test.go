package manifest

import (
	"testing"

	"sigs.k8s.io/kustomize/api/types"
)

func TestRemoteReference(t *testing.T) {
	tests := []struct {
		name      string
		kust      string
		local     []string // scheme-less entries that exist next to the kustomization
		wantField string
		wantValue string
	}{
		{name: "local only", kust: "resources: [app.yaml, ../base]\npatches:\n- path: p.yaml\n"},
		{name: "remote resource", kust: "resources:\n- app.yaml\n- github.com/org/repo//deploy?ref=v1\n",
			wantField: "resources", wantValue: "github.com/org/repo//deploy?ref=v1"},
		{name: "deprecated bases", kust: "bases: [https://example.com/base]",
			wantField: "bases", wantValue: "https://example.com/base"},
		{name: "remote component", kust: "components: [git@github.com:org/c.git//x]",
			wantField: "components", wantValue: "git@github.com:org/c.git//x"},
		{name: "first remote wins", kust: "resources: [https://a.example/x.yaml]\ncomponents: [https://b.example/c]",
			wantField: "resources", wantValue: "https://a.example/x.yaml"},
		{name: "patch file", kust: "patches:\n- path: https://example.com/p.yaml\n",
			wantField: "patches", wantValue: "https://example.com/p.yaml"},
		{name: "inline patch", kust: "patches:\n- patch: |\n    - op: remove\n      path: /spec\n"},
		{name: "patchesJson6902", kust: "patchesJson6902:\n- path: https://example.com/p.yaml\n",
			wantField: "patchesJson6902", wantValue: "https://example.com/p.yaml"},
		{name: "patchesStrategicMerge", kust: "patchesStrategicMerge: [https://example.com/p.yaml]",
			wantField: "patchesStrategicMerge", wantValue: "https://example.com/p.yaml"},
		{name: "generator file with key", kust: "configMapGenerator:\n- name: c\n  files: [conf=https://example.com/c.txt]\n",
			wantField: "configMapGenerator", wantValue: "https://example.com/c.txt"},
		{name: "secret env", kust: "secretGenerator:\n- name: s\n  envs: [https://example.com/s.env]\n",
			wantField: "secretGenerator", wantValue: "https://example.com/s.env"},
		{name: "openapi", kust: "openapi:\n  path: https://example.com/schema.json\n",
			wantField: "openapi", wantValue: "https://example.com/schema.json"},
		{name: "a local directory shadows a repository name", kust: "resources: [github.com/org/repo]",
			local: []string{"github.com/org/repo"}},
		{name: "a URL is remote whatever exists locally", kust: "resources: [https://example.com/x.yaml]",
			local: []string{"https://example.com/x.yaml"}, wantField: "resources", wantValue: "https://example.com/x.yaml"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var k types.Kustomization
			if err := k.Unmarshal([]byte(tt.kust)); err != nil {
				t.Fatal(err)
			}
			local := func(entry string) bool {
				for _, l := range tt.local {
					if l == entry {
						return true
					}
				}
				return false
			}
			field, value := RemoteReference(&k, local)
			if field != tt.wantField || value != tt.wantValue {
				t.Errorf("RemoteReference = %q, %q, want %q, %q", field, value, tt.wantField, tt.wantValue)
			}
		})
	}
}

func TestPluginRemoteReference(t *testing.T) {
	tests := []struct {
		name string
		in   any
		want string
	}{
		{name: "local files", in: map[string]any{"kind": "ConfigMapGenerator", "files": []any{"a.txt", "k=b.txt"}}},
		{name: "remote file behind a key", in: map[string]any{"files": []any{"a.txt", "k=https://example.com/b.txt"}},
			want: "https://example.com/b.txt"},
		{name: "nested path", in: map[string]any{"spec": []any{map[string]any{"path": "git::https://example.com/r"}}},
			want: "git::https://example.com/r"},
		{name: "a URL under another key is not a path", in: map[string]any{"url": "https://example.com/x"}},
		{name: "not a map", in: "https://example.com/x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := PluginRemoteReference(tt.in); got != tt.want {
				t.Errorf("PluginRemoteReference = %q, want %q", got, tt.want)
			}
		})
	}
}
