package gatekeeper_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/schema"
)

// suite is the part of gator verify's Suite (test.gatekeeper.sh/v1alpha1)
// the library's suites use.
type suite struct {
	Tests []struct {
		Name       string `json:"name"`
		Template   string `json:"template"`
		Constraint string `json:"constraint"`
		Cases      []struct {
			Name       string   `json:"name"`
			Object     string   `json:"object"`
			Inventory  []string `json:"inventory"`
			Assertions []struct {
				// Violations is "yes", "no" or a count.
				Violations any     `json:"violations"`
				Message    *string `json:"message"`
			} `json:"assertions"`
		} `json:"cases"`
	} `json:"tests"`
}

// libraryDir holds gatekeeper-library's suites (see its README).
const libraryDir = "testdata/library"

// libraryAnswer is what gator test answers for a case: for the object as
// the API server hands it to Gatekeeper's webhook (namespaced into
// "default" when it has no namespace, defaulted, with the metadata the
// server sets), and, for comparison, for the file as written.
type libraryAnswer struct {
	Admitted []string `json:"admitted"`
	Written  []string `json:"written"`
}

// TestLibrary writes every object of gatekeeper-library's suites through a
// chain whose cluster holds the suite's template and constraint, and
// compares Gatekeeper's webhook answer in truce with what `gator test` of
// the same version answers for the object the webhook is sent (recorded
// in testdata/library-gator/, or asked of TRUCE_GATOR; -update records),
// and with the suite's own assertions (what `gator verify` checks) where
// the API server's defaulting does not change gator's answer.
func TestLibrary(t *testing.T) {
	gator := os.Getenv("TRUCE_GATOR")
	if *update && gator == "" {
		t.Fatal("-update needs TRUCE_GATOR")
	}
	suites, err := filepath.Glob(filepath.Join(libraryDir, "*", "*", "suite.yaml"))
	if err != nil || len(suites) == 0 {
		t.Fatalf("no suites under %s: %v", libraryDir, err)
	}
	var compared, referential, rejected, judged, defaulted int
	for _, path := range suites {
		dir := filepath.Dir(path)
		rel, _ := filepath.Rel(libraryDir, dir)
		var s suite
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.Unmarshal(raw, &s); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		golden := filepath.Join("testdata", "library-gator", strings.ReplaceAll(rel, string(filepath.Separator), "_")+".json")
		recorded := map[string]libraryAnswer{}
		if gator == "" {
			b, err := os.ReadFile(golden)
			if err != nil && !errors.Is(err, fs.ErrNotExist) {
				t.Fatal(err)
			}
			if err == nil {
				if err := json.Unmarshal(b, &recorded); err != nil {
					t.Fatalf("%s: %v", golden, err)
				}
			}
		}
		answers := map[string]libraryAnswer{}
		seen := map[string]int{}
		t.Run(rel, func(t *testing.T) {
			for _, test := range s.Tests {
				template := filepath.Join(dir, test.Template)
				constraint := filepath.Join(dir, test.Constraint)
				for _, c := range test.Cases {
					key := test.Name + "/" + c.Name
					// Some suites repeat a case's name.
					if seen[key]++; seen[key] > 1 {
						key = fmt.Sprintf("%s#%d", key, seen[key])
					}
					t.Run(key, func(t *testing.T) {
						var inventory []string
						for _, f := range c.Inventory {
							inventory = append(inventory, filepath.Join(dir, f))
						}
						if len(inventory) > 0 {
							referential++
						}
						object := filepath.Join(dir, c.Object)
						lc := newLibraryCase(t, template, constraint, object, inventory)
						if lc.rejected != "" {
							rejected++
							t.Skipf("the API server rejects the object before Gatekeeper's webhook: %s", lc.rejected)
						}
						got := lc.admit(t)
						if lc.update || lc.referential {
							// gator test reads no AdmissionReview, and
							// puts every object it reads, the reviewed one
							// too, into data.inventory, which Gatekeeper's
							// webhook does not for an object being
							// created: the suite's assertions (gator
							// verify's) are the judge.
							judged++
							for _, a := range c.Assertions {
								checkAssertion(t, got, a.Violations, a.Message)
							}
							return
						}
						var want libraryAnswer
						switch {
						case gator != "":
							want = libraryAnswer{
								Admitted: lc.gator(t, gator, lc.admitted),
								Written:  lc.gator(t, gator, lc.written),
							}
							answers[key] = want
						default:
							w, ok := recorded[key]
							if !ok {
								t.Fatalf("no answer of gator recorded in %s for %s (run with TRUCE_GATOR and -update)", golden, key)
							}
							want = w
						}
						compared++
						if diff := cmp.Diff(want.Admitted, got, cmpEmpty); diff != "" {
							t.Errorf("truce differs from gator test of the admitted object (-gator +truce):\n%s", diff)
						}
						if !slices.Equal(want.Admitted, want.Written) {
							defaulted++
							t.Logf("the API server's defaulting changes Gatekeeper's answer: gator test of the file as written answers %q", want.Written)
							return
						}
						for _, a := range c.Assertions {
							checkAssertion(t, got, a.Violations, a.Message)
						}
					})
				}
			}
		})
		if *update {
			b, err := json.MarshalIndent(answers, "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(filepath.Dir(golden), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(golden, append(b, '\n'), 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	t.Logf("gatekeeper-library: %d cases compared with gator test (%d of them defaulted by the API server into another answer), %d UPDATE reviews or referential templates judged by the suites' assertions, %d rejected by the API server before Gatekeeper; %d cases carry an inventory, synced through Gatekeeper's Config",
		compared, defaulted, judged, rejected, referential)
	if compared < 60 {
		t.Errorf("only %d cases compared with gator, want at least 60", compared)
	}
}

// cmpEmpty treats nil and empty answers alike.
var cmpEmpty = cmp.Comparer(func(a, b []string) bool {
	return slices.Equal(a, b)
})

// libraryCase is one object of a suite, written as kubectl would: into
// namespace "default" when it names none.
type libraryCase struct {
	cluster []*unstructured.Unstructured // template, constraint, namespace, old object
	write   *unstructured.Unstructured
	update  bool
	// admitted is the object the API server sends Gatekeeper's webhook
	// (admitted by the chain without Gatekeeper), written the case's file
	// with the namespace; rejected says why the server refuses it before.
	admitted, written    *unstructured.Unstructured
	rejected             string
	template, constraint string
	// serverWarnings are the API server's own warnings for the write.
	serverWarnings []string
	// referential: the template reads data.inventory.
	referential bool
}

// inventory files hold objects the case's data.inventory holds: they are
// stored in the cluster, and Gatekeeper's Config syncs their kinds.
func newLibraryCase(t *testing.T, template, constraint, object string, inventory []string) *libraryCase {
	t.Helper()
	lc := &libraryCase{template: template, constraint: constraint, cluster: readFiles(t, []string{template, constraint})}
	code, err := os.ReadFile(template)
	if err != nil {
		t.Fatal(err)
	}
	lc.referential = strings.Contains(string(code), "data.inventory")
	obj := readFiles(t, []string{object})
	if len(obj) != 1 {
		t.Fatalf("%s: %d objects, want 1", object, len(obj))
	}
	lc.write = obj[0]
	var base []*unstructured.Unstructured
	if lc.write.GetKind() == "AdmissionReview" {
		req, _, _ := unstructured.NestedMap(lc.write.Object, "request")
		if op, _ := req["operation"].(string); op != "UPDATE" {
			t.Fatalf("%s: operation %q, only UPDATE is read", object, op)
		}
		o, _, _ := unstructured.NestedMap(req, "object")
		old, ok, _ := unstructured.NestedMap(req, "oldObject")
		if !ok {
			old = o
		}
		lc.write, lc.update = &unstructured.Unstructured{Object: o}, true
		base = append(base, (&unstructured.Unstructured{Object: old}).DeepCopy())
	}
	for _, o := range append(base, lc.write) {
		r, err := builtins.ForKind(o.GroupVersionKind())
		if err != nil { // a removed API version: the server answers 404
			lc.rejected = err.Error()
			return lc
		}
		if o.GetNamespace() == "" && r.Namespaced {
			o.SetNamespace("default")
		}
	}
	var synced []any
	seen := map[string]bool{}
	for _, o := range readFiles(t, inventory) {
		if o.GetNamespace() != "" && !seen["ns/"+o.GetNamespace()] {
			seen["ns/"+o.GetNamespace()] = true
			base = append(base, namespaceObject(o.GetNamespace()))
		}
		gvk := o.GroupVersionKind()
		if !seen[gvk.String()] {
			seen[gvk.String()] = true
			synced = append(synced, map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind})
		}
		base = append(base, o)
	}
	if len(synced) > 0 {
		lc.cluster = append(lc.cluster, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "config.gatekeeper.sh/v1alpha1", "kind": "Config",
			"metadata": map[string]any{"name": "config", "namespace": "gatekeeper-system"},
			"spec":     map[string]any{"sync": map[string]any{"syncOnly": synced}},
		}})
	}
	if ns := lc.write.GetNamespace(); ns != "" && !seen["ns/"+ns] {
		base = append(base, namespaceObject(ns))
	}
	lc.cluster = append(lc.cluster, base...)
	lc.written = lc.write
	res, err := admitOnce(base, lc.request(), nil)
	if err != nil {
		lc.rejected = err.Error()
		return lc
	}
	if !res.Allowed {
		lc.rejected = res.Message
		return lc
	}
	lc.serverWarnings = res.Warnings
	lc.admitted = &unstructured.Unstructured{Object: res.Object}
	return lc
}

