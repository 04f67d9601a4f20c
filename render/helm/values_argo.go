package helm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"helm.sh/helm/v4/pkg/cli/values"
	"helm.sh/helm/v4/pkg/getter"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/argovalues"
)

// ArgoValues are an Argo CD Application's spec.source.helm values settings.
// Merge gives exactly the values helm template gets from the flags Argo
// CD's repo server passes.
type ArgoValues struct {
	// Files are spec.source.helm.valueFiles: relative to the chart
	// directory, or absolute meaning relative to the repository root, or
	// http(s) URLs; glob patterns (*, ?, [) expand in lexical order.
	// "$name/path" reads path from the source RefSources names.
	Files []string
	// IgnoreMissingValueFiles is spec.source.helm.ignoreMissingValueFiles.
	IgnoreMissingValueFiles bool
	// Values is spec.source.helm.values, YAML.
	Values string
	// ValuesObject is spec.source.helm.valuesObject; when set it replaces
	// Values, as in Argo CD.
	ValuesObject map[string]any
	// Parameters are spec.source.helm.parameters (--set, or --set-string
	// when ForceString).
	Parameters []Parameter
	// FileParameters are spec.source.helm.fileParameters (--set-file).
	FileParameters []FileParameter

	// RepositoryRoot bounds the files Merge reads; empty is the top of the
	// Git work tree holding the chart, else the chart directory.
	RepositoryRoot string
	// RefSources map an Application's ref sources ("$values") to the
	// directories their repositories are checked out in.
	RefSources map[string]string
	// MaxFileBytes bounds every values file read; zero is
	// manifest.DefaultMaxFileBytes.
	MaxFileBytes int64
}

// Parameter is one spec.source.helm.parameters entry.
type Parameter = argovalues.Parameter

// FileParameter is one spec.source.helm.fileParameters entry.
type FileParameter struct {
	Name, Path string
}

// inlineValuesName stands for the temporary file Argo CD writes
// spec.source.helm.values to, in messages.
const inlineValuesName = "spec.source.helm.values"

// Merge resolves and merges the values for the chart in chartDir with
// Helm's own values.Options, in helm template's order: value files, then
// the inline values (Argo CD passes them as the last --values file), then
// --set, --set-string and --set-file. Remote files are fetched through p
// (bounded, honouring ctx); with p nil or offline they are a
// *render.Unpredictable.
//
// Argo CD passes parameters from a Go map, so it repeats a name only once
// (the last value wins) and their order varies between runs; Merge keeps
// the order of first appearance. Argo CD's environment substitution
// ($ARGOCD_APP_NAME and the like) is the caller's to apply.
func (v ArgoValues) Merge(ctx context.Context, chartDir string, p *Puller) (map[string]any, error) {
	abs, root, err := chartRoot(chartDir, v.RepositoryRoot)
	if err != nil {
		return nil, err
	}
	r := valueResolver{appPath: abs, root: root, refs: v.RefSources, limit: v.MaxFileBytes}
	if r.limit <= 0 {
		r.limit = manifest.DefaultMaxFileBytes
	}
	opts := values.Options{}
	if opts.ValueFiles, err = r.valueFiles(v.Files, v.IgnoreMissingValueFiles); err != nil {
		return nil, err
	}
	inline, err := argovalues.InlineYAML(v.Values, v.ValuesObject)
	if err != nil {
		return nil, err
	}
	if len(inline) > 0 {
		tmp, err := writeTemp(inline)
		if err != nil {
			return nil, err
		}
		defer os.Remove(tmp)
		opts.ValueFiles = append(opts.ValueFiles, tmp)
		r.rename = map[string]string{tmp: inlineValuesName}
	}
	opts.Values, opts.StringValues = argovalues.SetFlags(v.Parameters)
	for _, fp := range dedupe(v.FileParameters) {
		path, err := r.resolve(fp.Path)
		if err != nil {
			return nil, fmt.Errorf("helm.fileParameters %s: %w", fp.Name, err)
		}
		if !isURL(path) {
			if err := r.checkFile(path); err != nil {
				return nil, fmt.Errorf("helm.fileParameters %s: %w", fp.Name, err)
			}
		}
		opts.FileValues = append(opts.FileValues, fp.Name+"="+argovalues.CleanSetParameters(path))
	}

	var providers getter.Providers
	var s *session
	remote := remoteFiles(opts)
	if len(remote) > 0 {
		if p == nil || p.Offline {
			return nil, &render.Unpredictable{Subject: "values file " + redactURL(remote[0]), Reason: "needs the network (--offline)"}
		}
		if s, err = p.newSession(ctx); err != nil {
			return nil, err
		}
		defer s.close()
		providers = s.uncachedProviders(s.transport)
	}
	out, err := mergeValues(&opts, providers)
	if err != nil {
		if s != nil {
			if u := s.unreachable("values file " + redactURL(remote[0])); u != nil {
				return nil, u
			}
		}
		return nil, r.redact(err)
	}
	return out, nil
}

