package manifest

import (
	"strings"

	"sigs.k8s.io/kustomize/api/resource"
	"sigs.k8s.io/kustomize/api/types"
)

// RemoteReference returns the first entry of the kustomization k that
// kustomize would fetch over the network (a remote base, component or
// file), with the field it is listed in; value is "" when there is none.
// local reports whether a scheme-less entry names something that exists
// next to the kustomization: kustomize prefers it to a Git repository of
// that name. Renderers refuse what this finds, because truce renders
// offline; k is read as kustomize reads it, deprecated fields included.
func RemoteReference(k *types.Kustomization, local func(entry string) bool) (field, value string) {
	type ref struct{ field, value string }
	var refs []ref
	add := func(field string, values ...string) {
		for _, v := range values {
			refs = append(refs, ref{field, v})
		}
	}
	add("resources", k.Resources...)
	//lint:ignore SA1019 kustomize still reads bases (FixKustomization folds them into resources)
	add("bases", k.Bases...)
	add("components", k.Components...)
	add("crds", k.Crds...)
	add("configurations", k.Configurations...)
	add("generators", k.Generators...)
	add("transformers", k.Transformers...)
	add("validators", k.Validators...)
	add("openapi", k.OpenAPI["path"])
	for _, p := range k.Patches {
		add("patches", p.Path)
	}
	// The deprecated fields still work in kustomize, so they are checked.
	//lint:ignore SA1019 kustomize still applies patchesJson6902
	for _, p := range k.PatchesJson6902 {
		add("patchesJson6902", p.Path)
	}
	//lint:ignore SA1019 kustomize still applies patchesStrategicMerge
	for _, p := range k.PatchesStrategicMerge {
		add("patchesStrategicMerge", string(p))
	}
	for _, r := range k.Replacements {
		add("replacements", r.Path)
	}
	for _, g := range k.ConfigMapGenerator {
		add("configMapGenerator", kvFiles(g.KvPairSources)...)
	}
	for _, g := range k.SecretGenerator {
		add("secretGenerator", kvFiles(g.KvPairSources)...)
	}
	for _, r := range refs {
		if !isRemoteRef(r.value) {
			continue
		}
		if !strings.Contains(r.value, "://") && local(r.value) {
			continue
		}
		return r.field, r.value
	}
	return "", ""
}

// kvFiles returns the paths a generator reads.
func kvFiles(s types.KvPairSources) []string {
	out := append([]string(nil), s.EnvSources...)
	if s.EnvSource != "" {
		out = append(out, s.EnvSource)
	}
	for _, f := range s.FileSources {
		if _, p, ok := strings.Cut(f, "="); ok {
			f = p
		}
		out = append(out, f)
	}
	return out
}

// PluginRemoteReference returns the first remote reference among the
// values of the path-valued keys (files, envs, path, ...) of v, a decoded
// builtin generator or transformer configuration (apiVersion: builtin),
// or "" when there is none.
func PluginRemoteReference(v any) string {
	switch v := v.(type) {
	case map[string]any:
		for key, val := range v {
			switch key {
			case "files", "envs", "env", "envSource", "path", "paths":
				for _, s := range stringsOf(val) {
					if _, p, ok := strings.Cut(s, "="); ok && key == "files" {
						s = p
					}
					if isRemoteRef(s) {
						return s
					}
				}
			}
			if r := PluginRemoteReference(val); r != "" {
				return r
			}
		}
	case []any:
		for _, e := range v {
			if r := PluginRemoteReference(e); r != "" {
				return r
			}
		}
	}
	return ""
}

func stringsOf(v any) []string {
	switch v := v.(type) {
	case string:
		return []string{v}
	case []any:
		var out []string
		for _, e := range v {
			if s, ok := e.(string); ok {
				out = append(out, s)
			}
		}
		return out
	}
	return nil
}

// isRemoteRef reports whether kustomize would fetch s over the network:
// an http(s) file, or anything its Git URL parser accepts (which includes
// scheme-less forms such as github.com/org/repo).
func isRemoteRef(s string) bool {
	s = strings.TrimSpace(s)
	if s == "" || strings.Contains(s, "\n") {
		return false // empty, or an inline patch
	}
	lower := strings.ToLower(s)
	if strings.Contains(lower, "://") || strings.HasPrefix(lower, "git::") ||
		strings.HasPrefix(lower, "git@") || strings.HasPrefix(lower, "gh:") {
		return true
	}
	return kustomizeRepo(s)
}

// kustomizeRepo asks kustomize's own Git URL parser, which is internal but
// reachable through resource.Origin.Append.
func kustomizeRepo(s string) (repo bool) {
	defer func() {
		if recover() != nil {
			repo = true // unparseable as a path: refuse rather than guess
		}
	}()
	return (&resource.Origin{}).Append(s).Repo != ""
}