var builtins = func() *schema.Registry {
	r, err := schema.NewRegistry()
	if err != nil {
		panic(err)
	}
	return r
}()

// admitOnce writes write through a chain over cluster. An error is the
// API server refusing what it cannot store or serve (an old object
// invalid today, a removed API version).
func admitOnce(cluster []*unstructured.Unstructured, req admission.Request, engines []admission.PolicyEngine) (*admission.Result, error) {
	state, err := admission.NewState(cluster...)
	if err != nil {
		return nil, err
	}
	chain, err := admission.NewChain(context.Background(), state, admission.Options{Engines: engines})
	if err != nil {
		return nil, err
	}
	defer chain.Close()
	return chain.Admit(context.Background(), req)
}

// request is the case's write: a create, or for an UPDATE review the
// stored object unchanged, as the server sends it for an empty patch
// (kubectl apply of the same file).
func (lc *libraryCase) request() admission.Request {
	req := admission.Request{Object: lc.write.DeepCopy()}
	if lc.update {
		req.PatchType, req.Patch = types.MergePatchType, []byte("{}")
	}
	return req
}

// admit answers the case as Gatekeeper's validating webhook in truce's
// chain: "deny [constraint] message" and "warn [constraint] message"
// lines, sorted.
func (lc *libraryCase) admit(t *testing.T) []string {
	t.Helper()
	res, err := admitOnce(lc.cluster, lc.request(), []admission.PolicyEngine{testEngine})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Unpredictable) > 0 {
		t.Errorf("unpredictable: %q", res.Unpredictable)
	}
	var lines []string
	const prefix = `admission webhook "validation.gatekeeper.sh" denied the request: `
	if !res.Allowed {
		if !strings.HasPrefix(res.Message, prefix) {
			t.Fatalf("denied by something else than Gatekeeper: %s", res.Message)
		}
		for _, l := range strings.Split(strings.TrimPrefix(res.Message, prefix), "\n") {
			lines = append(lines, "deny "+l)
		}
	}
	for _, w := range res.Warnings {
		if !slices.Contains(lc.serverWarnings, w) {
			lines = append(lines, "warn "+w)
		}
	}
	sort.Strings(lines)
	return lines
}

