package lint

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
)

// Rule ids of the Argo CD rules.
const (
	RuleArgoPointerUnescapedSlash   = "argocd-json-pointer-unescaped-slash"
	RuleArgoPointerListIndex        = "argocd-json-pointer-list-index"
	RuleArgoIgnoreWithoutRespect    = "argocd-ignore-differences-not-respected"
	RuleArgoLabelTrackingCopyLabels = "argocd-label-tracking-with-label-copies"
)

func argoRules() []Rule {
	return []Rule{
		{ID: RuleArgoPointerUnescapedSlash, Severity: SeverityWarning,
			Summary: "An Argo CD ignoreDifferences JSON pointer with an unescaped \"/\" inside a label or annotation key",
			Check:   checkPointerUnescapedSlash},
		{ID: RuleArgoPointerListIndex, Severity: SeverityWarning,
			Summary: "An Argo CD ignoreDifferences JSON pointer into a list item by index",
			Check:   checkPointerListIndex},
		{ID: RuleArgoIgnoreWithoutRespect, Severity: SeverityWarning,
			Summary: "An Argo CD Application with ignoreDifferences and self-heal but without RespectIgnoreDifferences=true",
			Check:   checkIgnoreWithoutRespect},
		{ID: RuleArgoLabelTrackingCopyLabels, Severity: SeverityWarning,
			Summary: "Argo CD label tracking while Kyverno generates resources that copy labels",
			Check:   checkLabelTrackingWithCopies},
		{ID: RuleArgoInstallsKyverno, Severity: SeverityWarning,
			Summary: "An Argo CD Application installs Kyverno's Helm chart with settings Kyverno's Argo CD notes warn against",
			Check:   checkArgoInstallsKyverno},
	}
}

// argoApplications parses the Argo CD Applications of the input the way
// the rest of truce reads them.
func argoApplications(in *Input) ([]*gitops.ArgoApplication, []manifest.Object, error) {
	var apps []*gitops.ArgoApplication
	var objs []manifest.Object
	for _, o := range in.Objects {
		if !isKind(o, "argoproj.io", "Application") {
			continue
		}
		app, _, err := gitops.ParseArgoApplication(gitops.Object{Source: where(o), Unstructured: o.Object})
		if err != nil {
			return nil, nil, err
		}
		apps = append(apps, app)
		objs = append(objs, o)
	}
	return apps, objs, nil
}

// argoConfigs parses every argocd-cm ConfigMap of the input.
func argoConfigs(in *Input) ([]*gitops.ArgoConfig, []manifest.Object, error) {
	var cfgs []*gitops.ArgoConfig
	var objs []manifest.Object
	for _, o := range in.Objects {
		if !isKind(o, "", "ConfigMap") || o.Object.GetName() != "argocd-cm" {
			continue
		}
		cfg, _, err := gitops.ParseArgoConfig(&gitops.Object{Source: where(o), Unstructured: o.Object}, nil)
		if err != nil {
			return nil, nil, err
		}
		cfgs = append(cfgs, cfg)
		objs = append(objs, o)
	}
	return cfgs, objs, nil
}

// pointerEntry is one jsonPointers entry: where it is written and the
// resources it applies to.
type pointerEntry struct {
	obj     manifest.Object
	field   string // e.g. spec.ignoreDifferences[0].jsonPointers[1]
	pointer string
	target  ignore.Target
}

// pointerEntries lists the jsonPointers of every Application's
// ignoreDifferences and of argocd-cm's resource.customizations.
func pointerEntries(in *Input) ([]pointerEntry, error) {
	apps, appObjs, err := argoApplications(in)
	if err != nil {
		return nil, err
	}
	var out []pointerEntry
	for i, app := range apps {
		for j, d := range app.IgnoreDifferences {
			for k, p := range d.JSONPointers {
				out = append(out, pointerEntry{
					obj: appObjs[i], field: fmt.Sprintf("spec.ignoreDifferences[%d].jsonPointers[%d]", j, k), pointer: p,
					target: ignore.Target{Group: d.Group, Kind: d.Kind, Name: d.Name, Namespace: d.Namespace},
				})
			}
		}
	}
	cfgs, cfgObjs, err := argoConfigs(in)
	if err != nil {
		return nil, err
	}
	for i, cfg := range cfgs {
		for _, o := range cfg.Overrides {
			group, kind, _ := strings.Cut(o.Key, "/")
			if kind == "" {
				group, kind = "", group // a core kind: "Service"
			}
			for k, p := range o.JSONPointers {
				out = append(out, pointerEntry{
					obj: cfgObjs[i], field: fmt.Sprintf("%s.jsonPointers[%d]", o.Field, k), pointer: p,
					target: ignore.Target{Group: group, Kind: kind},
				})
			}
		}
	}
	return out, nil
}

