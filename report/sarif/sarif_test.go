package sarif

import (
	"bytes"
	"strings"
	"testing"
)

func TestArtifactURI(t *testing.T) {
	for in, want := range map[string]string{
		"dir with space/a.yaml": "dir%20with%20space/a.yaml",
		"./apps/a.yaml":         "apps/a.yaml",
		"/abs/a.yaml":           "file:///abs/a.yaml",
	} {
		if got := ArtifactURI(in); got != want {
			t.Errorf("ArtifactURI(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLocations(t *testing.T) {
	if l := FileLocation("apps/web.yaml", 0); l.PhysicalLocation == nil || l.PhysicalLocation.Region != nil {
		t.Errorf("no line: %+v", l.PhysicalLocation)
	}
	if l := FileLocation("apps/web.yaml", 7); l.PhysicalLocation.Region == nil || l.PhysicalLocation.Region.StartLine != 7 {
		t.Errorf("line 7: %+v", l.PhysicalLocation)
	}
	for object, name := range map[string]string{
		"Deployment.apps shop/web":       "web",
		"MutatingWebhookConfiguration m": "m",
		"settings":                       "settings",
	} {
		l := ObjectLocation(object)
		if l.PhysicalLocation != nil || len(l.LogicalLocations) != 1 || l.LogicalLocations[0].Name != name ||
			l.LogicalLocations[0].FullyQualifiedName != object || l.LogicalLocations[0].Kind != "resource" {
			t.Errorf("ObjectLocation(%q) = %+v", object, l)
		}
	}
}

// TestWrite: the log names the version and schema, keeps "<", ">" and "&"
// as they are, and leaves out the property bags that are not set.
func TestWrite(t *testing.T) {
	var b bytes.Buffer
	run := Run{Tool: Tool{Driver: Driver{Name: "t", Rules: []Rule{{ID: "r"}}}},
		Results: []Result{{RuleID: "r", Message: Message{Text: "a < b & c"}, Locations: []Location{FileLocation("a.yaml", 1)}}}}
	if err := Write(&b, run); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{`"$schema": "` + Schema + `"`, `"version": "2.1.0"`, `"text": "a < b & c"`, `"startLine": 1`} {
		if !strings.Contains(out, want) {
			t.Errorf("log lacks %s:\n%s", want, out)
		}
	}
	for _, absent := range []string{"properties", "fullDescription", "fixes", `"name": ""`} {
		if strings.Contains(out, absent) {
			t.Errorf("log has %s:\n%s", absent, out)
		}
	}
	if Fingerprint("a", "b") == Fingerprint("ab") || len(Fingerprint("a")) != 32 {
		t.Errorf("fingerprints: %s %s", Fingerprint("a", "b"), Fingerprint("ab"))
	}
}