// gator asks gator test about obj with the case's template, constraint
// and namespace; only obj's results count (gator test reviews every object
// it reads).
func (lc *libraryCase) gator(t *testing.T, gator string, obj *unstructured.Unstructured) []string {
	t.Helper()
	dir := t.TempDir()
	files := []string{lc.template, lc.constraint}
	write := func(name string, o *unstructured.Unstructured) {
		b, err := yaml.Marshal(o.Object)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		files = append(files, p)
	}
	if ns := obj.GetNamespace(); ns != "" {
		write("namespace.yaml", namespaceObject(ns))
	}
	write("object.yaml", obj)
	lines := runGator(t, gator, files)[obj.GetKind()+"/"+obj.GetName()]
	sort.Strings(lines)
	return lines
}

func namespaceObject(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": name},
	}}
}

// checkAssertion is gator verify's assertion on the case's results: how
// many violations ("yes" at least one, "no" none, or a count), of those
// whose message matches Message when it is set.
func checkAssertion(t *testing.T, lines []string, violations any, message *string) {
	t.Helper()
	n := 0
	for _, l := range lines {
		if message != nil {
			re, err := regexp.Compile(*message)
			if err != nil {
				t.Fatalf("assertion message %q: %v", *message, err)
			}
			// "deny [constraint] message": gator verify matches the message.
			if _, msg, _ := strings.Cut(l, "] "); !re.MatchString(msg) {
				continue
			}
		}
		n++
	}
	what := fmt.Sprint(violations)
	switch v := violations.(type) {
	case string:
		switch v {
		case "yes":
			if n == 0 {
				t.Errorf("the suite expects violations (message %v); truce answers %q", deref(message), lines)
			}
			return
		case "no":
			if n != 0 {
				t.Errorf("the suite expects no violations (message %v); truce answers %q", deref(message), lines)
			}
			return
		}
		c, err := strconv.Atoi(v)
		if err != nil {
			t.Fatalf("assertion violations %q", v)
		}
		what = strconv.Itoa(c)
	case bool: // YAML 1.1's yes and no
		if v && n == 0 {
			t.Errorf("the suite expects violations (message %v); truce answers %q", deref(message), lines)
		}
		if !v && n != 0 {
			t.Errorf("the suite expects no violations (message %v); truce answers %q", deref(message), lines)
		}
		return
	case float64:
		what = strconv.Itoa(int(v))
	case nil:
		if n == 0 {
			t.Errorf("the suite expects violations; truce answers %q", lines)
		}
		return
	}
	if strconv.Itoa(n) != what {
		t.Errorf("the suite expects %s violations (message %v); truce answers %d: %q", what, deref(message), n, lines)
	}
}

func deref(s *string) string {
	if s == nil {
		return "any"
	}
	return strconv.Quote(*s)
}
