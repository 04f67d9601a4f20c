// Command gen copies the OpenAPI v3 documents that ship with the pinned
// k8s.io/kubernetes module into schema/openapi, gzipped, so that truce types
// built-in objects with exactly the schemas kube-apiserver 1.37.2 serves.
//
// Run it with `go generate ./schema` after changing the k8s.io/kubernetes
// version in go.mod.
package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/kubernetes/pkg/controlplane"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run() error {
	out, err := exec.Command("go", "list", "-m", "-f", "{{.Dir}}", "k8s.io/kubernetes").Output()
	if err != nil {
		return fmt.Errorf("locating k8s.io/kubernetes module: %w", err)
	}
	src := filepath.Join(strings.TrimSpace(string(out)), "api", "openapi-spec", "v3")
	entries, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("reading %s: %w", src, err)
	}
	dst := "openapi"
	old, _ := filepath.Glob(filepath.Join(dst, "*.json.gz"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	enabled := controlplane.DefaultAPIResourceConfigSource()
	var index []resource
	for _, e := range entries {
		name := e.Name()
		// Only group-version documents carry schemas and paths for resources.
		if !strings.HasSuffix(name, "_openapi.json") || (name != "api__v1_openapi.json" && strings.Count(name, "__") < 2) {
			continue
		}
		data, err := os.ReadFile(filepath.Join(src, name))
		if err != nil {
			return err
		}
		gv := groupVersionOf(name)
		rs, err := resourcesOf(gv, data)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		// Resources a default kube-apiserver does not serve (alpha, most beta)
		// are left out: matching, discovery and typing must not see them.
		served := rs[:0]
		for _, r := range rs {
			if aggregated[gv] || enabled.ResourceEnabled(schema.GroupVersionResource{Group: r.Group, Version: r.Version, Resource: r.Resource}) {
				served = append(served, r)
			}
		}
		if len(served) == 0 {
			continue
		}
		index = append(index, served...)
		var buf bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
		// A zero modification time keeps the output byte-identical across runs.
		if _, err := zw.Write(data); err != nil {
			return err
		}
		if err := zw.Close(); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, name+".gz"), buf.Bytes(), 0o644); err != nil {
			return err
		}
	}
	sort.Slice(index, func(i, j int) bool {
		a, b := index[i], index[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Resource < b.Resource
	})
	data, err := json.MarshalIndent(index, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dst, "resources.json"), append(data, '\n'), 0o644)
}

// aggregated are served by the apiextensions and aggregator servers that
// kube-apiserver chains in front of itself, so its resource config omits them.
var aggregated = map[schema.GroupVersion]bool{
	{Group: "apiextensions.k8s.io", Version: "v1"}:   true,
	{Group: "apiregistration.k8s.io", Version: "v1"}: true,
}

// resource mirrors schema.BuiltinResource; kept separate so the generator
// does not import the package it generates data for.
type resource struct {
	Group        string            `json:"group"`
	Version      string            `json:"version"`
	Resource     string            `json:"resource"`
	Kind         string            `json:"kind"`
	Namespaced   bool              `json:"namespaced"`
	Verbs        []string          `json:"verbs"`
	Subresources map[string]subres `json:"subresources,omitempty"`
}

type subres struct {
	Group   string   `json:"group"`
	Version string   `json:"version"`
	Kind    string   `json:"kind"`
	Verbs   []string `json:"verbs"`
}

func groupVersionOf(file string) schema.GroupVersion {
	parts := strings.Split(strings.TrimSuffix(file, "_openapi.json"), "__")
	if parts[0] == "api" {
		return schema.GroupVersion{Version: parts[1]}
	}
	return schema.GroupVersion{Group: parts[1], Version: parts[2]}
}

type pathItem map[string]json.RawMessage

type operation struct {
	GVK    *struct{ Group, Version, Kind string } `json:"x-kubernetes-group-version-kind"`
	Action string                                 `json:"x-kubernetes-action"`
}

var verbOf = map[string]string{"post": "create", "put": "update", "patch": "patch", "delete": "delete", "get": "get"}

// resourcesOf derives discovery from the document's paths, exactly the routes
// the server installs: /apis/G/V[/namespaces/{namespace}]/R[/{name}[/SUB]].
func resourcesOf(gv schema.GroupVersion, data []byte) ([]resource, error) {
	var doc struct {
		Paths map[string]pathItem `json:"paths"`
	}
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, err
	}
	prefix := "/apis/" + gv.Group + "/" + gv.Version + "/"
	if gv.Group == "" {
		prefix = "/api/" + gv.Version + "/"
	}
	byName := map[string]*resource{}
	get := func(name string) *resource {
		r := byName[name]
		if r == nil {
			r = &resource{Group: gv.Group, Version: gv.Version, Resource: name}
			byName[name] = r
		}
		return r
	}
	paths := make([]string, 0, len(doc.Paths))
	for p := range doc.Paths {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		rest, ok := strings.CutPrefix(p, prefix)
		if !ok || strings.HasPrefix(rest, "watch/") {
			continue
		}
		namespaced := false
		if r, ok := strings.CutPrefix(rest, "namespaces/{namespace}/"); ok {
			namespaced, rest = true, r
		}
		segs := strings.Split(rest, "/")
		var name, sub string
		switch {
		case len(segs) == 1:
			name = segs[0]
		case len(segs) == 2 && segs[1] == "{name}":
			name = segs[0]
		case len(segs) == 3 && segs[1] == "{name}":
			name, sub = segs[0], segs[2]
		default:
			continue
		}
		if name == "" || strings.Contains(name, "{") {
			continue
		}
		var verbs []string
		var kind *struct{ Group, Version, Kind string }
		methods := make([]string, 0, len(doc.Paths[p]))
		for m := range doc.Paths[p] {
			methods = append(methods, m)
		}
		sort.Strings(methods)
		for _, m := range methods {
			v, ok := verbOf[m]
			if !ok {
				continue
			}
			var op operation
			if err := json.Unmarshal(doc.Paths[p][m], &op); err != nil {
				return nil, fmt.Errorf("%s %s: %w", m, p, err)
			}
			if op.GVK != nil && kind == nil {
				kind = op.GVK
			}
			if op.Action == "list" {
				v = "list"
			}
			verbs = append(verbs, v)
		}
		if kind == nil {
			continue
		}
		r := get(name)
		if sub == "" {
			// The namespaced route decides scope; the cluster-wide list route of a
			// namespaced resource must not flip it back.
			r.Namespaced = r.Namespaced || namespaced
			if len(segs) == 2 || r.Kind == "" {
				r.Kind = kind.Kind
			}
			r.Verbs = mergeVerbs(r.Verbs, verbs)
			continue
		}
		if r.Subresources == nil {
			r.Subresources = map[string]subres{}
		}
		s := r.Subresources[sub]
		s.Group, s.Version, s.Kind = kind.Group, kind.Version, kind.Kind
		s.Verbs = mergeVerbs(s.Verbs, verbs)
		r.Subresources[sub] = s
	}
	out := make([]resource, 0, len(byName))
	for _, r := range byName {
		if r.Kind == "" {
			continue
		}
		out = append(out, *r)
	}
	return out, nil
}

func mergeVerbs(a, b []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, v := range append(a, b...) {
		if !seen[v] {
			seen[v] = true
			out = append(out, v)
		}
	}
	sort.Strings(out)
	return out
}
