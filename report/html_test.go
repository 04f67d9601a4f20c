package report

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"golang.org/x/net/html"
)

func renderHTMLDoc(t *testing.T, r *Report) (*html.Node, string) {
	t.Helper()
	var buf bytes.Buffer
	if err := WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	return doc, buf.String()
}

// hxAll returns the elements under n that match.
func hxAll(n *html.Node, match func(*html.Node) bool) []*html.Node {
	var out []*html.Node
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode && match(n) {
			out = append(out, n)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return out
}

func hxAttr(n *html.Node, key string) string {
	for _, a := range n.Attr {
		if a.Key == key {
			return a.Val
		}
	}
	return ""
}

func hxHasClass(n *html.Node, class string) bool {
	for _, c := range strings.Fields(hxAttr(n, "class")) {
		if c == class {
			return true
		}
	}
	return false
}

func hxClasses(classes ...string) func(*html.Node) bool {
	return func(n *html.Node) bool {
		for _, c := range classes {
			if !hxHasClass(n, c) {
				return false
			}
		}
		return true
	}
}

func hxTag(tag string) func(*html.Node) bool {
	return func(n *html.Node) bool { return n.Data == tag }
}

func hxByID(t *testing.T, doc *html.Node, id string) *html.Node {
	t.Helper()
	found := hxAll(doc, func(n *html.Node) bool { return hxAttr(n, "id") == id })
	if len(found) != 1 {
		t.Fatalf("%d elements with id %q, want 1", len(found), id)
	}
	return found[0]
}

func hxText(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}

// hxLeft reads the left: N% of a marker's style.
func hxLeft(t *testing.T, n *html.Node) float64 {
	t.Helper()
	style := hxAttr(n, "style")
	i := strings.Index(style, "left:")
	j := strings.Index(style, "%")
	if i < 0 || j < i {
		t.Fatalf("marker style %q has no left", style)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(style[i+len("left:"):j]), 64)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

func TestHTMLSelfContained(t *testing.T) {
	doc, page := renderHTMLDoc(t, sampleCheckReport())
	if !strings.HasPrefix(page, "<!DOCTYPE html>") {
		t.Error("no doctype")
	}
	for _, tag := range []string{"link", "script", "img", "iframe", "object", "embed", "video", "audio", "source"} {
		if n := hxAll(doc, hxTag(tag)); len(n) > 0 {
			t.Errorf("page has <%s>: nothing may load from elsewhere, and no script is needed", tag)
		}
	}
	for _, bad := range []string{"url(", "@import", "src="} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	for _, a := range hxAll(doc, hxTag("a")) {
		href := hxAttr(a, "href")
		if !strings.HasPrefix(href, "#") && !strings.HasPrefix(href, docsURL) {
			t.Errorf("link to %q", href)
		}
	}
	if len(hxAll(doc, hxTag("style"))) != 1 {
		t.Error("want one inline <style>")
	}
}

func TestHTMLStructure(t *testing.T) {
	doc, _ := renderHTMLDoc(t, sampleCheckReport())

	// Summary: one row per run, badges per verdict.
	summary := hxAll(doc, hxClasses("summary"))
	if len(summary) != 1 {
		t.Fatalf("%d summary tables", len(summary))
	}
	rows := hxAll(summary[0], hxTag("tr"))
	if len(rows) != 3 { // header + argocd shop + flux app
		t.Fatalf("summary has %d rows, want 3", len(rows))
	}
	if txt := hxText(rows[1]); !strings.Contains(txt, "Argo CD") || !strings.Contains(txt, "shop") {
		t.Errorf("first run row: %q", txt)
	}
	if n := len(hxAll(rows[1], hxClasses("badge", "loop"))); n != 1 {
		t.Errorf("argocd row has %d Loop badges", n)
	}
	if n := len(hxAll(rows[2], hxClasses("badge", "synced"))); n != 1 {
		t.Errorf("flux row has %d Synced badges", n)
	}
	if n := len(hxAll(doc, hxTag("article"))); n != 5 {
		t.Errorf("%d problems shown, want 5", n)
	}

	// Problem 1: the image-mirror loop.
	p1 := hxByID(t, doc, "problem-1")
	head := hxText(hxAll(p1, hxTag("header"))[0])
	for _, want := range []string{"Loop", "Deployment.apps shop/web", "apps/shop/web.yaml:1", "18 writes in 1h"} {
		if !strings.Contains(head, want) {
			t.Errorf("problem 1 header lacks %q: %q", want, head)
		}
	}
	if txt := hxText(p1); !strings.Contains(txt, "every 5m once its backoff is capped") {
		t.Error("problem 1 lacks its reason")
	}
	tiles := hxText(hxAll(p1, hxClasses("tiles"))[0])
	for _, want := range []string{"/spec/template/spec/containers/0/image", "argocd-controller", "MutatingAdmissionPolicy/mirror (binding mirror)", "5m", "12"} {
		if !strings.Contains(tiles, want) {
			t.Errorf("loop summary lacks %q: %q", want, tiles)
		}
	}

	// Its timeline: two lanes, a marker per write and per admission change.
	tl := hxByID(t, doc, "timeline-1")
	if !hxHasClass(tl, "timeline") {
		t.Error("timeline-1 lacks class timeline")
	}
	tool := hxAll(tl, hxClasses("write", "tool"))
	other := hxAll(tl, hxClasses("write", "other"))
	if len(tool) != 16 || len(other) != 16 {
		t.Fatalf("timeline-1: %d tool and %d other markers, want 16 and 16", len(tool), len(other))
	}
	if lanes := hxAll(tl, hxClasses("tl-track")); len(lanes) != 2 {
		t.Errorf("timeline-1 has %d lanes, want 2", len(lanes))
	}
	var xs []float64
	for i, m := range tool {
		x := hxLeft(t, m)
		if i > 0 && x <= xs[i-1] {
			t.Errorf("marker %d at %.2f%%, not right of marker %d at %.2f%%", i+1, x, i, xs[i-1])
		}
		if x < 0 || x > 100 {
			t.Errorf("marker %d at %.2f%%", i+1, x)
		}
		if ox := hxLeft(t, other[i]); ox != x {
			t.Errorf("admission marker %d at %.2f%%, its write at %.2f%%", i+1, ox, x)
		}
		xs = append(xs, x)
	}
	// The backoff widens, the steady period is even.
	gaps := make([]float64, len(xs)-1)
	for i := range gaps {
		gaps[i] = xs[i+1] - xs[i]
	}
	for i := 1; i < 6; i++ {
		if gaps[i] <= gaps[i-1] && i > 1 {
			t.Errorf("backoff gap %d (%.2f) not wider than gap %d (%.2f)", i, gaps[i], i-1, gaps[i-1])
		}
	}
	for i := 7; i < len(gaps); i++ {
		if math.Abs(gaps[i]-gaps[6]) > 0.02 {
			t.Errorf("steady gap %d is %.2f, gap 6 is %.2f", i, gaps[i], gaps[6])
		}
	}
	// The shortest gap is still readable: at least ~1.5% of the width.
	if gaps[0] < 1.5 {
		t.Errorf("two writes at 0s are %.2f%% apart", gaps[0])
	}
	if title := hxAttr(tool[2], "title"); !strings.Contains(title, "#3 at +2s: argocd-controller apply") || !strings.Contains(title, "stored unchanged") {
		t.Errorf("marker 3 title %q", title)
	}
	if title := hxAttr(tool[0], "title"); !strings.Contains(title, "/spec/template/spec/containers/0/image: (none) → registry.internal/nginx:1.27") {
		t.Errorf("marker 1 title %q", title)
	}
	if !hxHasClass(tool[1], "noop") || hxHasClass(tool[0], "noop") {
		t.Error("no-op writes are not marked")
	}
	axis := hxText(hxAll(tl, hxClasses("tl-axis"))[0])
	for _, want := range []string{"0s", "4m02s", "49m02s", "every 5m", "backoff 2s → 2m42s"} {
		if !strings.Contains(axis, want) {
			t.Errorf("axis lacks %q: %q", want, axis)
		}
	}
	writes := hxAll(p1, hxClasses("writes"))
	if len(writes) != 1 || len(hxAll(writes[0], hxTag("tr"))) != 17 {
		t.Error("the list below the timeline does not have 16 writes")
	}

	// Desired vs live, side by side.
	sbs := hxAll(p1, hxClasses("sbs"))
	if len(sbs) != 1 {
		t.Fatal("no side-by-side diff")
	}
	chg := hxAll(sbs[0], hxClasses("chg"))
	if len(chg) != 1 {
		t.Fatalf("%d changed rows, want 1", len(chg))
	}
	cells := hxAll(chg[0], hxTag("td"))
	if len(cells) != 4 || !strings.Contains(hxText(cells[1]), "image: nginx:1.27") || !strings.Contains(hxText(cells[3]), "image: registry.internal/nginx:1.27") {
		t.Errorf("changed row: %q", hxText(chg[0]))
	}
	if marks := hxAll(cells[3], hxTag("mark")); len(marks) != 1 || hxText(marks[0]) != "registry.internal/" {
		t.Errorf("live side highlights %d parts", len(marks))
	}
	if skips := hxAll(sbs[0], hxClasses("skip")); len(skips) != 2 {
		t.Errorf("%d folded stretches, want 2", len(skips))
	}

	// The verified fix with its diff, the alternatives with their warning.
	fix := hxAll(p1, hxClasses("fix"))
	if len(fix) != 1 {
		t.Fatal("no fix")
	}
	ftxt := hxText(fix[0])
	for _, want := range []string{"Put registry.internal/nginx:1.27 in Git", "verified", "apps/shop/web.yaml"} {
		if !strings.Contains(ftxt, want) {
			t.Errorf("fix lacks %q", want)
		}
	}
	if adds := hxAll(fix[0], hxClasses("add")); len(adds) != 1 || !strings.Contains(hxText(adds[0]), "registry.internal/nginx:1.27") {
		t.Error("fix diff: added line missing")
	}
	alts := hxAll(p1, hxClasses("alt"))
	if len(alts) != 3 {
		t.Fatalf("%d alternatives, want 3", len(alts))
	}
	if w := hxAll(alts[2], hxClasses("warning")); len(w) != 1 || !strings.Contains(hxText(w[0]), "Real drift in this image becomes invisible") {
		t.Error("the ignore rule's warning is missing")
	}

	// Problem 2, rejected: one write, listed with the error, not drawn.
	p2 := hxByID(t, doc, "problem-2")
	if len(hxAll(p2, hxClasses("timeline"))) != 0 {
		t.Error("a single write is drawn as a timeline")
	}
	if errs := hxAll(p2, hxClasses("err")); len(errs) != 1 || !strings.Contains(hxText(errs[0]), `deployments.apps "batch" is forbidden`) {
		t.Error("the rejection is not shown")
	}

	// Problem 4, pruned, not in Git.
	p4 := hxByID(t, doc, "problem-4")
	if !strings.Contains(hxText(p4), "not in Git") {
		t.Error("problem 4 does not say it is not in Git")
	}
	tl4 := hxByID(t, doc, "timeline-4")
	if n, m := len(hxAll(tl4, hxClasses("write", "tool"))), len(hxAll(tl4, hxClasses("write", "other"))); n != 2 || m != 2 {
		t.Errorf("timeline-4: %d tool, %d other markers", n, m)
	}

	// Problem 5: the HPA and Flux, alternating.
	tl5 := hxByID(t, doc, "timeline-5")
	ft, fo := hxAll(tl5, hxClasses("write", "tool")), hxAll(tl5, hxClasses("write", "other"))
	if len(ft) != 6 || len(fo) != 6 {
		t.Fatalf("timeline-5: %d tool, %d other markers, want 6 and 6", len(ft), len(fo))
	}
	for i := range ft {
		if hxLeft(t, fo[i]) <= hxLeft(t, ft[i]) {
			t.Errorf("HPA write %d is not after Flux write %d", i+1, i+1)
		}
	}
	labels := hxAll(tl5, hxClasses("tl-label"))
	if len(labels) != 2 || !strings.Contains(hxText(labels[0]), "kustomize-controller") || !strings.Contains(hxText(labels[1]), "kube-controller-manager") {
		t.Error("timeline-5 lanes are not Flux then the HPA")
	}
	if axis := hxText(hxAll(tl5, hxClasses("tl-axis"))[0]); !strings.Contains(axis, "every 10m") {
		t.Errorf("timeline-5 axis: %q", axis)
	}

	// Settings and the objects that settle.
	if txt := hxText(doc); !strings.Contains(txt, "matches no object of Application shop") || !strings.Contains(txt, "2 objects settle") {
		t.Error("findings or Synced objects missing")
	}
}

func TestHTMLEscapes(t *testing.T) {
	r := sampleCheckReport()
	o := &r.Runs[0].Objects[0]
	o.Object = `Deployment shop/<script>alert(1)</script>`
	o.Reason = `"><img src=x onerror=alert(2)> & done`
	o.Timeline[1].Changes = []string{`/x: "a" → <b>b</b>`}
	o.Fix.Edits[0].Diff += "+<iframe src=javascript:alert(3)>\n"
	o.Live += "evil: </textarea><script>alert(4)</script>\n"
	doc, page := renderHTMLDoc(t, r)
	for _, tag := range []string{"script", "img", "iframe"} {
		if n := hxAll(doc, hxTag(tag)); len(n) > 0 {
			t.Errorf("injected <%s> is an element", tag)
		}
	}
	if !strings.Contains(hxText(doc), `Deployment shop/<script>alert(1)</script>`) || !strings.Contains(hxText(doc), `"><img src=x onerror=alert(2)> & done`) {
		t.Error("escaped text does not read as written")
	}
	if strings.Contains(page, "<script") {
		t.Error("raw <script in the page")
	}
	for _, b := range hxAll(doc, hxTag("b")) {
		if hxText(b) == "b" {
			t.Error("injected <b> is an element")
		}
	}
	tl := hxByID(t, doc, "timeline-1")
	if title := hxAttr(hxAll(tl, hxClasses("write", "tool"))[1], "title"); !strings.Contains(title, `/x: "a" → <b>b</b>`) {
		t.Errorf("title attribute: %q", title)
	}
}

func TestHTMLEmptyAndSettled(t *testing.T) {
	r := &Report{Repository: "demo", Runs: []Run{{Tool: "flux", Objects: []Object{{Object: "ConfigMap a/b", Verdict: "Synced"}}}}}
	doc, _ := renderHTMLDoc(t, r)
	if txt := hxText(doc); !strings.Contains(txt, "everything settles") || !strings.Contains(txt, "(defaults)") {
		t.Errorf("settled page: %q", txt)
	}
	if len(hxAll(doc, hxClasses("timeline"))) != 0 || len(hxAll(doc, hxTag("article"))) != 0 {
		t.Error("settled page shows problems")
	}
	if _, page := renderHTMLDoc(t, &Report{}); !strings.Contains(page, "</html>") {
		t.Error("empty report does not render")
	}
}

func TestHTMLDenseTimeline(t *testing.T) {
	r := sampleCheckReport()
	o := &r.Runs[1].Objects[0]
	o.Timeline = nil
	for i := 0; i < 120; i++ {
		o.Timeline = append(o.Timeline, Event{At: time.Duration(i) * 30 * time.Second, Writer: "kustomize-controller", ByTool: i%2 == 0, Verb: "apply", Changes: []string{"/spec/replicas: 5 → 2"}})
	}
	doc, _ := renderHTMLDoc(t, r)
	tl := hxByID(t, doc, "timeline-5")
	if !hxHasClass(tl, "dense") {
		t.Error("120 writes are not drawn dense")
	}
	if n := len(hxAll(tl, hxClasses("write"))); n != 120 {
		t.Errorf("%d markers, want 120", n)
	}
	d := hxAll(hxByID(t, doc, "problem-5"), hxTag("details"))
	if len(d) == 0 {
		t.Fatal("no list of writes")
	}
	for _, a := range d[0].Attr {
		if a.Key == "open" {
			t.Error("a list of 120 writes is open")
		}
	}
}

func TestSideBySide(t *testing.T) {
	v := sideBySide("a\nb\nc\n", "a\nb\nc\n")
	if !v.Identical {
		t.Error("identical documents differ")
	}
	v = sideBySide("a\nb\n", "a\nb\nc\nd\n")
	if v.Changed != 2 || v.Rows[len(v.Rows)-1].Kind != "ins" {
		t.Errorf("appended lines: %+v", v.Rows)
	}
	v = sideBySide("", "x: 1\n")
	if v.Changed != 1 {
		t.Errorf("from nothing: %+v", v)
	}
	l, r := inlineDiff("image: nginx:1.27", "image: registry.internal/nginx:1.27")
	if len(l) != 2 || len(r) != 3 || !r[1].Hl || r[1].Text != "registry.internal/" {
		t.Errorf("inline: %+v | %+v", l, r)
	}
	l, r = inlineDiff("name: café", "name: cafè")
	for _, s := range append(l, r...) {
		if !utf8.ValidString(s.Text) {
			t.Errorf("inline diff split a rune: %+v %+v", l, r)
		}
	}
}
