package report

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/truce-dev/truce/report/sarif"
)

// compareFormatGolden compares got with testdata/name; with
// TRUCE_UPDATE_GOLDEN=1 in the environment it rewrites the file instead.
func compareFormatGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if os.Getenv("TRUCE_UPDATE_GOLDEN") == "1" {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with TRUCE_UPDATE_GOLDEN=1 to create it)", err)
	}
	if !bytes.Equal(got, want) {
		gl, wl := strings.Split(string(got), "\n"), strings.Split(string(want), "\n")
		for i := 0; i < max(len(gl), len(wl)); i++ {
			var g, w string
			if i < len(gl) {
				g = gl[i]
			}
			if i < len(wl) {
				w = wl[i]
			}
			if g != w {
				t.Fatalf("%s differs from the output at line %d:\n got: %s\nwant: %s\n(TRUCE_UPDATE_GOLDEN=1 rewrites it)", path, i+1, g, w)
			}
		}
	}
}

func TestSARIFGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteSARIF(&buf, sampleCheckReport(), "v0.4.0"); err != nil {
		t.Fatal(err)
	}
	compareFormatGolden(t, "check.sarif", buf.Bytes())

	// Deterministic: the same report, and the runs' objects in another
	// order, give the same bytes.
	r := sampleCheckReport()
	objs := r.Runs[0].Objects
	for i, j := 0, len(objs)-1; i < j; i, j = i+1, j-1 {
		objs[i], objs[j] = objs[j], objs[i]
	}
	var again bytes.Buffer
	if err := WriteSARIF(&again, r, "v0.4.0"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), again.Bytes()) {
		t.Error("SARIF output depends on the order of objects")
	}
}

// sarifDoc is the part of SARIF 2.1.0 the test checks, with the schema's
// required properties.
type sarifDoc struct {
	Schema  *string `json:"$schema"`
	Version *string `json:"version"`
	Runs    []struct {
		Tool *struct {
			Driver *struct {
				Name    *string `json:"name"`
				Version string  `json:"version"`
				Rules   []struct {
					ID               *string `json:"id"`
					Name             string  `json:"name"`
					ShortDescription *struct {
						Text *string `json:"text"`
					} `json:"shortDescription"`
					FullDescription *struct {
						Text *string `json:"text"`
					} `json:"fullDescription"`
					HelpURI              string `json:"helpUri"`
					DefaultConfiguration struct {
						Level string `json:"level"`
					} `json:"defaultConfiguration"`
				} `json:"rules"`
			} `json:"driver"`
		} `json:"tool"`
		Results *[]struct {
			RuleID    string `json:"ruleId"`
			RuleIndex *int   `json:"ruleIndex"`
			Level     string `json:"level"`
			Message   *struct {
				Text *string `json:"text"`
			} `json:"message"`
			Locations []struct {
				PhysicalLocation *struct {
					ArtifactLocation struct {
						URI string `json:"uri"`
					} `json:"artifactLocation"`
					Region *struct {
						StartLine int `json:"startLine"`
					} `json:"region"`
				} `json:"physicalLocation"`
				LogicalLocations []struct {
					Name               string `json:"name"`
					FullyQualifiedName string `json:"fullyQualifiedName"`
					Kind               string `json:"kind"`
				} `json:"logicalLocations"`
			} `json:"locations"`
			PartialFingerprints map[string]string `json:"partialFingerprints"`
			Fixes               []struct {
				Description *struct {
					Text *string `json:"text"`
				} `json:"description"`
				ArtifactChanges []struct {
					ArtifactLocation *struct {
						URI string `json:"uri"`
					} `json:"artifactLocation"`
					Replacements []sarif.Replacement `json:"replacements"`
				} `json:"artifactChanges"`
			} `json:"fixes"`
			Properties struct {
				Tool   string `json:"tool"`
				Object string `json:"object"`
			} `json:"properties"`
		} `json:"results"`
	} `json:"runs"`
}

