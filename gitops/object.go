package gitops

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
)

// Object is a decoded manifest and where it came from.
type Object struct {
	// Source names where the object came from ("file:line"), for callers
	// that have no Position; it is read only when Position is zero.
	Source string
	// Position is the file and line the object starts on.
	Position manifest.Source
	*unstructured.Unstructured
}

// ObjectOf is a loaded manifest as Discover takes it.
func ObjectOf(m manifest.Object) Object {
	return Object{Position: m.Source, Unstructured: m.Object}
}

// where is the object's position: Position, or Source as a name.
func (o Object) where() manifest.Source {
	if o.Position != (manifest.Source{}) {
		return o.Position
	}
	return manifest.Source{File: o.Source}
}

// Warning is a setting the tool accepts but that does not do what it
// seems to.
type Warning struct {
	Source  manifest.Source // the object's file and line
	Field   string          // the setting, e.g. spec.syncPolicy.syncOptions[1]
	Message string
}

func (w Warning) String() string { return w.Source.String() + ": " + w.Field + ": " + w.Message }

// Settings is everything Discover found.
type Settings struct {
	Applications   []*ArgoApplication
	Kustomizations []*FluxKustomization
	HelmReleases   []*FluxHelmRelease
	// ArgoConfig is read from argocd-cm and argocd-cmd-params-cm. When the
	// objects do not include them it holds Argo CD's defaults, with an
	// empty Source.
	ArgoConfig *ArgoConfig
	// ResourceRules are the argocd.argoproj.io/ignore-differences
	// annotations of ordinary manifests, each a rule for that resource.
	ResourceRules []ignore.Rule
	Warnings      []Warning
}

// IsSettings reports whether Discover reads o as GitOps settings (an
// Application, a Flux Kustomization or HelmRelease, argocd-cm or
// argocd-cmd-params-cm) rather than as a manifest.
func IsSettings(o Object) bool {
	if o.Unstructured == nil {
		return false
	}
	gvk := o.GroupVersionKind()
	switch {
	case gvk.Group == "argoproj.io" && gvk.Kind == "Application",
		gvk.Group == "kustomize.toolkit.fluxcd.io" && gvk.Kind == "Kustomization",
		gvk.Group == "helm.toolkit.fluxcd.io" && gvk.Kind == "HelmRelease",
		gvk.Group == "" && gvk.Kind == "ConfigMap" && (o.GetName() == argoCMName || o.GetName() == argoParamsCMName):
		return true
	}
	return false
}