// LocalFiles lists the value files Merge reads from disk for the chart in
// chartDir, in Helm's merge order (later files win): globs expanded and
// missing files skipped as Merge does, URLs left out. Paths are absolute
// with symlinks resolved. Fixes use it to find the file that sets a value.
func (v ArgoValues) LocalFiles(chartDir string) ([]string, error) {
	abs, root, err := chartRoot(chartDir, v.RepositoryRoot)
	if err != nil {
		return nil, err
	}
	r := valueResolver{appPath: abs, root: root, refs: v.RefSources, limit: v.MaxFileBytes}
	if r.limit <= 0 {
		r.limit = manifest.DefaultMaxFileBytes
	}
	files, err := r.valueFiles(v.Files, v.IgnoreMissingValueFiles)
	if err != nil {
		return nil, err
	}
	out := files[:0]
	for _, f := range files {
		if !isURL(f) {
			out = append(out, f)
		}
	}
	return out, nil
}

// mergeValues runs Helm's merge, turning a panic in a parser into an error.
func mergeValues(opts *values.Options, p getter.Providers) (out map[string]any, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("merging Helm values: %v", r)
		}
	}()
	return opts.MergeValues(p)
}

func writeTemp(data []byte) (string, error) {
	f, err := os.CreateTemp("", "truce-argocd-values-*.yaml")
	if err != nil {
		return "", err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(f.Name())
		return "", err
	}
	return f.Name(), nil
}

// dedupe keeps one file parameter per name, the last path winning.
func dedupe(fps []FileParameter) []FileParameter {
	var out []FileParameter
	for _, fp := range fps {
		if i := slices.IndexFunc(out, func(o FileParameter) bool { return o.Name == fp.Name }); i >= 0 {
			out[i].Path = fp.Path
			continue
		}
		out = append(out, fp)
	}
	return out
}

func isURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && u.Scheme != "" && u.Host != ""
}

// remoteFiles lists the URLs Helm would fetch.
func remoteFiles(opts values.Options) []string {
	var out []string
	for _, f := range opts.ValueFiles {
		if isURL(f) {
			out = append(out, f)
		}
	}
	for _, f := range opts.FileValues {
		if _, path, ok := strings.Cut(f, "="); ok && isURL(path) {
			out = append(out, path)
		}
	}
	return out
}

// valueResolver resolves value file paths as Argo CD's repo server does,
// confined to the repository.
type valueResolver struct {
	appPath, root string
	refs          map[string]string
	limit         int64
	rename        map[string]string // temporary files to their names in messages
}

// valueFiles resolves, expands and filters Files as Argo CD's
// getResolvedValueFiles: a file listed explicitly is left out of the
// expansion of a glob before it, duplicates keep their first place, and
// missing files are skipped only with ignoreMissing.
func (r *valueResolver) valueFiles(raw []string, ignoreMissing bool) ([]string, error) {
	explicit := map[string]bool{}
	for _, f := range raw {
		if p, err := r.resolve(f); err == nil && !isGlob(p) {
			explicit[p] = true
		}
	}
	var out []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	for _, f := range raw {
		p, err := r.resolve(f)
		if err != nil {
			return nil, fmt.Errorf("helm.valueFiles %q: %w", f, err)
		}
		if isURL(p) {
			add(p)
			continue
		}
		if isGlob(p) {
			matches, err := r.glob(f, p)
			if err != nil {
				return nil, err
			}
			if len(matches) == 0 && !ignoreMissing {
				return nil, fmt.Errorf("helm.valueFiles: values file glob %q matched no files", f)
			}
			for _, m := range matches {
				if !explicit[m] {
					add(m)
				}
			}
			continue
		}
		if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
			if ignoreMissing {
				continue
			}
			return nil, fmt.Errorf("helm.valueFiles %q: %s does not exist", f, p)
		}
		if err := r.checkFile(p); err != nil {
			return nil, fmt.Errorf("helm.valueFiles %q: %w", f, err)
		}
		add(p)
	}
	return out, nil
}

