package flux

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"sigs.k8s.io/kustomize/api/konfig"
	"sigs.k8s.io/kustomize/api/resource"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/manifest"
)

// guardFS is what kustomize reads the source through: Flux's secure
// file system (confined to the root), with every file bounded by the size
// limits and every kustomization checked for remote references before
// kustomize can act on them. kustomize-controller would clone remote bases
// and fetch URLs; truce renders offline and refuses them instead.
type guardFS struct {
	filesys.FileSystem
	lim     limits
	aliases int // MaxAliasNodes
	left    int64
	// display maps a path under the root to what users see.
	display func(string) string
	// refusal is the first read refused on purpose: the real reason for a
	// failed build, whatever kustomize made of it.
	refusal error
}

func (g *guardFS) refuse(err error) error {
	if g.refusal == nil {
		g.refusal = err
	}
	return err
}

func (g *guardFS) ReadFile(p string) ([]byte, error) {
	if err := g.admit(p); err != nil {
		return nil, err
	}
	data, err := g.FileSystem.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if err := g.check(p, data); err != nil {
		return nil, g.refuse(err)
	}
	return data, nil
}

func (g *guardFS) Open(p string) (filesys.File, error) {
	if err := g.admit(p); err != nil {
		return nil, err
	}
	return g.FileSystem.Open(p)
}

// admit checks a file's size against the limits before it is read.
func (g *guardFS) admit(p string) error {
	info, err := os.Stat(p)
	if err != nil || !info.Mode().IsRegular() {
		return nil // the secure file system reports it
	}
	if info.Size() > g.lim.maxFile {
		return g.refuse(fmt.Errorf("%s is %s, larger than the %s limit (MaxFileBytes): %w",
			g.display(p), formatBytes(info.Size()), formatBytes(g.lim.maxFile), manifest.ErrTooLarge))
	}
	if g.left -= info.Size(); g.left < 0 {
		return g.refuse(fmt.Errorf("kustomize read more than the %s limit (MaxTotalBytes) at %s: %w",
			formatBytes(g.lim.maxTotal), g.display(p), manifest.ErrTooLarge))
	}
	return nil
}

func (g *guardFS) check(p string, data []byte) error {
	if err := checkAliases(g.display(p), data, g.aliases); err != nil {
		return err
	}
	if slices.Contains(konfig.RecognizedKustomizationFileNames(), filepath.Base(p)) {
		return checkKustomization(g.display(p), filepath.Dir(p), data)
	}
	return checkPluginConfig(g.display(p), data)
}

// checkKustomization refuses a kustomization that refers to a remote base,
// component or file. dir is the kustomization's directory: kustomize
// prefers a local path when one exists.
func checkKustomization(name, dir string, data []byte) error {
	var k kustypes.Kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil // kustomize reports it
	}
	k.FixKustomization() // folds the deprecated bases into resources
	type ref struct{ field, value string }
	var refs []ref
	add := func(field string, values ...string) {
		for _, v := range values {
			refs = append(refs, ref{field, v})
		}
	}
	add("resources", k.Resources...)
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
		if !isRemote(r.value) {
			continue
		}
		if !strings.Contains(r.value, "://") {
			if _, err := os.Stat(filepath.Join(dir, r.value)); err == nil {
				continue
			}
		}
		return fmt.Errorf("%s: %s entry %q is remote: truce builds Flux Kustomizations offline and does not fetch "+
			"remote bases or files; vendor it into the repository: %w", name, r.field, r.value, errRemote)
	}
	return nil
}

// errRemote classifies refusals of remote references.
var errRemote = errors.New("remote reference")

// kvFiles returns the paths a generator reads.
func kvFiles(s kustypes.KvPairSources) []string {
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

// checkPluginConfig refuses builtin generator and transformer
// configurations that would make kustomize fetch a URL.
func checkPluginConfig(name string, data []byte) error {
	if !bytes.Contains(data, []byte("builtin")) {
		return nil
	}
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var m map[string]any
		if yaml.Unmarshal(doc, &m) != nil || m["apiVersion"] != "builtin" {
			continue
		}
		if bad := findRemote(m); bad != "" {
			return fmt.Errorf("%s: %v refers to %q, which is remote: truce builds Flux Kustomizations offline: %w",
				name, m["kind"], bad, errRemote)
		}
	}
	return nil
}

// findRemote returns the first remote reference among the values of the
// path-valued keys of a builtin plugin configuration.
func findRemote(v any) string {
	switch v := v.(type) {
	case map[string]any:
		for key, val := range v {
			switch key {
			case "files", "envs", "env", "envSource", "path", "paths":
				for _, s := range stringsOf(val) {
					if _, p, ok := strings.Cut(s, "="); ok && key == "files" {
						s = p
					}
					if isRemote(s) {
						return s
					}
				}
			}
			if r := findRemote(val); r != "" {
				return r
			}
		}
	case []any:
		for _, e := range v {
			if r := findRemote(e); r != "" {
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

// isRemote reports whether kustomize would fetch s over the network: an
// http(s) file, or anything its Git URL parser accepts.
func isRemote(s string) bool {
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

// kustomizeRepo asks kustomize's own Git URL parser, reachable through
// resource.Origin.Append.
func kustomizeRepo(s string) (repo bool) {
	defer func() {
		if recover() != nil {
			repo = true // unparseable as a path: refuse rather than guess
		}
	}()
	return (&resource.Origin{}).Append(s).Repo != ""
}

// prescan bounds what Flux's generator reads when it scans dir for
// manifests: it reads every .yaml and .yml file under dir, outside
// guardFS, and parses them with kustomize.
func prescan(dir string, lim limits, aliases int, display func(string) string) error {
	left := lim.maxTotal
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		info, err := os.Stat(p)
		if err != nil || !info.Mode().IsRegular() {
			return nil // the generator reports it
		}
		if info.Size() > lim.maxFile {
			return fmt.Errorf("%s is %s, larger than the %s limit (MaxFileBytes): %w",
				display(p), formatBytes(info.Size()), formatBytes(lim.maxFile), manifest.ErrTooLarge)
		}
		if left -= info.Size(); left < 0 {
			return fmt.Errorf("the manifests under %s exceed the %s limit (MaxTotalBytes): %w",
				display(dir), formatBytes(lim.maxTotal), manifest.ErrTooLarge)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil // the generator reports it
		}
		return checkAliases(display(p), data, aliases)
	})
}
