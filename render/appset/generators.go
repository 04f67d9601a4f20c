package appset

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"
)

// listGenerator is spec.generators[].list.
type listGenerator struct {
	Elements     []json.RawMessage `json:"elements"`
	ElementsYaml string            `json:"elementsYaml"`
	Template     map[string]any    `json:"template"`
}

// gitGenerator is spec.generators[].git. requeueAfterSeconds only says
// when Argo CD looks again.
type gitGenerator struct {
	RepoURL         string            `json:"repoURL"`
	Revision        string            `json:"revision"`
	Directories     []gitItem         `json:"directories"`
	Files           []gitItem         `json:"files"`
	Values          map[string]string `json:"values"`
	PathParamPrefix string            `json:"pathParamPrefix"`
	Template        map[string]any    `json:"template"`
}

type gitItem struct {
	Path    string `json:"path"`
	Exclude bool   `json:"exclude"`
}

// listParams mirrors ListGenerator.GenerateParams: with fasttemplate,
// every element value must be a string (values: a map of strings, as
// values.KEY); elementsYaml's elements are taken as they are.
func (e *engine) listParams(g listGenerator) ([]map[string]any, error) {
	out := make([]map[string]any, len(g.Elements))
	for i, raw := range g.Elements {
		var element map[string]any
		if err := json.Unmarshal(raw, &element); err != nil {
			return nil, fmt.Errorf("list generator: element %d: %w", i, err)
		}
		if e.goTemplate {
			out[i] = element
			continue
		}
		for key, value := range element {
			if out[i] == nil {
				out[i] = map[string]any{}
			}
			if key == "values" {
				values, ok := value.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("list generator: element %d: values is no map", i)
				}
				for k, v := range values {
					s, ok := v.(string)
					if !ok {
						return nil, fmt.Errorf("list generator: element %d: values.%s is no string (fasttemplate takes strings only; quote it or set goTemplate)", i, k)
					}
					out[i]["values."+k] = s
				}
				continue
			}
			s, ok := value.(string)
			if !ok {
				return nil, fmt.Errorf("list generator: element %d: %s is no string (fasttemplate takes strings only; quote it or set goTemplate)", i, key)
			}
			out[i][key] = s
		}
	}
	if g.ElementsYaml != "" {
		var more []map[string]any
		if err := yaml.Unmarshal([]byte(g.ElementsYaml), &more); err != nil {
			return nil, fmt.Errorf("list generator: elementsYaml: %w", err)
		}
		out = append(out, more...)
	}
	return out, nil
}

// gitParams mirrors GitGenerator.GenerateParams, reading the repository
// from dir.
func (x *expander) gitParams(ctx context.Context, g gitGenerator) ([]map[string]any, error) {
	if len(g.Directories) == 0 && len(g.Files) == 0 {
		return nil, errors.New("git generator: neither directories nor files")
	}
	dir, err := x.opts.Repository(ctx, g.RepoURL, g.Revision)
	if err != nil {
		return nil, err
	}
	if len(g.Directories) != 0 {
		dirs, err := directories(dir, x.opts.MaxEntries)
		if err != nil {
			return nil, fmt.Errorf("git generator: %w", err)
		}
		return x.directoryParams(g, filterDirectories(g.Directories, dirs))
	}
	return x.fileParams(g, dir)
}

// directories lists the directories of the repository at dir, relative
// and slash-separated, hidden ones (and what is under them) left out, as
// the repo-server's GetGitDirectories does.
func directories(dir string, maxEntries int) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		if p != dir && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil || rel == "." {
			return err
		}
		if len(out) >= maxEntries {
			return fmt.Errorf("more than %d directories in the repository", maxEntries)
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	return out, err
}

// filterDirectories keeps the directories some item matches and no
// exclude item matches (GitGenerator.filterApps); a bad pattern matches
// nothing.
func filterDirectories(items []gitItem, dirs []string) []string {
	var out []string
	for _, d := range dirs {
		include, exclude := false, false
		for _, it := range items {
			if ok, err := path.Match(it.Path, d); err == nil && ok {
				if it.Exclude {
					exclude = true
				} else {
					include = true
				}
			}
		}
		if include && !exclude {
			out = append(out, d)
		}
	}
	return out
}

