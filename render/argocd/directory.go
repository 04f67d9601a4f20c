package argocd

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/jsonnet"
)

// DirectorySpec is spec.source.directory of an Application.
type DirectorySpec struct {
	Recurse bool
	// Include and Exclude are glob patterns (see pattern) matched against
	// each file's path relative to the source directory; empty matches
	// everything for Include and nothing for Exclude.
	Include, Exclude string
	// DisableExtensionFilter reads files whatever their extension
	// (Argo CD 3.x's directory.disableExtensionFilter).
	DisableExtensionFilter bool
	Jsonnet                JsonnetSpec
	// Env is the build environment substituted in the values of Jsonnet
	// variables, normally App.Env(); nil substitutes nothing but still
	// removes $VAR references, as Argo CD would with unknown variables.
	Env map[string]string
}

// JsonnetSpec is spec.source.directory.jsonnet.
type JsonnetSpec struct {
	// Libs are library directories, relative to the repository root (an
	// absolute path too is taken inside the repository).
	Libs    []string
	ExtVars []jsonnet.Var
	TLAs    []jsonnet.Var
}

// manifestFile is the repo-server's test for file names it reads.
var manifestFile = regexp.MustCompile(`^.*\.(yaml|yml|json|jsonnet)$`)

// skipMarker in a file makes the repo-server ignore it.
const skipMarker = "+argocd:skip-file-rendering"

// Directory reads the directory source dir as Argo CD's findManifests does:
// the files directly in dir, or below it with Recurse, whose names end in
// .yaml, .yml, .json or .jsonnet (hidden files included: the repo-server
// does not skip them), that Include matches and Exclude does not and that
// do not contain "+argocd:skip-file-rendering". Directories are walked in
// lexical order.
//
// YAML files are decoded with positions by manifest.Decode; a YAML file
// that is not Kubernetes objects at all and does not mention apiVersion:,
// kind: and metadata: is skipped, as Argo CD skips it. A JSON file must
// hold exactly one value. Jsonnet files are evaluated by render/jsonnet
// with the source directory and the libraries as search path and the
// variables after $ARGOCD_APP_* substitution, imports confined to the
// repository.
//
// Symlinks are followed only to regular files inside the repository
// (opts.Manifest.RepositoryRoot, else the enclosing Git work tree, else
// dir); one leading outside is an error, one whose target is missing or
// not a regular file is skipped, like in Argo CD. Errors are collected:
// objects that loaded are returned with an errors.Join of the problems.
func Directory(ctx context.Context, dir string, spec DirectorySpec, opts render.Options) ([]manifest.Object, error) {
	mopts := withDefaults(opts.Manifest)
	root, err := repositoryRoot(dir, mopts.RepositoryRoot)
	if err != nil {
		return nil, fmt.Errorf("reading the Argo CD directory source %s: %w", dir, err)
	}
	appPath, err := filepath.EvalSymlinks(dir)
	if err == nil {
		appPath, err = filepath.Abs(appPath)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the Argo CD directory source %s: %w", dir, err)
	}
	if appPath != root && !inside(appPath, root) {
		return nil, &manifest.Error{Source: manifest.Source{File: dir}, Err: manifest.ErrOutsideRoot,
			Msg: "the source directory is outside the repository root " + root}
	}
	d := &dirReader{
		spec: spec, opts: mopts, root: root, appPath: appPath, dir: dir,
		include: compilePattern(spec.Include), exclude: compilePattern(spec.Exclude),
	}
	walkErr := filepath.WalkDir(appPath, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			d.fail(fmt.Errorf("reading the Argo CD directory source: %w", err))
			return nil // WalkDir skips the unreadable directory
		}
		if e.IsDir() {
			if p != appPath && !spec.Recurse {
				return fs.SkipDir
			}
			return nil
		}
		if err := ctx.Err(); err != nil {
			d.fail(fmt.Errorf("reading the Argo CD directory source %s stopped: %w", dir, err))
			return fs.SkipAll
		}
		if !d.readFile(ctx, p, e) {
			return fs.SkipAll
		}
		return nil
	})
	if walkErr != nil {
		d.fail(walkErr)
	}
	return d.objs, errors.Join(d.errs...)
}