// targets returns the objects of the input an ignore rule applies to, by
// exact group, kind, name and namespace (Argo CD's globs are rare in
// practice and only used here to find names for a fix).
func targets(in *Input, t ignore.Target) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range in.Objects {
		gvk := o.Object.GroupVersionKind()
		if (t.Group != "*" && gvk.Group != t.Group) || (t.Kind != "*" && gvk.Kind != t.Kind) ||
			(t.Name != "" && o.Object.GetName() != t.Name) || (t.Namespace != "" && o.Object.GetNamespace() != t.Namespace) {
			continue
		}
		out = append(out, o.Object)
	}
	return out
}

// labelMaps are the maps whose keys are label or annotation keys, which
// routinely contain "/".
var labelMaps = map[string]bool{"labels": true, "annotations": true}

// unescapedSlash reports whether tokens look like a pointer to a label or
// annotation key whose "/" was not written "~1": more than one token after
// metadata.labels or metadata.annotations (at any depth, e.g. a pod
// template's). It returns the tokens as meant: the rest joined into one key.
func unescapedSlash(tokens []string) ([]string, bool) {
	for i := 1; i < len(tokens); i++ {
		if tokens[i-1] == "metadata" && labelMaps[tokens[i]] && len(tokens) > i+2 {
			fixed := append(append([]string{}, tokens[:i+1]...), strings.Join(tokens[i+1:], "/"))
			return fixed, true
		}
	}
	return nil, false
}

// isIndex reports whether a token is a JSON pointer array index.
func isIndex(t string) bool {
	n, err := strconv.Atoi(t)
	return err == nil && n >= 0 && strconv.Itoa(n) == t
}

// listIndexes returns the positions of the tokens that index a list (see
// isListIndex).
func listIndexes(tokens []string, objs []*unstructured.Unstructured) []int {
	var out []int
	for i := range tokens {
		if isListIndex(tokens, i, objs) {
			out = append(out, i)
		}
	}
	return out
}

// isListIndex reports whether tokens[i] indexes a list: as the target
// objects have it when they have the path, else for any array-index token
// that is not a label or annotation key.
func isListIndex(tokens []string, i int, objs []*unstructured.Unstructured) bool {
	if i == 0 || !isIndex(tokens[i]) {
		return false
	}
	for _, o := range objs {
		if v, ok := walk(o.Object, tokens[:i]); ok {
			_, isList := v.([]any)
			return isList
		}
	}
	return !labelMaps[tokens[i-1]]
}

// walk follows tokens from v.
func walk(v any, tokens []string) (any, bool) {
	for _, t := range tokens {
		switch c := v.(type) {
		case map[string]any:
			next, ok := c[t]
			if !ok {
				return nil, false
			}
			v = next
		case []any:
			if !isIndex(t) {
				return nil, false
			}
			n, _ := strconv.Atoi(t)
			if n >= len(c) {
				return nil, false
			}
			v = c[n]
		default:
			return nil, false
		}
	}
	return v, true
}

// namedLists are lists of the built-in kinds whose items have a unique
// name, so that a jq path can select an item by it.
var namedLists = map[string]bool{
	"containers": true, "initContainers": true, "ephemeralContainers": true, "volumes": true,
	"volumeMounts": true, "env": true, "ports": true, "imagePullSecrets": true, "volumeDevices": true,
}

var jqIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// jqPath writes tokens as an Argo CD jqPathExpressions entry that selects
// list items by their name: the name the target objects have at that
// index, else, in a list of named items, a NAME placeholder (placeholder is
// then true), else the index.
func jqPath(tokens []string, objs []*unstructured.Unstructured) (expr string, placeholder bool) {
	var b strings.Builder
	afterSelect := false
	for i, t := range tokens {
		if afterSelect {
			b.WriteString(" | ")
		}
		if !isListIndex(tokens, i, objs) {
			switch {
			case jqIdent.MatchString(t):
				b.WriteString("." + t)
			case i == 0 || afterSelect:
				b.WriteString(".[" + strconv.Quote(t) + "]")
			default:
				b.WriteString("[" + strconv.Quote(t) + "]")
			}
			afterSelect = false
			continue
		}
		name, ok := itemName(objs, tokens[:i+1])
		switch {
		case ok:
			b.WriteString("[] | select(.name == " + strconv.Quote(name) + ")")
			afterSelect = true
		case namedLists[tokens[i-1]]:
			b.WriteString(`[] | select(.name == "NAME")`)
			afterSelect, placeholder = true, true
		default:
			b.WriteString("[" + t + "]")
			afterSelect = false
		}
	}
	return b.String(), placeholder
}

// itemName returns the name of the list item at path, when every target
// object that has the item agrees on it.
func itemName(objs []*unstructured.Unstructured, path []string) (string, bool) {
	name := ""
	for _, o := range objs {
		v, ok := walk(o.Object, path)
		if !ok {
			continue
		}
		m, _ := v.(map[string]any)
		n, _ := m["name"].(string)
		if n == "" || (name != "" && n != name) {
			return "", false
		}
		name = n
	}
	return name, name != ""
}

const (
	whyUnescapedSlash = "In a JSON pointer \"/\" separates tokens, so /metadata/annotations/example.com/foo points at a key \"example.com\" " +
		"holding a key \"foo\", which does not exist: the entry ignores nothing and the field keeps showing as drift."
	fixUnescapedSlash = "Write \"/\" inside a key as \"~1\": %s (or as jqPathExpressions: %s)."
)

func checkPointerUnescapedSlash(_ context.Context, in *Input) ([]Finding, error) {
	entries, err := pointerEntries(in)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, e := range entries {
		tokens, err := ignore.ParsePointer(e.pointer)
		if err != nil {
			continue // gitops has rejected it already; not reached
		}
		fixed, ok := unescapedSlash(tokens)
		if !ok {
			continue
		}
		key := fixed[len(fixed)-1]
		msg := fmt.Sprintf("%s %q: %q looks like one key with an unescaped \"/\"", e.field, e.pointer, key)
		jq, _ := jqPath(fixed, nil)
		f := finding(e.obj, msg, whyUnescapedSlash, fmt.Sprintf(fixUnescapedSlash, ignore.FormatPointer(fixed), jq))
		f.Pointer = e.pointer
		out = append(out, f)
	}
	return out, nil
}

const (
	whyListIndex = "A pointer to a list item by position breaks as soon as the list changes order or an admission webhook injects an item " +
		"in front (a sidecar at containers[0]): the entry then hides a different field, or nothing, and real drift of the item meant stays " +
		"visible or gets hidden. Argo CD's jqPathExpressions select a list item by its content " +
		"(https://argo-cd.readthedocs.io/en/stable/user-guide/diffing/)."
	fixListIndex = "Select the item by its name with jqPathExpressions instead: %s"
)

func checkPointerListIndex(_ context.Context, in *Input) ([]Finding, error) {
	entries, err := pointerEntries(in)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for _, e := range entries {
		tokens, err := ignore.ParsePointer(e.pointer)
		if err != nil {
			continue
		}
		if _, slash := unescapedSlash(tokens); slash {
			continue // the other rule's business
		}
		objs := targets(in, e.target)
		idx := listIndexes(tokens, objs)
		if len(idx) == 0 {
			continue
		}
		msg := fmt.Sprintf("%s %q selects a list item by index (%s)", e.field, e.pointer, ignore.FormatPointer(tokens[:idx[0]+1]))
		jq, placeholder := jqPath(tokens, objs)
		fix := fmt.Sprintf(fixListIndex, jq)
		if placeholder {
			fix += " (replace NAME with the item's name)"
		}
		f := finding(e.obj, msg, whyListIndex, fix)
		f.Pointer = e.pointer
		out = append(out, f)
	}
	return out, nil
}