// directoryParams mirrors GitGenerator.generateParamsFromApps.
func (x *expander) directoryParams(g gitGenerator, dirs []string) ([]map[string]any, error) {
	out := make([]map[string]any, len(dirs))
	for i, d := range dirs {
		params := map[string]any{}
		if x.goTemplate {
			p := map[string]any{
				"path":               d,
				"basename":           path.Base(d),
				"basenameNormalized": SanitizeName(path.Base(d)),
				"segments":           strings.Split(d, "/"),
			}
			setGoPath(params, g.PathParamPrefix, p)
		} else {
			name := flatPathName(g.PathParamPrefix)
			params[name] = d
			params[name+".basename"] = path.Base(d)
			params[name+".basenameNormalized"] = SanitizeName(path.Base(d))
			setSegments(params, name, d)
		}
		if err := x.appendValues(g.Values, params); err != nil {
			return nil, err
		}
		out[i] = params
	}
	return out, nil
}

// fileParams mirrors GitGenerator.generateParamsForGitFiles: the files
// the include items match less those the exclude items match, in path
// order.
func (x *expander) fileParams(g gitGenerator, dir string) ([]map[string]any, error) {
	all, err := files(dir, x.opts.MaxEntries)
	if err != nil {
		return nil, fmt.Errorf("git generator: %w", err)
	}
	chosen := map[string]bool{}
	for _, it := range g.Files {
		if !it.Exclude {
			for _, f := range all {
				if pathspecMatch(it.Path, f) {
					chosen[f] = true
				}
			}
		}
	}
	for _, it := range g.Files {
		if it.Exclude {
			for f := range chosen {
				if pathspecMatch(it.Path, f) {
					delete(chosen, f)
				}
			}
		}
	}
	names := make([]string, 0, len(chosen))
	for f := range chosen {
		names = append(names, f)
	}
	sort.Strings(names)
	var out []map[string]any
	for _, f := range names {
		content, err := x.readFile(dir, f)
		if err != nil {
			return nil, fmt.Errorf("git generator: %w", err)
		}
		got, err := x.paramsFromFile(f, content, g)
		if err != nil {
			return nil, fmt.Errorf("unable to process file '%s' from repository '%s': %w", f, g.RepoURL, err)
		}
		out = append(out, got...)
		if len(out) > x.opts.MaxApplications {
			return nil, fmt.Errorf("git generator: more than %d parameter sets", x.opts.MaxApplications)
		}
	}
	return out, nil
}

// readFile reads the file rel of the repository at dir, refusing a
// symbolic link that leaves it and keeping the size bounds.
func (x *expander) readFile(dir, rel string) ([]byte, error) {
	name := filepath.Join(dir, filepath.FromSlash(rel))
	real, err := filepath.EvalSymlinks(name)
	if err != nil {
		return nil, err
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return nil, err
	}
	if r, err := filepath.Rel(root, real); err != nil || r == ".." || strings.HasPrefix(r, ".."+string(filepath.Separator)) {
		return nil, fmt.Errorf("%s links outside the repository", rel)
	}
	info, err := os.Stat(real)
	if err != nil {
		return nil, err
	}
	if info.Size() > x.opts.MaxFileBytes {
		return nil, fmt.Errorf("%s is %d bytes, more than the limit of %d", rel, info.Size(), x.opts.MaxFileBytes)
	}
	if x.read += info.Size(); x.read > x.opts.MaxTotalBytes {
		return nil, fmt.Errorf("the git files generators read more than %d bytes", x.opts.MaxTotalBytes)
	}
	return os.ReadFile(real)
}