// dirReader carries one Directory call.
type dirReader struct {
	spec             DirectorySpec
	opts             manifest.Options
	root, appPath    string
	dir              string
	include, exclude pattern
	// total is what plain files added up to, against MaxTotalBytes.
	total int64
	// libs are the resolved Jsonnet library paths, once needed.
	libs    []string
	libsErr error
	libsSet bool

	objs []manifest.Object
	errs []error
}

func (d *dirReader) fail(err error) { d.errs = append(d.errs, err) }

// readFile reads the walked file p if it is a candidate and reports whether
// the walk may go on.
func (d *dirReader) readFile(ctx context.Context, p string, e fs.DirEntry) bool {
	name := e.Name()
	if !d.spec.DisableExtensionFilter && !manifestFile.MatchString(name) {
		return true
	}
	rel, err := filepath.Rel(d.appPath, p)
	if err != nil {
		d.fail(err)
		return true
	}
	display := filepath.Join(d.dir, rel)
	src := manifest.Source{File: display}
	real := p
	if e.Type()&fs.ModeSymlink != 0 {
		real, err = filepath.EvalSymlinks(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return true // Argo CD skips a dangling symlink with a warning
		case err != nil:
			d.fail(&manifest.Error{Source: src, Err: err, Msg: "cannot resolve symlink: " + err.Error()})
			return true
		case !inside(real, d.root):
			d.fail(&manifest.Error{Source: src, Err: manifest.ErrOutsideRoot,
				Msg: "refusing to read: the symlink leads outside the repository root"})
			return true
		}
	}
	info, err := os.Stat(real)
	if err != nil {
		d.fail(&manifest.Error{Source: src, Err: err, Msg: "cannot read: " + err.Error()})
		return true
	}
	if !info.Mode().IsRegular() {
		return true // e.g. a symlink to a directory; Argo CD skips it
	}
	if d.spec.Exclude != "" && d.exclude.match(rel) {
		return true
	}
	if d.spec.Include != "" && !d.include.match(rel) {
		return true
	}
	isJsonnet := strings.HasSuffix(name, ".jsonnet")
	if info.Size() > d.opts.MaxFileBytes {
		d.fail(&manifest.Error{Source: src, Err: manifest.ErrTooLarge, Msg: fmt.Sprintf(
			"file is %d bytes, larger than the %d-byte limit ("+d.opts.LimitHint("MaxFileBytes")+")", info.Size(), d.opts.MaxFileBytes)})
		return true
	}
	if !isJsonnet {
		// Like Argo CD's max combined manifest size, Jsonnet sources do
		// not count; their output does, below.
		if d.total += info.Size(); d.total > d.opts.MaxTotalBytes {
			d.fail(&manifest.Error{Source: src, Err: manifest.ErrTooLarge, Msg: fmt.Sprintf(
				"the directory source's files exceed the %d-byte limit ("+d.opts.LimitHint("MaxTotalBytes")+")", d.opts.MaxTotalBytes)})
			return false
		}
	}
	data, err := readLimited(real, d.opts.MaxFileBytes)
	if err != nil {
		d.fail(&manifest.Error{Source: src, Err: err, Msg: "cannot read: " + err.Error()})
		return true
	}
	if bytes.Contains(data, []byte(skipMarker)) {
		return true
	}
	switch {
	case isJsonnet:
		return d.evaluate(ctx, display, src)
	case strings.HasSuffix(name, ".json"):
		d.decodeJSON(display, src, data)
	default:
		d.decodeYAML(display, data)
	}
	return true
}