func TestSARIFStructure(t *testing.T) {
	r := sampleCheckReport()
	var buf bytes.Buffer
	if err := WriteSARIF(&buf, r, "v0.4.0"); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(buf.Bytes()) {
		t.Fatal("not valid JSON")
	}
	var doc sarifDoc
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Schema == nil || *doc.Schema != "https://json.schemastore.org/sarif-2.1.0.json" {
		t.Errorf("$schema = %v", doc.Schema)
	}
	if doc.Version == nil || *doc.Version != "2.1.0" {
		t.Fatalf("version = %v", doc.Version)
	}
	if len(doc.Runs) != 1 {
		t.Fatalf("%d runs, want 1", len(doc.Runs))
	}
	run := doc.Runs[0]
	if run.Tool == nil || run.Tool.Driver == nil || run.Tool.Driver.Name == nil || *run.Tool.Driver.Name != "truce" {
		t.Fatal("tool.driver.name is not truce")
	}
	if run.Tool.Driver.Version != "v0.4.0" {
		t.Errorf("driver version %q", run.Tool.Driver.Version)
	}
	var ruleIDs []string
	for _, rule := range run.Tool.Driver.Rules {
		if rule.ID == nil || rule.ShortDescription == nil || rule.ShortDescription.Text == nil ||
			rule.FullDescription == nil || rule.FullDescription.Text == nil {
			t.Fatalf("rule without id or descriptions: %+v", rule)
		}
		if !strings.HasPrefix(rule.HelpURI, "https://") || !strings.Contains(rule.HelpURI, "docs/check.md#") {
			t.Errorf("rule %s helpUri %q", *rule.ID, rule.HelpURI)
		}
		ruleIDs = append(ruleIDs, *rule.ID)
	}
	wantRules := []string{"truce/loop", "truce/out-of-sync", "truce/rejected", "truce/pruned", "truce/unpredictable", "truce/setting"}
	if strings.Join(ruleIDs, " ") != strings.Join(wantRules, " ") {
		t.Errorf("rules %v, want %v", ruleIDs, wantRules)
	}
	if run.Results == nil {
		t.Fatal("results missing")
	}
	results := *run.Results
	// Problems: web, batch, worker, registry-creds, api; one finding.
	if len(results) != 6 {
		t.Fatalf("%d results, want 6", len(results))
	}
	byObject := map[string]int{}
	for i, res := range results {
		if res.RuleIndex == nil || *res.RuleIndex >= len(ruleIDs) || ruleIDs[*res.RuleIndex] != res.RuleID {
			t.Errorf("result %d: ruleIndex does not point at %s", i, res.RuleID)
		}
		if res.Message == nil || res.Message.Text == nil || *res.Message.Text == "" {
			t.Errorf("result %d has no message", i)
		}
		switch res.Level {
		case "error", "warning", "note":
		default:
			t.Errorf("result %d: level %q", i, res.Level)
		}
		if len(res.Locations) != 1 {
			t.Errorf("result %d: %d locations", i, len(res.Locations))
		}
		if len(res.PartialFingerprints) == 0 {
			t.Errorf("result %d: no fingerprint", i)
		}
		byObject[res.Properties.Object] = i
	}

	web := results[byObject["Deployment.apps shop/web"]]
	if web.RuleID != "truce/loop" || web.Level != "error" {
		t.Errorf("web: %s %s", web.RuleID, web.Level)
	}
	if !strings.Contains(*web.Message.Text, "registry.internal/nginx:1.27") || !strings.Contains(*web.Message.Text, "Fix: Put registry.internal/nginx:1.27 in Git.") {
		t.Errorf("web message: %s", *web.Message.Text)
	}
	pl := web.Locations[0].PhysicalLocation
	if pl == nil || pl.ArtifactLocation.URI != "apps/shop/web.yaml" || pl.Region == nil || pl.Region.StartLine != 1 {
		t.Errorf("web location: %+v", pl)
	}
	if len(web.Fixes) != 1 || len(web.Fixes[0].ArtifactChanges) != 1 {
		t.Fatalf("web fixes: %+v", web.Fixes)
	}
	ch := web.Fixes[0].ArtifactChanges[0]
	if ch.ArtifactLocation == nil || ch.ArtifactLocation.URI != "apps/shop/web.yaml" || len(ch.Replacements) != 1 {
		t.Fatalf("web fix change: %+v", ch)
	}
	if d := ch.Replacements[0].DeletedRegion; d.StartLine != 20 || d.EndLine != 21 || d.StartColumn != 1 || d.EndColumn != 1 {
		t.Errorf("web fix deletes %+v, want line 20", d)
	}
	if !strings.Contains(*web.Fixes[0].Description.Text, "-          image: nginx:1.27") {
		t.Errorf("fix description lacks the diff: %s", *web.Fixes[0].Description.Text)
	}

	worker := results[byObject["Deployment.apps shop/worker"]]
	if worker.Level != "warning" || worker.RuleID != "truce/unpredictable" {
		t.Errorf("worker: %s %s", worker.RuleID, worker.Level)
	}

	secret := results[byObject["Secret team-a/registry-creds"]]
	if secret.RuleID != "truce/pruned" {
		t.Errorf("secret rule %s", secret.RuleID)
	}
	loc := secret.Locations[0]
	if loc.PhysicalLocation != nil || len(loc.LogicalLocations) != 1 ||
		loc.LogicalLocations[0].FullyQualifiedName != "Secret team-a/registry-creds" || loc.LogicalLocations[0].Name != "registry-creds" {
		t.Errorf("secret location: %+v", loc)
	}

	finding := results[byObject[""]]
	if finding.RuleID != "truce/setting" || finding.Locations[0].PhysicalLocation == nil ||
		finding.Locations[0].PhysicalLocation.ArtifactLocation.URI != "argocd/argocd-cm.yaml" {
		t.Errorf("finding: %+v", finding)
	}
	// No Synced object is a result.
	for _, res := range results {
		if strings.HasPrefix(res.Properties.Object, "Service") {
			t.Errorf("Synced %s reported", res.Properties.Object)
		}
	}
	// Results with a file come first, by file.
	var uris []string
	for _, res := range results {
		if p := res.Locations[0].PhysicalLocation; p != nil {
			uris = append(uris, p.ArtifactLocation.URI)
		} else {
			uris = append(uris, "~")
		}
	}
	want := "apps/shop/batch.yaml apps/shop/web.yaml apps/shop/worker.yaml argocd/argocd-cm.yaml clusters/prod/app/api.yaml ~"
	if strings.Join(uris, " ") != want {
		t.Errorf("result order %v, want %s", uris, want)
	}
}

