package flux

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/truce-dev/truce/render"
)

// CopyRule is one copy operation of an ArtifactGenerator's artifact
// (spec.artifacts[].copy[]).
type CopyRule struct {
	// From is "@alias/pattern": a path or an fs.Glob pattern in the source
	// with that alias.
	From string
	// To is "@artifact/path"; a trailing slash makes it a directory.
	To string
	// Exclude holds glob patterns ("**" spans directories) of paths to
	// leave out, matched against the source path, the path below the
	// pattern's literal prefix, and (when they have no slash) file names.
	Exclude []string
	// Strategy is Overwrite (the default) or Merge: a YAML file that
	// already exists in the artifact is deep-merged with the copied one.
	// Extract (unpacking tarballs) is not supported.
	Strategy string
	// Optional makes a source that matches nothing no error.
	Optional bool
}

// Copy strategies of source-watcher's ArtifactGenerator.
const (
	StrategyOverwrite = "Overwrite"
	StrategyMerge     = "Merge"
	StrategyExtract   = "Extract"
)

// ArtifactCopy lays out an artifact in dst the way source-watcher's
// ArtifactGenerator copies files from its sources, with cp-like rules:
// rules apply in order, later ones overwriting (or, with Merge, merging
// into) earlier files. srcRoots maps each source alias to its directory.
// A path without glob characters is copied as itself: a directory as
// dst/To/<dirname>, a file to To (or into it when To ends in "/" or is an
// existing directory). A glob is expanded with fs.Glob (so "**" matches
// one level, like "*"); a match is copied to To plus its path, except that
// for "dir/**" the "dir/" prefix is dropped. Both sides are opened with
// os.Root, so nothing outside a source or dst is read or written.
func ArtifactCopy(srcRoots map[string]string, rules []CopyRule, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("creating the artifact directory: %w", err)
	}
	out, err := os.OpenRoot(dst)
	if err != nil {
		return fmt.Errorf("opening the artifact directory: %w", err)
	}
	defer out.Close()
	for _, r := range rules {
		if err := copyRule(srcRoots, r, out); err != nil {
			return fmt.Errorf("copying from '%s' to '%s': %w", r.From, r.To, err)
		}
	}
	return nil
}

func copyRule(srcRoots map[string]string, r CopyRule, out *os.Root) error {
	switch r.Strategy {
	case "", StrategyOverwrite, StrategyMerge:
	case StrategyExtract:
		return &render.Unpredictable{Subject: "ArtifactGenerator copy from " + r.From,
			Reason: "the Extract strategy (unpacking tarballs) is not supported by truce"}
	default:
		return fmt.Errorf("unknown strategy %q (want Overwrite, Merge or Extract)", r.Strategy)
	}
	alias, pattern, ok := strings.Cut(strings.TrimPrefix(r.From, "@"), "/")
	if !strings.HasPrefix(r.From, "@") || !ok || alias == "" || pattern == "" {
		return errors.New("the source must have the form '@alias/pattern'")
	}
	dest, ok := strings.CutPrefix(r.To, "@artifact/")
	if !ok {
		return errors.New("the destination must start with '@artifact/'")
	}
	if dest == "" {
		dest = "."
	}
	if !filepath.IsLocal(dest) || strings.Contains("/"+filepath.ToSlash(dest)+"/", "/../") {
		return errors.New("the destination must stay within the artifact")
	}
	for _, p := range r.Exclude {
		if err := validGlob(p); err != nil {
			return fmt.Errorf("invalid exclude pattern '%s': %w", p, err)
		}
	}
	dir, ok := srcRoots[alias]
	if !ok {
		return fmt.Errorf("source alias '%s' not found", alias)
	}
	src, err := os.OpenRoot(dir)
	if err != nil {
		return fmt.Errorf("opening source '%s': %w", alias, err)
	}
	defer src.Close()
	c := copier{rule: r, src: src, out: out}

	if !strings.ContainsAny(pattern, "*?[]") {
		return c.single(filepath.Clean(pattern), dest, strings.HasSuffix(r.To, "/"))
	}
	matches, err := fs.Glob(src.FS(), pattern)
	if err != nil {
		return fmt.Errorf("invalid glob pattern '%s': %w", pattern, err)
	}
	base := literalPrefix(pattern)
	var kept []string
	for _, m := range matches {
		if m != "." && m != ".." && !excluded(m, base, r.Exclude) {
			kept = append(kept, m)
		}
	}
	if len(kept) == 0 {
		if r.Optional {
			return nil
		}
		if len(matches) == 0 {
			return fmt.Errorf("no files match pattern '%s' in source '%s'", pattern, alias)
		}
		return fmt.Errorf("all files matching pattern '%s' in source '%s' were excluded", pattern, alias)
	}
	for _, m := range kept {
		to := filepath.Join(dest, m)
		if prefix, ok := strings.CutSuffix(pattern, "/**"); ok {
			if rest, ok := strings.CutPrefix(m, prefix+"/"); ok {
				to = filepath.Join(dest, rest)
			}
		}
		if err := c.copy(m, to, base); err != nil {
			return fmt.Errorf("copying '%s' to '%s': %w", m, to, err)
		}
	}
	return nil
}