// Discover separates the GitOps settings in objs from the ordinary
// manifests, which it returns in their original order. Applications,
// Kustomizations, argocd-cm and argocd-cmd-params-cm are settings; every
// other object is a manifest (its ignore-differences annotation, if any,
// becomes a rule in Settings.ResourceRules). All invalid settings are
// reported together.
func Discover(objs []Object) (*Settings, []Object, error) {
	s := &Settings{}
	var rest []Object
	var errs []error
	var cm, params *Object
	for i := range objs {
		o := objs[i]
		if o.Unstructured == nil {
			errs = append(errs, fmt.Errorf("%s: empty object", o.where()))
			continue
		}
		gvk := o.GroupVersionKind()
		switch {
		case gvk.Group == "argoproj.io" && gvk.Kind == "Application":
			app, warns, err := ParseArgoApplication(o)
			s.Warnings = append(s.Warnings, warns...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			s.Applications = append(s.Applications, app)
		case gvk.Group == "kustomize.toolkit.fluxcd.io" && gvk.Kind == "Kustomization":
			k, warns, err := ParseFluxKustomization(o)
			s.Warnings = append(s.Warnings, warns...)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			s.Kustomizations = append(s.Kustomizations, k)
		case gvk.Group == "helm.toolkit.fluxcd.io" && gvk.Kind == "HelmRelease":
			h, err := ParseFluxHelmRelease(o)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			s.HelmReleases = append(s.HelmReleases, h)
		case gvk.Group == "" && gvk.Kind == "ConfigMap" && o.GetName() == argoCMName:
			if cm != nil {
				errs = append(errs, fmt.Errorf("%s: a second %s ConfigMap (the first is at %s); truce reads one Argo CD instance per run", o.where(), argoCMName, cm.where()))
				continue
			}
			cm = &objs[i]
		case gvk.Group == "" && gvk.Kind == "ConfigMap" && o.GetName() == argoParamsCMName:
			if params != nil {
				errs = append(errs, fmt.Errorf("%s: a second %s ConfigMap (the first is at %s); truce reads one Argo CD instance per run", o.where(), argoParamsCMName, params.where()))
				continue
			}
			params = &objs[i]
		default:
			rules, err := ResourceIgnoreDifferences(o)
			if err != nil {
				errs = append(errs, err)
			}
			s.ResourceRules = append(s.ResourceRules, rules...)
			rest = append(rest, o)
		}
	}
	cfg, warns, err := ParseArgoConfig(cm, params)
	s.Warnings = append(s.Warnings, warns...)
	if err != nil {
		errs = append(errs, err)
	}
	s.ArgoConfig = cfg
	for _, app := range s.Applications {
		if cfg != nil && app.CompareOptions.IncludeMutationWebhook && !app.ServerSideDiff(cfg) {
			s.Warnings = append(s.Warnings, Warning{Source: app.Source, Field: "metadata.annotations[" + AnnotationCompareOptions + "]",
				Message: "IncludeMutationWebhook=true has no effect without server-side diff (add ServerSideDiff=true, or controller.diff.server.side: \"true\" in argocd-cmd-params-cm)"})
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, nil, err
	}
	return s, rest, nil
}

// fieldError is an invalid setting: file:line, field, problem.
func fieldError(source, field string, err error) error {
	return fmt.Errorf("%s: %s: %w", source, field, err)
}

// ruleErrors validates rules and reports each problem with its source.
func ruleErrors(rules []ignore.Rule) error {
	var errs []error
	for i := range rules {
		if err := rules[i].Validate(); err != nil {
			for _, e := range splitJoined(err) {
				errs = append(errs, fieldError(rules[i].Source, rules[i].Field, e))
			}
		}
	}
	return errors.Join(errs...)
}

func splitJoined(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// reader pulls typed values out of an object and names the field in errors.
type reader struct {
	source string
	errs   []error
}

func (r *reader) fail(field string, format string, args ...any) {
	r.errs = append(r.errs, fieldError(r.source, field, fmt.Errorf(format, args...)))
}

func (r *reader) err() error { return errors.Join(r.errs...) }

func typeName(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case int64, float64, int:
		return "a number"
	case []any:
		return "a list"
	case map[string]any:
		return "a map"
	}
	return fmt.Sprintf("%T", v)
}

func get(m map[string]any, path ...string) (any, bool) {
	var cur any = m
	for _, p := range path {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

func (r *reader) str(m map[string]any, field string, path ...string) string {
	v, ok := get(m, path...)
	if !ok || v == nil {
		return ""
	}
	s, ok := v.(string)
	if !ok {
		r.fail(field, "want a string, got %s", typeName(v))
	}
	return s
}

func (r *reader) boolean(m map[string]any, field string, path ...string) bool {
	v, ok := get(m, path...)
	if !ok || v == nil {
		return false
	}
	b, ok := v.(bool)
	if !ok {
		r.fail(field, "want true or false, got %s", typeName(v))
	}
	return b
}

func (r *reader) strings(m map[string]any, field string, path ...string) []string {
	v, ok := get(m, path...)
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		r.fail(field, "want a list of strings, got %s", typeName(v))
		return nil
	}
	out := make([]string, 0, len(l))
	for i, e := range l {
		s, ok := e.(string)
		if !ok {
			r.fail(fmt.Sprintf("%s[%d]", field, i), "want a string, got %s", typeName(e))
			continue
		}
		out = append(out, s)
	}
	return out
}

func (r *reader) maps(m map[string]any, field string, path ...string) []map[string]any {
	v, ok := get(m, path...)
	if !ok || v == nil {
		return nil
	}
	l, ok := v.([]any)
	if !ok {
		r.fail(field, "want a list, got %s", typeName(v))
		return nil
	}
	out := make([]map[string]any, len(l))
	for i, e := range l {
		mm, ok := e.(map[string]any)
		if !ok {
			r.fail(fmt.Sprintf("%s[%d]", field, i), "want a map, got %s", typeName(e))
			continue
		}
		out[i] = mm
	}
	return out
}

func (r *reader) object(m map[string]any, field string, path ...string) map[string]any {
	v, ok := get(m, path...)
	if !ok || v == nil {
		return nil
	}
	mm, ok := v.(map[string]any)
	if !ok {
		r.fail(field, "want a map, got %s", typeName(v))
	}
	return mm
}
