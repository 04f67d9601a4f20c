package check

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/gatekeeper"
	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/internal/benchrepo"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

// realisticRepositories are the directories of examples/ and a small
// benchmark repository (internal/benchrepo), each read as `truce check
// DIR` reads it, with the Gatekeeper engine where it is used (Kyverno's
// helper is not built for these tests: the Kyverno examples run without
// it).
func realisticRepositories(t *testing.T) map[string]string {
	t.Helper()
	dirs := map[string]string{}
	entries, err := os.ReadDir(filepath.Join("..", "examples"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() {
			dirs[e.Name()] = filepath.Join("..", "examples", e.Name())
		}
	}
	bench := t.TempDir()
	if err := benchrepo.Write(bench, 150); err != nil {
		t.Fatal(err)
	}
	dirs["bench"] = bench
	return dirs
}

// prepared is Prepare of in and the repository's setups.
func prepared(t *testing.T, in Input, opts Options) (*Repository, []*simulate.Setup) {
	t.Helper()
	r, err := Prepare(context.Background(), in, opts, nil)
	if err != nil {
		t.Fatal(err)
	}
	setups, err := r.Setups()
	if err != nil {
		t.Fatal(err)
	}
	return r, setups
}

func loadRealistic(t *testing.T, dir string) (Input, Options) {
	t.Helper()
	objs, err := manifest.LoadPaths(context.Background(), []string{dir}, manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	var opts Options
	for _, o := range objs {
		if o.Object != nil && gatekeeper.Reads(o.Object.GroupVersionKind().Group) {
			e, err := gatekeeper.New()
			if err != nil {
				t.Fatal(err)
			}
			opts.Admission = admission.Options{Engines: []admission.PolicyEngine{e}}
			break
		}
	}
	return Input{Repository: objs}, opts
}

// preparedView is what Prepare derives, empty slices as nil.
func preparedView(r *Repository) map[string]any {
	nilIfEmpty := func(v any) any {
		rv := reflect.ValueOf(v)
		if rv.Kind() == reflect.Slice && rv.Len() == 0 {
			return nil
		}
		return v
	}
	return map[string]any{
		"Desired":    nilIfEmpty(r.Desired),
		"Base":       nilIfEmpty(r.Base),
		"Settings":   r.Settings,
		"writers":    nilIfEmpty(r.writers),
		"detect":     r.detect,
		"Findings":   nilIfEmpty(r.Findings),
		"units":      nilIfEmpty(r.units),
		"background": nilIfEmpty(r.background),
		"Unknown":    nilIfEmpty(r.Unknown),
		"repoBase":   r.repoBase,
	}
}

// For every candidate fix of realistic repositories, the repository
// prepareReplaced derives from the checked one is the one Prepare makes of
// the candidate's input, and so is the verdict of the fix; every
// candidate of the benchmark's repository takes that way.
func TestPrepareReplacedMatchesPrepare(t *testing.T) {
	for name, dir := range realisticRepositories(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			in, opts := loadRealistic(t, dir)
			load := NewLoader(Sources{Repository: []string{dir}}, in)
			r, setups := prepared(t, in, opts)
			results, err := r.simulateAll(ctx, setups, opts)
			if err != nil {
				t.Fatal(err)
			}
			files := fix.NewFiles(nil)
			var candidates, replaced int
			for i, s := range setups {
				for _, o := range results[i].Objects {
					if !o.Verdict.Problem() {
						continue
					}
					cands, _ := fix.CandidatesFrom(r.problemOf(s, o), files)
					for _, c := range cands {
						candidates++
						what := fmt.Sprintf("%s %s %s: %s", s.Tool, s.Unit, o.Ref, c.Kind)
						in2, err := load(ctx, c.Files)
						if err != nil {
							t.Logf("%s: %v", what, err)
							continue
						}
						full, err := Prepare(ctx, in2, opts, r.scopes)
						if err != nil {
							t.Logf("%s: %v", what, err)
							continue
						}
						got, ok := r.prepareReplaced(in2, opts)
						if !ok {
							continue
						}
						replaced++
						want := preparedView(full)
						for k, v := range preparedView(got) {
							if !reflect.DeepEqual(v, want[k]) {
								t.Errorf("%s: %s\n%+v\nPrepare: %+v", what, k, v, want[k])
							}
						}
						if c.FromLive {
							continue
						}
						vFull, errFull := full.verdictFor(ctx, s, o, opts)
						vGot, errGot := got.verdictFor(ctx, s, o, opts)
						if vFull != vGot || fmt.Sprint(errFull) != fmt.Sprint(errGot) {
							t.Errorf("%s: verdict %q (%v), Prepare's %q (%v)", what, vGot, errGot, vFull, errFull)
						}
					}
				}
			}
			t.Logf("%d of %d candidates prepared from the checked repository", replaced, candidates)
			if name == "bench" && (candidates == 0 || replaced != candidates) {
				t.Errorf("%d of %d candidates of the benchmark's repository prepared from the checked one, want all", replaced, candidates)
			}
		})
	}
}