// copier copies within one rule.
type copier struct {
	rule CopyRule
	src  *os.Root
	out  *os.Root
}

// single copies a path without glob characters, like cp -r.
func (c copier) single(p, dest string, destIsDir bool) error {
	info, err := c.src.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		if c.rule.Optional {
			return nil
		}
		return fmt.Errorf("source '%s' does not exist", p)
	}
	if err != nil {
		return err
	}
	if info.IsDir() {
		return c.copy(p, filepath.Join(dest, filepath.Base(p)), p)
	}
	if excluded(p, ".", c.rule.Exclude) {
		return nil
	}
	if !destIsDir {
		if d, err := c.out.Stat(dest); err == nil && d.IsDir() {
			destIsDir = true
		}
	}
	if destIsDir {
		dest = filepath.Join(dest, filepath.Base(p))
	}
	return c.copy(p, dest, ".")
}

// copy copies the file or directory p to dest, leaving out what the rule
// excludes below it.
func (c copier) copy(p, dest, base string) error {
	info, err := c.src.Stat(p)
	if err != nil {
		return err
	}
	if !info.IsDir() {
		return c.file(p, dest)
	}
	return fs.WalkDir(c.src.FS(), p, func(q string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(p, q)
		if err != nil {
			return err
		}
		if rel == "." {
			return c.out.MkdirAll(dest, 0o755)
		}
		if excluded(q, base, c.rule.Exclude) {
			if d.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return c.out.MkdirAll(filepath.Join(dest, rel), 0o755)
		}
		return c.file(q, filepath.Join(dest, rel))
	})
}

// file copies one file, or merges it into an existing one under Merge.
func (c copier) file(p, dest string) error {
	if c.rule.Strategy == StrategyMerge {
		if _, err := c.out.Stat(dest); err == nil {
			return mergeYAMLFile(c.src, p, c.out, dest)
		}
	}
	if dir := filepath.Dir(dest); dir != "." {
		if err := c.out.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	data, err := c.src.ReadFile(p)
	if err != nil {
		return err
	}
	info, err := c.src.Stat(p)
	if err != nil {
		return err
	}
	return c.out.WriteFile(dest, data, info.Mode().Perm())
}

// literalPrefix is the part of a pattern before its first glob segment,
// which excludes are also matched relative to.
func literalPrefix(pattern string) string {
	var parts []string
	for _, part := range strings.Split(path.Clean(pattern), "/") {
		if strings.ContainsAny(part, "*?[]") {
			break
		}
		parts = append(parts, part)
	}
	if len(parts) == 0 {
		return "."
	}
	return path.Join(parts...)
}

// excluded reports whether p (relative to the source) matches one of the
// exclude patterns, directly, relative to base, or by file name for a
// pattern without a slash.
func excluded(p, base string, patterns []string) bool {
	if len(patterns) == 0 {
		return false
	}
	p = filepath.ToSlash(p)
	candidates := []string{p}
	if base != "." && base != "" {
		if rel, ok := strings.CutPrefix(p, base+"/"); ok {
			candidates = append(candidates, rel)
		}
	}
	for _, pat := range patterns {
		for _, cand := range candidates {
			if matchGlob(pat, cand) {
				return true
			}
		}
		if !strings.Contains(pat, "/") && matchGlob(pat, path.Base(p)) {
			return true
		}
	}
	return false
}
