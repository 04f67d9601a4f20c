package lint

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// TestSARIFStructure checks the log against what SARIF 2.1.0 and code
// scanning require: version and schema, one run with a named driver, rules
// with ids, help text and a level, results whose ruleId and ruleIndex agree,
// with a message, a level and a location (file and start line, or a
// logical location for live objects).
func TestSARIFStructure(t *testing.T) {
	var b bytes.Buffer
	rules := Rules()
	if err := WriteSARIF(&b, sampleFindings(), rules, "v1.2.3"); err != nil {
		t.Fatal(err)
	}
	var log struct {
		Schema  string `json:"$schema"`
		Version string `json:"version"`
		Runs    []struct {
			Tool struct {
				Driver struct {
					Name    string `json:"name"`
					Version string `json:"version"`
					Rules   []struct {
						ID               string `json:"id"`
						ShortDescription struct {
							Text string `json:"text"`
						} `json:"shortDescription"`
						HelpURI string `json:"helpUri"`
						Help    struct {
							Text     string `json:"text"`
							Markdown string `json:"markdown"`
						} `json:"help"`
						DefaultConfiguration struct {
							Level string `json:"level"`
						} `json:"defaultConfiguration"`
					} `json:"rules"`
				} `json:"driver"`
			} `json:"tool"`
			Results []struct {
				RuleID    string `json:"ruleId"`
				RuleIndex int    `json:"ruleIndex"`
				Level     string `json:"level"`
				Message   struct {
					Text string `json:"text"`
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
						FullyQualifiedName string `json:"fullyQualifiedName"`
					} `json:"logicalLocations"`
				} `json:"locations"`
				PartialFingerprints map[string]string `json:"partialFingerprints"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b.Bytes(), &log); err != nil {
		t.Fatal(err)
	}
	if log.Version != "2.1.0" || !strings.Contains(log.Schema, "sarif-2.1.0") || len(log.Runs) != 1 {
		t.Fatalf("header: %s %s, %d runs", log.Version, log.Schema, len(log.Runs))
	}
	run := log.Runs[0]
	if run.Tool.Driver.Name == "" || run.Tool.Driver.Version != "v1.2.3" {
		t.Errorf("driver: %+v", run.Tool.Driver)
	}
	if len(run.Tool.Driver.Rules) != len(rules) {
		t.Fatalf("%d rules, want %d", len(run.Tool.Driver.Rules), len(rules))
	}
	levels := map[string]bool{"error": true, "warning": true, "note": true}
	for i, r := range run.Tool.Driver.Rules {
		if r.ID != rules[i].ID || r.ShortDescription.Text == "" || r.Help.Text == "" || r.Help.Markdown == "" ||
			r.HelpURI != DocsURL+"#"+r.ID || !levels[r.DefaultConfiguration.Level] {
			t.Errorf("rule %d: %+v", i, r)
		}
	}
	if len(run.Results) != 2 {
		t.Fatalf("%d results", len(run.Results))
	}
	for _, res := range run.Results {
		if run.Tool.Driver.Rules[res.RuleIndex].ID != res.RuleID || !levels[res.Level] || res.Message.Text == "" ||
			len(res.Locations) != 1 || len(res.PartialFingerprints) == 0 {
			t.Errorf("result: %+v", res)
		}
	}
	file := run.Results[0].Locations[0].PhysicalLocation
	if file == nil || file.ArtifactLocation.URI != "cluster/hooks.yaml" || file.Region == nil || file.Region.StartLine != 3 {
		t.Errorf("file location: %+v", file)
	}
	if run.Results[0].Level != "error" || run.Results[1].Level != "warning" {
		t.Errorf("levels: %s, %s", run.Results[0].Level, run.Results[1].Level)
	}
	liveLoc := run.Results[1].Locations[0]
	if liveLoc.PhysicalLocation != nil || len(liveLoc.LogicalLocations) != 1 || liveLoc.LogicalLocations[0].FullyQualifiedName != "MutatingWebhookConfiguration m" {
		t.Errorf("live location: %+v", liveLoc)
	}
}

func TestSARIFUnknownRuleAndURIs(t *testing.T) {
	var b bytes.Buffer
	f := Finding{Rule: "extra-rule", Severity: SeverityInfo, Source: "/abs/x.yaml:2", Object: "ConfigMap a/b", Message: "m"}
	if err := WriteSARIF(&b, []Finding{f}, nil, ""); err != nil {
		t.Fatal(err)
	}
	s := b.String()
	for _, want := range []string{`"id": "extra-rule"`, `"level": "note"`, `"uri": "file:///abs/x.yaml"`, `"startLine": 2`} {
		if !strings.Contains(s, want) {
			t.Errorf("SARIF lacks %s:\n%s", want, s)
		}
	}
}