func mustSARIF(t *testing.T, r *Report) []byte {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteSARIF(&buf, r, "v0.4.0"); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// applySARIFReplacements applies line-region replacements as a SARIF
// consumer would: regions refer to the original text.
func applySARIFReplacements(t *testing.T, text string, reps []sarif.Replacement) string {
	t.Helper()
	// Offsets of the start of each line (1-based); line n+1 starts at the end.
	starts := []int{0, 0}
	for i, c := range text {
		if c == '\n' {
			starts = append(starts, i+1)
		}
	}
	if !strings.HasSuffix(text, "\n") {
		starts = append(starts, len(text))
	}
	offset := func(line, col int) int {
		if line >= len(starts) {
			t.Fatalf("line %d past the end (%d lines)", line, len(starts)-2)
		}
		return starts[line] + col - 1
	}
	out, at := "", 0
	for _, r := range reps {
		var from, to int
		if r.DeletedRegion.CharOffset != nil {
			from, to = *r.DeletedRegion.CharOffset, *r.DeletedRegion.CharOffset+*r.DeletedRegion.CharLength
		} else {
			from = offset(r.DeletedRegion.StartLine, r.DeletedRegion.StartColumn)
			to = offset(r.DeletedRegion.EndLine, r.DeletedRegion.EndColumn)
		}
		if from < at {
			t.Fatalf("replacements overlap or are out of order")
		}
		out += text[at:from]
		if r.InsertedContent != nil {
			out += r.InsertedContent.Text
		}
		at = to
	}
	return out + text[at:]
}

func TestSARIFReplacementsApply(t *testing.T) {
	orig := "a\nb\nc\nd\ne\nf\ng\nh\n"
	cases := []struct {
		name, diff, want string
		new              bool
	}{
		{
			name: "replace one line",
			diff: "--- a/f\n+++ b/f\n@@ -2,3 +2,3 @@\n b\n-c\n+C\n d\n",
			want: "a\nb\nC\nd\ne\nf\ng\nh\n",
		},
		{
			name: "two hunks, delete and insert",
			diff: "--- a/f\n+++ b/f\n@@ -1,3 +1,2 @@\n a\n-b\n c\n@@ -6,3 +5,5 @@\n f\n g\n+g2\n+g3\n h\n",
			want: "a\nc\nd\ne\nf\ng\ng2\ng3\nh\n",
		},
		{
			name: "zero context insertion after line 5",
			diff: "@@ -5,0 +6 @@\n+x\n",
			want: "a\nb\nc\nd\ne\nx\nf\ng\nh\n",
		},
		{
			name: "append at the end",
			diff: "@@ -7,2 +7,3 @@\n g\n h\n+i\n",
			want: "a\nb\nc\nd\ne\nf\ng\nh\ni\n",
		},
		{
			name: "several changes in one hunk",
			diff: "@@ -1,8 +1,7 @@\n-a\n+A\n b\n c\n-d\n-e\n+DE\n f\n g\n h\n",
			want: "A\nb\nc\nDE\nf\ng\nh\n",
		},
		{
			name: "new file",
			diff: "--- /dev/null\n+++ b/n\n@@ -0,0 +1,2 @@\n+x\n+y\n",
			want: "x\ny\n",
			new:  true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reps, err := replacementsOf(Edit{Path: "f", Diff: tc.diff, New: tc.new})
			if err != nil {
				t.Fatal(err)
			}
			base := orig
			if tc.new {
				base = ""
			}
			if got := applySARIFReplacements(t, base, reps); got != tc.want {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}

	// Every fix of the fixture applies to a file that matches its context.
	for _, run := range sampleCheckReport().Runs {
		for _, o := range run.Objects {
			fixes := o.Alternatives
			if o.Fix != nil {
				fixes = append(fixes, *o.Fix)
			}
			for _, f := range fixes {
				for _, e := range f.Edits {
					before, after := sidesOfDiff(e.Diff)
					reps, err := replacementsOf(e)
					if err != nil {
						t.Fatalf("%s: %v", e.Path, err)
					}
					if got := applySARIFReplacements(t, before, reps); got != after {
						t.Errorf("%s: applying the replacements gives\n%s\nwant\n%s", e.Path, got, after)
					}
				}
			}
		}
	}
}

// sidesOfDiff rebuilds the two files a unified diff was made from: the
// lines it does not show are filled in as "line N".
func sidesOfDiff(diff string) (before, after string) {
	var b, a []string
	for _, l := range strings.Split(strings.TrimSuffix(diff, "\n"), "\n") {
		if m := hunkHeader.FindStringSubmatch(l); m != nil {
			start, _ := strconv.Atoi(m[1])
			if m[2] == "0" {
				start++
			}
			for len(b) < start-1 {
				filler := "line " + strconv.Itoa(len(b)+1)
				b, a = append(b, filler), append(a, filler)
			}
			continue
		}
		switch {
		case strings.HasPrefix(l, "---"), strings.HasPrefix(l, "+++"):
		case strings.HasPrefix(l, " "):
			b, a = append(b, l[1:]), append(a, l[1:])
		case strings.HasPrefix(l, "-"):
			b = append(b, l[1:])
		case strings.HasPrefix(l, "+"):
			a = append(a, l[1:])
		}
	}
	join := func(ls []string) string {
		if len(ls) == 0 {
			return ""
		}
		return strings.Join(ls, "\n") + "\n"
	}
	return join(b), join(a)
}

func TestSARIFFixNotAUnifiedDiff(t *testing.T) {
	r := sampleCheckReport()
	o := &r.Runs[0].Objects[0]
	o.Fix.Edits = []Edit{{Path: "apps/shop/web.yaml", Diff: "replace the image with registry.internal/nginx:1.27"}}
	var doc struct {
		Runs []struct {
			Results []struct {
				Message struct{ Text string }
				Fixes   []json.RawMessage
			}
		}
	}
	if err := json.Unmarshal(mustSARIF(t, r), &doc); err != nil {
		t.Fatal(err)
	}
	for _, res := range doc.Runs[0].Results {
		if strings.Contains(res.Message.Text, "shop/web ") {
			if len(res.Fixes) != 0 {
				t.Error("a fix whose edit is not a diff is in fixes")
			}
			if !strings.Contains(res.Message.Text, "Fix: Put registry.internal/nginx:1.27 in Git.") {
				t.Errorf("message lost the fix: %s", res.Message.Text)
			}
			return
		}
	}
	t.Fatal("no result for shop/web")
}

func TestSARIFEmptyReport(t *testing.T) {
	out := mustSARIF(t, &Report{})
	if !bytes.Contains(out, []byte(`"results": []`)) {
		t.Errorf("an empty report must still have results: []:\n%s", out)
	}
}

func TestSplitSource(t *testing.T) {
	for _, tc := range []struct {
		in   string
		path string
		line int
	}{
		{"apps/web.yaml:12", "apps/web.yaml", 12},
		{"apps/web.yaml", "apps/web.yaml", 0},
		{`C:\repo\web.yaml`, `C:\repo\web.yaml`, 0},
		{`C:\repo\web.yaml:3`, `C:\repo\web.yaml`, 3},
		{"web.yaml:x", "web.yaml:x", 0},
		{"", "", 0},
	} {
		p, l := splitSource(tc.in)
		if p != tc.path || l != tc.line {
			t.Errorf("splitSource(%q) = %q, %d", tc.in, p, l)
		}
	}
}
