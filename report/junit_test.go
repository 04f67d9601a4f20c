package report

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
)

func TestJUnitGolden(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, sampleCheckReport()); err != nil {
		t.Fatal(err)
	}
	compareFormatGolden(t, "check.junit.xml", buf.Bytes())
}

// junitDoc is JUnit XML as CI servers read it.
type junitDoc struct {
	XMLName  xml.Name `xml:"testsuites"`
	Tests    int      `xml:"tests,attr"`
	Failures int      `xml:"failures,attr"`
	Skipped  int      `xml:"skipped,attr"`
	Suites   []struct {
		Name     string `xml:"name,attr"`
		Tests    int    `xml:"tests,attr"`
		Failures int    `xml:"failures,attr"`
		Skipped  int    `xml:"skipped,attr"`
		Cases    []struct {
			Name      string `xml:"name,attr"`
			Classname string `xml:"classname,attr"`
			File      string `xml:"file,attr"`
			Failure   *struct {
				Message string `xml:"message,attr"`
				Type    string `xml:"type,attr"`
				Body    string `xml:",chardata"`
			} `xml:"failure"`
			Skipped *struct {
				Message string `xml:"message,attr"`
				Body    string `xml:",chardata"`
			} `xml:"skipped"`
			SystemOut string `xml:"system-out"`
		} `xml:"testcase"`
	} `xml:"testsuite"`
}

func parseJUnit(t *testing.T, data []byte) junitDoc {
	t.Helper()
	// Well-formed: every token reads.
	d := xml.NewDecoder(bytes.NewReader(data))
	for {
		_, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
	var doc junitDoc
	if err := xml.Unmarshal(data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func TestJUnitStructure(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, sampleCheckReport()); err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(buf.Bytes(), []byte(`<?xml version="1.0" encoding="UTF-8"?>`)) {
		t.Error("no XML declaration")
	}
	doc := parseJUnit(t, buf.Bytes())
	if doc.Tests != 8 || doc.Failures != 4 || doc.Skipped != 1 {
		t.Errorf("totals tests=%d failures=%d skipped=%d, want 8 4 1", doc.Tests, doc.Failures, doc.Skipped)
	}
	var names []string
	for _, s := range doc.Suites {
		names = append(names, s.Name)
	}
	if got := strings.Join(names, ","); got != "argocd shop,flux app,settings" {
		t.Fatalf("suites %s", got)
	}
	argo := doc.Suites[0]
	if argo.Tests != 5 || argo.Failures != 3 || argo.Skipped != 1 {
		t.Errorf("argocd shop: tests=%d failures=%d skipped=%d", argo.Tests, argo.Failures, argo.Skipped)
	}
	web := argo.Cases[0]
	if web.Name != "Deployment.apps shop/web" || web.Classname != "argocd/shop" || web.File != "apps/shop/web.yaml" {
		t.Errorf("web case: %+v", web)
	}
	if web.Failure == nil || web.Failure.Type != "Loop" || !strings.HasPrefix(web.Failure.Message, "Argo CD applies image nginx:1.27") {
		t.Fatalf("web failure: %+v", web.Failure)
	}
	for _, want := range []string{
		"Loop\n  fields:  /spec/template/spec/containers/0/image",
		"period:  5m, 12 writes/hour",
		"Timeline (16 writes, simulated over 50m; 18 in the 1h window)",
		"+4m02s  argocd-controller [tool]",
		"admission: MutatingAdmissionPolicy/mirror (binding mirror)",
		"Fix (git-value, verified: Synced): Put registry.internal/nginx:1.27 in Git",
		"+          image: registry.internal/nginx:1.27",
		"Alternatives\n  - Validate the mirror instead of mutating to it (validating-policy, verified)",
	} {
		if !strings.Contains(web.Failure.Body, want) {
			t.Errorf("web failure body lacks %q:\n%s", want, web.Failure.Body)
		}
	}
	if n := strings.Count(web.Failure.Body, "argocd-controller [tool]"); n != 16 {
		t.Errorf("web timeline has %d writes, want 16", n)
	}
	worker := argo.Cases[2]
	if worker.Skipped == nil || worker.Failure != nil {
		t.Errorf("Unpredictable worker is not skipped: %+v", worker)
	}
	if svc := argo.Cases[4]; svc.Failure != nil || svc.Skipped != nil {
		t.Errorf("Synced Service fails: %+v", svc)
	}
	batch := argo.Cases[1]
	if batch.Failure == nil || !strings.Contains(batch.Failure.Body, "ERROR deployments.apps \"batch\" is forbidden") {
		t.Errorf("batch failure lacks the rejection: %+v", batch.Failure)
	}
	flux := doc.Suites[1]
	if flux.Cases[0].Classname != "flux/app" || flux.Cases[0].Failure == nil {
		t.Errorf("flux api: %+v", flux.Cases[0])
	}
	settings := doc.Suites[2]
	if len(settings.Cases) != 1 || settings.Cases[0].Failure != nil || !strings.Contains(settings.Cases[0].SystemOut, "matches no object") {
		t.Errorf("settings suite: %+v", settings)
	}
}

func TestJUnitEscapes(t *testing.T) {
	r := sampleCheckReport()
	o := &r.Runs[0].Objects[0]
	o.Reason = `a "quoted" <reason> & ]]> with a control character` + "\x01" + " and invalid UTF-8 \xff"
	o.Timeline[0].Changes = append(o.Timeline[0].Changes, "/data/x: ]]> → <![CDATA[")
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, r); err != nil {
		t.Fatal(err)
	}
	doc := parseJUnit(t, buf.Bytes())
	f := doc.Suites[0].Cases[0].Failure
	if f == nil || !strings.HasPrefix(f.Message, `a "quoted" <reason> & ]]> with a control character`) {
		t.Fatalf("message: %+v", f)
	}
	if !strings.Contains(f.Body, "/data/x: ]]> → <![CDATA[") {
		t.Errorf("body lost the CDATA-like change:\n%s", f.Body)
	}
}

func TestJUnitEmptyReport(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteJUnit(&buf, &Report{}); err != nil {
		t.Fatal(err)
	}
	doc := parseJUnit(t, buf.Bytes())
	if doc.Tests != 0 || len(doc.Suites) != 0 {
		t.Errorf("empty report: %+v", doc)
	}
}
