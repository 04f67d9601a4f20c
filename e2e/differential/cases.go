// Package differential runs a corpus of admission cases through a real
// kube-apiserver (e2e/apiserver) and through `truce admit`, and reports every
// difference. The runner itself is differential_test.go (build tag e2e);
// this package's untagged files hold what needs no server: loading cases,
// truce's JSON contract, normalization and comparison. See e2e/README.md.
package differential

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/e2e/apiserver"
)

// Files of a case directory.
const (
	ClusterFile = "cluster.yaml"
	WriteFile   = "write.yaml"
	SpecFile    = "case.yaml"
)

// Case is one directory e2e/testdata/cases/<area>/<name>/.
type Case struct {
	Area, Name string
	// Dir is the case directory.
	Dir  string
	Spec Spec
	// Cluster holds the objects of cluster.yaml (none if the file is
	// absent), created before the write.
	Cluster []Doc
	// Write is the single object of write.yaml.
	Write Doc
}

// ID is "area/name", the subtest name.
func (c *Case) ID() string { return c.Area + "/" + c.Name }

// HasCluster reports whether the case has a cluster.yaml.
func (c *Case) HasCluster() bool {
	_, err := os.Stat(filepath.Join(c.Dir, ClusterFile))
	return err == nil
}

// Doc is one YAML document of a case file.
type Doc struct {
	// Source is "file:line" of the document's first line of content, as
	// truce reports it (file relative to the case directory).
	Source string
	Object *unstructured.Unstructured
}

// Spec is case.yaml. Every field is optional.
type Spec struct {
	Description string `json:"description,omitempty"`
	// User and Groups: the write is sent as this user (impersonation)
	// and truce is run with --user/--group. The server authorizes the
	// impersonated user with RBAC, so cluster.yaml must grant it the
	// write (or put it in group system:masters); the server adds
	// system:authenticated to its groups.
	User   string   `json:"user,omitempty"`
	Groups []string `json:"groups,omitempty"`
	// DisabledPlugins are disabled in addition to
	// apiserver.DefaultDisabledAdmissionPlugins, on the server (a separate
	// shared server per distinct set) and in truce.
	DisabledPlugins []string `json:"disabledPlugins,omitempty"`
	// FieldValidation is sent to the server as fieldValidation and to
	// truce as --field-validation: Strict (the default, as in kubectl
	// and truce), Warn (the API's own default) or Ignore.
	FieldValidation string `json:"fieldValidation,omitempty"`
	// CompareAuditAnnotations also compares the admission audit
	// annotations (see CompareOptions).
	CompareAuditAnnotations bool `json:"compareAuditAnnotations,omitempty"`
	// UnpredictableWebhooks names webhooks the server cannot reach (a
	// service with no endpoint: the webhook is down). The server's error
	// message carries its own dial error, which truce cannot reproduce, so
	// for such a case the denial message is not compared (allowed, code,
	// reason, warnings, object and audit annotations still are), and truce
	// must report each of these webhooks as unpredictable. Without it,
	// truce must report no webhook as unpredictable.
	UnpredictableWebhooks []string `json:"unpredictableWebhooks,omitempty"`
	// Verb is the kubectl command the write is made as, truce admit's
	// verb flags: replace (the default: kubectl create, or kubectl
	// replace of an object cluster.yaml holds), apply (client-side),
	// server-side, patch, delete, scale or exec (write.yaml then names the
	// pod).
	Verb string `json:"verb,omitempty"`
	// FieldManager and ForceConflicts are server-side apply's flags.
	FieldManager   string `json:"fieldManager,omitempty"`
	ForceConflicts bool   `json:"forceConflicts,omitempty"`
	// Patch and PatchType are kubectl patch's -p and --type.
	Patch     string `json:"patch,omitempty"`
	PatchType string `json:"patchType,omitempty"`
	// Replicas is kubectl scale's --replicas.
	Replicas int32 `json:"replicas,omitempty"`
	// Container and Command are kubectl exec's.
	Container string   `json:"container,omitempty"`
	Command   []string `json:"command,omitempty"`
	// Skip, if set, skips the case with this reason.
	Skip string `json:"skip,omitempty"`
	// Expect states what the real server must answer, so a case that
	// silently stopped testing what it claims (a policy that never
	// matches, a typo in a selector) fails even in server-only mode.
	Expect *Expect `json:"expect,omitempty"`
}