const (
	whyIgnoreWithoutRespect = "ignoreDifferences only changes the diff. Every sync still applies the Git value of the ignored fields, and " +
		"whoever changed them (admission, a controller) changes them back: with self-heal the write fight goes on, merely hidden from the " +
		"Application's status."
	fixIgnoreWithoutRespect = "Add RespectIgnoreDifferences=true to spec.syncPolicy.syncOptions, so that syncs leave the ignored fields " +
		"alone (it takes effect once the resource exists; creation applies the manifest as is)."
)

func checkIgnoreWithoutRespect(_ context.Context, in *Input) ([]Finding, error) {
	apps, objs, err := argoApplications(in)
	if err != nil {
		return nil, err
	}
	var out []Finding
	for i, app := range apps {
		a := app.Automated
		if a == nil || !a.Enabled || !a.SelfHeal || len(app.IgnoreDifferences) == 0 || app.SyncOptions.RespectIgnoreDifferences {
			continue
		}
		msg := fmt.Sprintf("Application %q has %d ignoreDifferences entries and selfHeal, but no RespectIgnoreDifferences=true in syncPolicy.syncOptions",
			app.Name, len(app.IgnoreDifferences))
		out = append(out, finding(objs[i], msg, whyIgnoreWithoutRespect, fixIgnoreWithoutRespect))
	}
	return out, nil
}

const (
	whyLabelTracking = "With label tracking Argo CD takes every object carrying its instance label (app.kubernetes.io/instance) for part of " +
		"the Application. Resources Kyverno generates or clones copy that label, so Argo CD finds them live but not in Git: OutOfSync, and " +
		"pruned when prune is on, while Kyverno recreates them."
	fixLabelTracking = "Set application.resourceTrackingMethod: annotation in argocd-cm (the Argo CD 3.x default): a copy then carries a " +
		"tracking id that names the original, and Argo CD ignores it."
)

// checkLabelTrackingWithCopies: argocd-cm selects label tracking while a
// Kyverno policy generates resources.
func checkLabelTrackingWithCopies(_ context.Context, in *Input) ([]Finding, error) {
	cfgs, cfgObjs, err := argoConfigs(in)
	if err != nil {
		return nil, err
	}
	var labelCM []string
	for i, c := range cfgs {
		if c.TrackingMethod == gitops.TrackingLabel {
			labelCM = append(labelCM, where(cfgObjs[i]))
		}
	}
	if len(labelCM) == 0 {
		return nil, nil
	}
	var out []Finding
	for _, o := range in.Objects {
		what := kyvernoGenerates(o)
		if what == "" {
			continue
		}
		msg := fmt.Sprintf("%s while Argo CD tracks resources by label (application.resourceTrackingMethod: label in argocd-cm at %s)",
			what, strings.Join(labelCM, ", "))
		out = append(out, finding(o, msg, whyLabelTracking, fixLabelTracking))
	}
	return out, nil
}

// kyvernoGenerates describes the generate rules of a Kyverno policy, or
// returns "" when o is none.
func kyvernoGenerates(o manifest.Object) string {
	gvk := o.Object.GroupVersionKind()
	switch {
	case gvk.Group == "kyverno.io" && (gvk.Kind == "ClusterPolicy" || gvk.Kind == "Policy"):
		rules, _, _ := unstructured.NestedSlice(o.Object.Object, "spec", "rules")
		var gens []string
		for i, r := range rules {
			m, _ := r.(map[string]any)
			gen, ok := m["generate"].(map[string]any)
			if !ok {
				continue
			}
			name, _ := m["name"].(string)
			desc := fmt.Sprintf("rules[%d] %q", i, name)
			if sync, _ := gen["synchronize"].(bool); sync {
				desc += " (synchronize: true)"
			}
			gens = append(gens, desc)
		}
		if len(gens) == 0 {
			return ""
		}
		return fmt.Sprintf("Kyverno %s %q generates resources in %s", gvk.Kind, o.Object.GetName(), strings.Join(gens, ", "))
	case gvk.Group == "policies.kyverno.io" && (gvk.Kind == "GeneratingPolicy" || gvk.Kind == "NamespacedGeneratingPolicy"):
		return fmt.Sprintf("Kyverno %s %q generates resources", gvk.Kind, o.Object.GetName())
	}
	return ""
}