// Nothing a check does changes an object it is given: the checked
// input's, or those its loader shares between the candidates' inputs
// (manifest.NewSharedMemo, replaceFiles), which verifications read
// concurrently.
func TestCandidatesLeaveObjects(t *testing.T) {
	for name, dir := range realisticRepositories(t) {
		if name != "bench" && name != "image-mirror" && name != "hpa-flux" {
			continue
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			in, opts := loadRealistic(t, dir)
			opts.Workers = 2
			type snapshot struct {
				live []manifest.Object
				was  []manifest.Object
			}
			var (
				mu    sync.Mutex
				snaps []snapshot
			)
			keep := func(objs []manifest.Object) {
				was := make([]manifest.Object, len(objs))
				for i, o := range objs {
					was[i] = o
					was[i].Object = o.Object.DeepCopy()
					was[i].Raw = bytes.Clone(o.Raw)
				}
				mu.Lock()
				snaps = append(snaps, snapshot{objs, was})
				mu.Unlock()
			}
			keep(in.Repository)
			inner := NewLoader(Sources{Repository: []string{dir}}, in)
			load := func(ctx context.Context, overlay map[string][]byte) (Input, error) {
				got, err := inner(ctx, overlay)
				keep(got.Repository)
				return got, err
			}
			out, err := Check(ctx, in, opts, load, nil)
			if err != nil {
				t.Fatal(err)
			}
			if len(out.Problems) == 0 {
				t.Fatal("no problems: nothing verified")
			}
			for _, s := range snaps {
				for i, o := range s.live {
					if !reflect.DeepEqual(o.Object, s.was[i].Object) || !bytes.Equal(o.Raw, s.was[i].Raw) {
						t.Fatalf("%s changed:\n%v\nwas\n%v", o.Source, o.Object, s.was[i].Object)
					}
				}
			}
		})
	}
}

// A compacted candidate writes the same files and shows the same report
// edits as before, for every candidate of realistic repositories.
func TestCompactKeepsReport(t *testing.T) {
	for name, dir := range realisticRepositories(t) {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			in, opts := loadRealistic(t, dir)
			r, setups := prepared(t, in, opts)
			results, err := r.simulateAll(ctx, setups, opts)
			if err != nil {
				t.Fatal(err)
			}
			files := fix.NewFiles(nil)
			for i, s := range setups {
				for _, o := range results[i].Objects {
					if !o.Verdict.Problem() {
						continue
					}
					cands, _ := fix.CandidatesFrom(r.problemOf(s, o), files)
					for _, c := range cands {
						want := reportFix(c, simulate.Synced)
						contents := map[string][]byte{}
						for p, data := range c.Files {
							contents[p] = data
						}
						c.Compact()
						if c.Files != nil {
							t.Errorf("%s: files kept after Compact", c.Kind)
						}
						if got := reportFix(c, simulate.Synced); !reflect.DeepEqual(got, want) {
							t.Errorf("%s: report after Compact\n%+v\nbefore\n%+v", c.Kind, got, want)
						}
						for p, data := range contents {
							if got := c.Content(p); !bytes.Equal(got, data) {
								t.Errorf("%s: %s after Compact:\n%s\nwant\n%s", c.Kind, p, got, data)
							}
						}
					}
				}
			}
		})
	}
}

// prepareReplaced reuses what Prepare made of the manifests a fix leaves
// as they were in the file it edits, also when the edit moves them, and
// gives what Prepare gives; a settings manifest the edit moves makes it
// prepare afresh, since the settings quote its place.
func TestPrepareReplacedReusesUnchanged(t *testing.T) {
	const (
		ns  = "apiVersion: v1\nkind: Namespace\nmetadata: {name: shop}\n"
		cmA = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\ndata: {k: v}\n"
		cmB = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"
		app = "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: shop, namespace: argocd}\n" +
			"spec: {destination: {namespace: shop, server: https://kubernetes.default.svc}, syncPolicy: {automated: {selfHeal: true}}}\n"
		web       = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web, namespace: shop}\n"
		webEdited = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  namespace: shop\n  labels: {fixed: \"true\"}\n"
	)
	join := func(docs ...string) string { return strings.Join(docs, "---\n") }
	for _, tc := range []struct {
		name          string
		before, after string
		prepared      bool
		reused        []string // desired objects that must be the checked repository's
	}{{
		name:     "edit moves the manifests below it",
		before:   join(ns, web, cmA, cmB),
		after:    join(ns, webEdited, cmA, cmB),
		prepared: true,
		reused:   []string{"shop", "a", "b"},
	}, {
		name:     "settings above the edit",
		before:   join(app, ns, cmA, web),
		after:    join(app, ns, cmA, webEdited),
		prepared: true,
		reused:   []string{"shop", "a"},
	}, {
		name:   "settings moved by the edit",
		before: join(web, app, cmA),
		after:  join(webEdited, app, cmA),
	}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			file := filepath.Join(dir, "all.yaml")
			if err := os.WriteFile(file, []byte(tc.before), 0o644); err != nil {
				t.Fatal(err)
			}
			in, opts := loadRealistic(t, dir)
			r, err := Prepare(ctx, in, opts, nil)
			if err != nil {
				t.Fatal(err)
			}
			in2, err := NewLoader(Sources{Repository: []string{dir}}, in)(ctx, map[string][]byte{file: []byte(tc.after)})
			if err != nil {
				t.Fatal(err)
			}
			got, ok := r.prepareReplaced(in2, opts)
			if ok != tc.prepared {
				t.Fatalf("prepared from the checked repository: %v, want %v", ok, tc.prepared)
			}
			if !ok {
				return
			}
			full, err := Prepare(ctx, in2, opts, r.scopes)
			if err != nil {
				t.Fatal(err)
			}
			want := preparedView(full)
			for k, v := range preparedView(got) {
				if !reflect.DeepEqual(v, want[k]) {
					t.Errorf("%s\n%+v\nPrepare: %+v", k, v, want[k])
				}
			}
			was := map[string]*unstructured.Unstructured{}
			for _, d := range r.Desired {
				was[d.Object.GetName()] = d.Object
			}
			for _, name := range tc.reused {
				found := false
				for _, d := range got.Desired {
					if d.Object.GetName() == name && d.Object.GetKind() != "Application" {
						found = true
						if d.Object != was[name] {
							t.Errorf("%s decoded again, not reused", name)
						}
					}
				}
				if !found {
					t.Errorf("%s is not desired", name)
				}
			}
		})
	}
}