// Expect is checked against the server's result.
type Expect struct {
	Allowed   *bool  `json:"allowed,omitempty"`
	Operation string `json:"operation,omitempty"`
	Code      int32  `json:"code,omitempty"`
	Reason    string `json:"reason,omitempty"`
	// MessageContains: each string must occur in the denial message.
	MessageContains []string `json:"messageContains,omitempty"`
	// WarningsContain: each string must occur in some warning.
	WarningsContain []string `json:"warningsContain,omitempty"`
	// NoWarnings: the server must answer without warnings.
	NoWarnings bool `json:"noWarnings,omitempty"`
	// Object must be a subset of the stored object: maps are matched key
	// by key, lists element by element (same length), scalars exactly.
	Object map[string]any `json:"object,omitempty"`
	// AuditAnnotations must be a subset of the audit annotations.
	AuditAnnotations map[string]string `json:"auditAnnotations,omitempty"`
}

// DisabledPlugins returns the complete, sorted, de-duplicated set of
// admission plugins disabled for c, as given to the server and to truce.
func (c *Case) DisabledPlugins() []string {
	set := map[string]bool{}
	for _, p := range apiserver.DefaultDisabledAdmissionPlugins {
		set[p] = true
	}
	for _, p := range c.Spec.DisabledPlugins {
		set[p] = true
	}
	out := make([]string, 0, len(set))
	for p := range set {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}

// LoadCases loads every case under root (root/<area>/<name>/write.yaml),
// sorted by area and name.
func LoadCases(root string) ([]*Case, error) {
	writes, err := filepath.Glob(filepath.Join(root, "*", "*", WriteFile))
	if err != nil {
		return nil, err
	}
	if len(writes) == 0 {
		return nil, fmt.Errorf("no cases (*/*/%s) under %s", WriteFile, root)
	}
	sort.Strings(writes)
	var cases []*Case
	var errs []error
	for _, w := range writes {
		c, err := LoadCase(filepath.Dir(w))
		if err != nil {
			errs = append(errs, err)
			continue
		}
		cases = append(cases, c)
	}
	return cases, errors.Join(errs...)
}

// LoadCase loads one case directory.
func LoadCase(dir string) (*Case, error) {
	c := &Case{
		Area: filepath.Base(filepath.Dir(dir)),
		Name: filepath.Base(dir),
		Dir:  dir,
	}
	fail := func(err error) (*Case, error) { return nil, fmt.Errorf("case %s: %w", c.ID(), err) }

	if data, err := os.ReadFile(filepath.Join(dir, SpecFile)); err == nil {
		// Strict: a misspelt key in case.yaml must not silently do nothing.
		if err := yaml.UnmarshalStrict(data, &c.Spec); err != nil {
			return fail(fmt.Errorf("%s: %w", SpecFile, err))
		}
	} else if !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}

	cluster, err := ParseFile(filepath.Join(dir, ClusterFile), ClusterFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return fail(err)
	}
	c.Cluster = cluster

	writes, err := ParseFile(filepath.Join(dir, WriteFile), WriteFile)
	if err != nil {
		return fail(err)
	}
	if len(writes) != 1 {
		return fail(fmt.Errorf("%s must hold exactly one object, has %d", WriteFile, len(writes)))
	}
	c.Write = writes[0]
	switch c.Spec.Verb {
	case "":
		c.Spec.Verb = "replace"
	case "replace", "apply", "server-side", "patch", "delete", "scale", "exec":
	default:
		return fail(fmt.Errorf("%s: unknown verb %q", SpecFile, c.Spec.Verb))
	}
	switch c.Spec.FieldValidation {
	case "":
		c.Spec.FieldValidation = "Strict"
	case "Strict", "Warn", "Ignore":
	default:
		return fail(fmt.Errorf("%s: fieldValidation must be Strict, Warn or Ignore, not %q", SpecFile, c.Spec.FieldValidation))
	}
	return c, nil
}

// ParseFile parses a multi-document YAML file into objects, skipping empty
// documents. name is the file name used in Doc.Source.
func ParseFile(path, name string) ([]Doc, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return ParseDocs(data, name)
}