// evaluate evaluates a Jsonnet file of the directory.
func (d *dirReader) evaluate(ctx context.Context, display string, src manifest.Source) bool {
	libs, err := d.jsonnetLibs()
	if err != nil {
		d.fail(&manifest.Error{Source: src, Err: manifest.ErrOutsideRoot, Msg: err.Error()})
		return true
	}
	objs, err := jsonnet.Evaluate(ctx, display, jsonnet.Options{
		LibPaths: libs,
		ExtVars:  substitute(d.spec.Jsonnet.ExtVars, d.spec.Env),
		TLAs:     substitute(d.spec.Jsonnet.TLAs, d.spec.Env),
		Manifest: d.opts,
		Root:     d.root,
	})
	d.objs = append(d.objs, objs...)
	if err != nil {
		d.fail(err)
	}
	for _, o := range objs {
		if d.total += int64(len(o.Raw)); d.total > d.opts.MaxTotalBytes {
			d.fail(&manifest.Error{Source: src, Err: manifest.ErrTooLarge, Msg: fmt.Sprintf(
				"the directory source's files and Jsonnet output exceed the %d-byte limit ("+d.opts.LimitHint("MaxTotalBytes")+")", d.opts.MaxTotalBytes)})
			return false
		}
	}
	return true
}

// jsonnetLibs returns the Jsonnet search path Argo CD builds: the source
// directory, then the libraries resolved inside the repository.
func (d *dirReader) jsonnetLibs() ([]string, error) {
	if d.libsSet {
		return d.libs, d.libsErr
	}
	d.libsSet = true
	d.libs = []string{d.appPath}
	for _, lib := range d.spec.Jsonnet.Libs {
		p := filepath.Join(d.root, lib) // an absolute lib is inside the repository too
		if real, err := filepath.EvalSymlinks(p); err == nil {
			p = real
		}
		if p != d.root && !inside(p, d.root) {
			d.libsErr = fmt.Errorf("jsonnet library %q resolves outside the repository root", lib)
			return nil, d.libsErr
		}
		d.libs = append(d.libs, p)
	}
	return d.libs, nil
}

// substitute returns vars with Argo CD's environment substitution applied
// to their values.
func substitute(vars []jsonnet.Var, env map[string]string) []jsonnet.Var {
	out := make([]jsonnet.Var, len(vars))
	for i, v := range vars {
		v.Value = Envsubst(v.Value, env)
		out[i] = v
	}
	return out
}

// decodeJSON reads a .json file, which Argo CD requires to be one value.
func (d *dirReader) decodeJSON(display string, src manifest.Source, data []byte) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var first json.RawMessage
	if err := dec.Decode(&first); err != nil {
		d.fail(&manifest.Error{Source: src, Err: manifest.ErrSyntax, Msg: "cannot decode JSON: " + err.Error()})
		return
	}
	if dec.More() {
		d.fail(&manifest.Error{Source: src, Err: manifest.ErrInvalidObject,
			Msg: "found multiple objects; Argo CD allows only a single object in a JSON file"})
		return
	}
	objs, err := manifest.Decode(display, bytes.NewReader(data), d.opts)
	d.objs = append(d.objs, objs...)
	if err != nil {
		d.fail(err)
	}
}

// decodeYAML reads a YAML (or extension-less) file, skipping it when Argo CD
// would take it for an unrelated YAML file.
func (d *dirReader) decodeYAML(display string, data []byte) {
	objs, err := manifest.Decode(display, bytes.NewReader(data), d.opts)
	if err != nil && len(objs) == 0 && !hostile(err) && argoSkips(data) {
		return
	}
	d.objs = append(d.objs, objs...)
	if err != nil {
		d.fail(err)
	}
}

// hostile reports whether err is a limit package manifest enforces against
// hostile input, which must not be fed to Argo CD's unguarded decoder.
func hostile(err error) bool {
	for _, kind := range []error{manifest.ErrAliasExpansion, manifest.ErrTooDeep, manifest.ErrTooLarge, manifest.ErrTooManyDocuments} {
		if errors.Is(err, kind) {
			return true
		}
	}
	return false
}

// readLimited reads at most limit bytes of the file, failing beyond.
func readLimited(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("file grew beyond the %d-byte limit (MaxFileBytes) while being read: %w", limit, manifest.ErrTooLarge)
	}
	return data, nil
}
