package fix

import (
	"reflect"
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

// TestSharedFilesMatchFresh proposes fixes for several problems of the
// same files through one Files, which parses each file once, and compares
// every candidate with those of Candidates parsing afresh: a clone that
// shared what an edit changes (document offsets after an edit that
// changes a line's length), or a parse kept after the file changed, gives
// other files.
func TestSharedFilesMatchFresh(t *testing.T) {
	api := strings.NewReplacer("web", "api", "storefront", "backend").Replace(web)
	files := map[string]string{"app/web.yaml": web + "---\n" + api, "argocd/app.yaml": app, "cluster/policy.yaml": policy}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errNotExist
	}
	apiLine := strings.Count(web, "\n") + 2
	shared := NewFiles(read)
	// kept is the content the candidates of the last step were made from:
	// while the file does not change, every candidate shares that one copy
	// (a check keeps every candidate's Before until its report).
	var kept []byte
	for i, step := range []struct {
		name string
		line int
		edit func()
	}{
		{"web", 1, nil},
		{"api", apiLine, nil},
		{"web", 1, nil},
		{"api", apiLine, func() { files["app/web.yaml"] = "# moved\n" + files["app/web.yaml"] }},
		{"web", 2, nil},
	} {
		if step.edit != nil {
			step.edit()
		}
		if step.name == "api" && step.edit != nil {
			step.line++
		}
		p := imageLoop(t, step.name, step.line)
		want, wantSkipped := Candidates(p, read)
		got, gotSkipped := CandidatesFrom(p, shared)
		if len(want) == 0 || len(want[0].Files) == 0 {
			t.Fatalf("step %d: no candidates to compare (skipped %v)", i, wantSkipped)
		}
		if !reflect.DeepEqual(got, want) || !reflect.DeepEqual(gotSkipped, wantSkipped) {
			for j := range min(len(got), len(want)) {
				for path := range want[j].Files {
					if string(got[j].Files[path]) != string(want[j].Files[path]) {
						t.Errorf("step %d, %s, %s:\ngot:\n%s\nwant:\n%s", i, want[j].Kind, path, got[j].Files[path], want[j].Files[path])
					}
				}
			}
			t.Fatalf("step %d (%s): candidates differ from a fresh parse (%d vs %d; skipped %v vs %v)", i, step.name, len(got), len(want), gotSkipped, wantSkipped)
		}
		for _, c := range got {
			before := c.Before["app/web.yaml"]
			if len(before) == 0 {
				continue
			}
			if kept != nil && step.edit == nil && &before[0] != &kept[0] {
				t.Errorf("step %d (%s): %s holds its own copy of the unchanged file", i, step.name, c.Kind)
			}
			kept = before
		}
	}
}

// TestSnapshotReadsOnce checks that NewSnapshot reads each file the first
// time only: later candidates are edits of that content, even when the
// file changed since, and share its one copy.
func TestSnapshotReadsOnce(t *testing.T) {
	files := map[string]string{"app/web.yaml": web, "argocd/app.yaml": app, "cluster/policy.yaml": policy}
	reads := map[string]int{}
	read := func(p string) ([]byte, error) {
		reads[p]++
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errNotExist
	}
	p := imageLoop(t, "web", 1)
	want, _ := Candidates(p, read)
	if len(want) == 0 {
		t.Fatal("no candidates")
	}
	clear(reads)
	snap := NewSnapshot(read)
	first, _ := CandidatesFrom(p, snap)
	files["app/web.yaml"] = "# edited meanwhile\n" + web
	second, _ := CandidatesFrom(p, snap)
	if !reflect.DeepEqual(first, want) || !reflect.DeepEqual(second, want) {
		t.Fatal("a snapshot's candidates differ from those of the content it read first")
	}
	if reads["app/web.yaml"] != 1 {
		t.Errorf("app/web.yaml read %d times, want once", reads["app/web.yaml"])
	}
	if a, b := first[0].Before["app/web.yaml"], second[0].Before["app/web.yaml"]; &a[0] != &b[0] {
		t.Error("the candidates hold copies of the file instead of sharing the one read")
	}
}

// imageLoop is the problem of Deployment shop/name, at line of
// app/web.yaml, whose image Argo CD and MutatingAdmissionPolicy mirror
// write in turn.
func imageLoop(t testing.TB, name string, line int) Problem {
	t.Helper()
	ref := cluster.Ref{Namespace: "shop", Name: name}
	ref.Group, ref.Version, ref.Kind = "apps", "v1", "Deployment"
	const ptr = "/spec/template/spec/containers/0/image"
	o := &simulate.Object{Ref: ref, InGit: true, Verdict: simulate.Loop,
		Loop: &simulate.LoopInfo{Fields: []string{ptr}, Other: "MutatingAdmissionPolicy/mirror (binding mirror)", OtherKind: "admission",
			OtherStep: &admission.Step{Kind: admission.PolicyStep, Name: "mirror", Binding: "mirror"}},
		Drift: &drift.Object{Fields: []drift.Field{{Pointer: ptr, Desired: "nginx:1.27", Live: "registry.internal/nginx:1.27"}},
			Desired: map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
				"containers": []any{map[string]any{"name": "nginx", "image": "nginx:1.27"}}}}}}}}
	return Problem{Tool: "argocd", Object: o, Source: manifest.Source{File: "app/web.yaml", Line: line},
		App:       &gitops.ArgoApplication{Name: "shop", Source: manifest.Source{File: "argocd/app.yaml", Line: 1}},
		Admission: objectsOf(t, "cluster/policy.yaml", policy)}
}