// files lists the files of the repository at dir (.git left out),
// relative and slash-separated, as git ls-files names them.
func files(dir string, maxEntries int) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == ".git" && p != dir {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		if len(out) >= maxEntries {
			return fmt.Errorf("more than %d files in the repository", maxEntries)
		}
		out = append(out, filepath.ToSlash(rel))
		return nil
	})
	return out, err
}

// paramsFromFile mirrors GitGenerator.generateParamsFromGitFile: a file
// holds one object (an empty file: an empty one) or a list of them.
// Numbers are read as JSON reads them, so fasttemplate sees 1e+06 for a
// million, as Argo CD does.
func (x *expander) paramsFromFile(name string, content []byte, g gitGenerator) ([]map[string]any, error) {
	var objects []map[string]any
	single := map[string]any{}
	if err := yaml.Unmarshal(content, &single); err == nil {
		objects = append(objects, single)
	} else if err := yaml.Unmarshal(content, &objects); err != nil {
		return nil, fmt.Errorf("unable to parse file: %w", err)
	}
	dir := path.Dir(name)
	var out []map[string]any
	for _, obj := range objects {
		params := map[string]any{}
		if x.goTemplate {
			for k, v := range obj {
				params[k] = v
			}
			p := map[string]any{
				"path":               dir,
				"basename":           path.Base(dir),
				"filename":           path.Base(name),
				"basenameNormalized": SanitizeName(path.Base(dir)),
				"filenameNormalized": SanitizeName(path.Base(name)),
				"segments":           strings.Split(dir, "/"),
			}
			setGoPath(params, g.PathParamPrefix, p)
		} else {
			for k, v := range flatten(obj) {
				params[k] = fmt.Sprintf("%v", v)
			}
			pn := flatPathName(g.PathParamPrefix)
			params[pn] = dir
			params[pn+".basename"] = path.Base(dir)
			params[pn+".filename"] = path.Base(name)
			params[pn+".basenameNormalized"] = SanitizeName(path.Base(dir))
			params[pn+".filenameNormalized"] = SanitizeName(path.Base(name))
			setSegments(params, pn, dir)
		}
		if err := x.appendValues(g.Values, params); err != nil {
			return nil, err
		}
		out = append(out, params)
	}
	return out, nil
}

func setGoPath(params map[string]any, prefix string, p map[string]any) {
	if prefix != "" {
		params[prefix] = map[string]any{"path": p}
		return
	}
	params["path"] = p
}

func flatPathName(prefix string) string {
	if prefix != "" {
		return prefix + ".path"
	}
	return "path"
}

// setSegments sets name[N] for each non-empty segment N of p.
func setSegments(params map[string]any, name, p string) {
	for i, s := range strings.Split(p, "/") {
		if s != "" {
			params[name+"["+strconv.Itoa(i)+"]"] = s
		}
	}
}

// appendValues mirrors appendTemplatedValues: each value is templated
// with the parameters so far, then set as values.KEY (fasttemplate) or
// in the map values (goTemplate, replacing any values parameter).
func (x *expander) appendValues(values map[string]string, params map[string]any) error {
	if len(values) == 0 {
		return nil
	}
	got := map[string]string{}
	for k, v := range values {
		s, err := x.replace(v, params)
		if err != nil {
			return fmt.Errorf("failed to replace templated string: %w", err)
		}
		got[k] = s
	}
	if x.goTemplate {
		params["values"] = got
		return nil
	}
	for k, v := range got {
		params["values."+k] = v
	}
	return nil
}

// flatten joins nested keys with dots and list indexes as keys, leaving
// out empty maps and lists, as github.com/jeremywohl/flatten's DotStyle
// does for Argo CD.
func flatten(in map[string]any) map[string]any {
	out := map[string]any{}
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(join(prefix, k), x)
			}
		case []any:
			for i, x := range v {
				walk(join(prefix, strconv.Itoa(i)), x)
			}
		default:
			out[prefix] = v
		}
	}
	for k, v := range in {
		walk(k, v)
	}
	return out
}

func join(prefix, k string) string { return prefix + "." + k }