// ParseDocs splits YAML on "---" lines and decodes each non-empty document
// into an object with apiVersion and kind.
func ParseDocs(data []byte, name string) ([]Doc, error) {
	var docs []Doc
	var buf bytes.Buffer
	start := 0 // line of the first content line of the current document
	flush := func() error {
		defer buf.Reset()
		if start == 0 {
			return nil // only blank lines and comments
		}
		src := fmt.Sprintf("%s:%d", name, start)
		obj := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(buf.Bytes(), &obj.Object); err != nil {
			return fmt.Errorf("%s: %w", src, err)
		}
		if obj.Object == nil {
			return nil
		}
		if obj.GetAPIVersion() == "" || obj.GetKind() == "" {
			return fmt.Errorf("%s: object without apiVersion or kind", src)
		}
		docs = append(docs, Doc{Source: src, Object: obj})
		return nil
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), 16*1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimRight(line, " \t") == "---" || strings.HasPrefix(line, "--- ") {
			if err := flush(); err != nil {
				return nil, err
			}
			start = 0
			continue
		}
		if t := strings.TrimSpace(line); start == 0 && t != "" && !strings.HasPrefix(t, "#") {
			start = n
		}
		buf.WriteString(line)
		buf.WriteByte('\n')
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return docs, nil
}

// Identity of an object for deciding CREATE versus UPDATE.
type identity struct {
	group, kind, namespace, name string
}

// WriteOperation decides whether the write is an UPDATE (an object with the
// same group, kind, namespace and name is in cluster.yaml) or a CREATE.
// namespaced tells whether a kind is namespaced: namespaced objects without
// a namespace are in "default".
func (c *Case) WriteOperation(namespaced func(schema.GroupVersionKind) (bool, error)) (apiserver.Operation, error) {
	id := func(obj *unstructured.Unstructured) (identity, error) {
		gvk := obj.GroupVersionKind()
		ns := ""
		isNS, err := namespaced(gvk)
		if err != nil {
			return identity{}, err
		}
		if isNS {
			ns = obj.GetNamespace()
			if ns == "" {
				ns = "default"
			}
		}
		return identity{gvk.Group, gvk.Kind, ns, obj.GetName()}, nil
	}
	want, err := id(c.Write.Object)
	if err != nil {
		return "", err
	}
	for _, d := range c.Cluster {
		if g := d.Object.GroupVersionKind(); g.Group != want.group || g.Kind != want.kind || d.Object.GetName() != want.name {
			continue
		}
		got, err := id(d.Object)
		if err != nil {
			return "", err
		}
		if got == want {
			return apiserver.Update, nil
		}
	}
	return apiserver.Create, nil
}

// Placeholder syntax in cluster.yaml and write.yaml: {{NAME}}, replaced by
// Expand.
const placeholderOpen = "{{"

// HasPlaceholders reports whether cluster.yaml or write.yaml use {{...}}.
func (c *Case) HasPlaceholders() (bool, error) {
	for _, f := range []string{ClusterFile, WriteFile} {
		data, err := os.ReadFile(filepath.Join(c.Dir, f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return false, err
		}
		if bytes.Contains(data, []byte(placeholderOpen)) {
			return true, nil
		}
	}
	return false, nil
}

// Expand returns the case with the placeholders {{NAME}} of cluster.yaml
// and write.yaml replaced by vars[NAME], written to dir (with case.yaml), so
// that truce can read the expanded files there; Area, Name and Spec are
// kept. A placeholder not in vars is an error.
func (c *Case) Expand(vars map[string]string, dir string) (*Case, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	pairs := make([]string, 0, 2*len(vars))
	for k, v := range vars {
		pairs = append(pairs, placeholderOpen+k+"}}", v)
	}
	repl := strings.NewReplacer(pairs...)
	for _, f := range []string{ClusterFile, WriteFile, SpecFile} {
		data, err := os.ReadFile(filepath.Join(c.Dir, f))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if f != SpecFile {
			data = []byte(repl.Replace(string(data)))
			if i := bytes.Index(data, []byte(placeholderOpen)); i >= 0 {
				end := min(len(data), i+40)
				return nil, fmt.Errorf("case %s: %s: unknown placeholder at %q", c.ID(), f, data[i:end])
			}
		}
		if err := os.WriteFile(filepath.Join(dir, f), data, 0o644); err != nil {
			return nil, err
		}
	}
	out, err := LoadCase(dir)
	if err != nil {
		return nil, err
	}
	out.Area, out.Name, out.Spec = c.Area, c.Name, c.Spec
	return out, nil
}