func isGlob(p string) bool { return strings.ContainsAny(p, "*?[") }

// glob expands a pattern with Go's filepath.Glob. Argo CD uses doublestar,
// whose ** and {a,b} filepath.Glob lacks; those are refused rather than
// matched differently.
func (r *valueResolver) glob(raw, pattern string) ([]string, error) {
	if strings.Contains(pattern, "**") || strings.ContainsAny(pattern, "{}") {
		return nil, fmt.Errorf("helm.valueFiles %q: ** and {…} glob patterns are not supported", raw)
	}
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("helm.valueFiles %q: %w", raw, err)
	}
	slices.Sort(matches)
	var files []string
	for _, m := range matches {
		real, err := filepath.EvalSymlinks(m)
		if err != nil {
			return nil, fmt.Errorf("helm.valueFiles %q: %w", raw, err)
		}
		if !within(r.root, real) {
			return nil, fmt.Errorf("helm.valueFiles %q: %s resolves outside the repository root %s", raw, m, r.root)
		}
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			continue
		}
		if err := r.checkFile(m); err != nil {
			return nil, fmt.Errorf("helm.valueFiles %q: %w", raw, err)
		}
		files = append(files, m)
	}
	return files, nil
}

// resolve turns a value file reference into an absolute path inside the
// repository (or a ref source's), or a URL, as Argo CD's
// ResolveValueFilePathOrUrl: relative paths are relative to the chart,
// absolute ones to the repository root.
func (r *valueResolver) resolve(raw string) (string, error) {
	if u, err := url.Parse(raw); err == nil && u.Scheme != "" {
		switch strings.ToLower(u.Scheme) {
		case "http", "https":
			return raw, nil
		}
		return "", fmt.Errorf("the URL scheme '%s' is not allowed", u.Scheme)
	}
	appPath, root := r.appPath, r.root
	if name, rest, ok := strings.Cut(raw, "/"); ok && strings.HasPrefix(name, "$") {
		if dir, known := r.refs[name]; known {
			real, err := realPath(dir)
			if err != nil {
				return "", fmt.Errorf("ref source %s: %w", name, err)
			}
			appPath, root, raw = real, real, "/"+rest
		}
	}
	p := raw
	if filepath.IsAbs(p) {
		p = filepath.Join(root, p)
	} else {
		p = filepath.Join(appPath, p)
	}
	if real, err := filepath.EvalSymlinks(p); err == nil {
		p = real
	}
	if p == root {
		return "", errors.New("path resolved to the repository root, which is not allowed")
	}
	if !within(root, p) {
		return "", fmt.Errorf("file '%s' resolved to outside repository root %s", raw, root)
	}
	return p, nil
}

// checkFile refuses what Helm would read unbounded or block on: anything
// but a regular file of at most the limit.
func (r *valueResolver) checkFile(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%s is not a regular file", p)
	}
	if fi.Size() > r.limit {
		return fmt.Errorf("%s is larger than the %s limit (MaxFileBytes)", p, formatBytes(r.limit))
	}
	return nil
}

// redact replaces temporary file names in Helm's messages.
func (r *valueResolver) redact(err error) error {
	msg := err.Error()
	changed := false
	for tmp, name := range r.rename {
		if strings.Contains(msg, tmp) {
			msg = strings.ReplaceAll(msg, tmp, name)
			changed = true
		}
	}
	if !changed {
		return err
	}
	return errors.New(msg)
}
