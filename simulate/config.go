package simulate

import (
	"errors"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/drift/ignore"
)

// The writers document: a repository declares the controllers that write
// beside the GitOps tool, in a manifest of this group and kind. truce reads
// it; it is never applied.
const (
	WritersGroup = "truce.dev"
	WritersKind  = "Writers"
)

// Writer types of the writers document.
const (
	TypeHPA                   = "HorizontalPodAutoscaler"
	TypeCAInjector            = "CAInjector"
	TypeOperator              = "Operator"
	TypeKyvernoMutateExisting = "KyvernoMutateExisting"
	TypeKyvernoGenerate       = "KyvernoGenerate"
	// TypeClusterRoleAggregation is kube-controller-manager's
	// clusterrole-aggregation controller, which every cluster runs.
	TypeClusterRoleAggregation = "ClusterRoleAggregation"
)

// IsWritersDocument reports whether obj is a writers document.
func IsWritersDocument(obj *unstructured.Unstructured) bool {
	// The kind first: parsing every manifest's apiVersion is what this
	// cost when called for each object of each candidate fix.
	if obj.GetKind() != WritersKind {
		return false
	}
	gvk := obj.GroupVersionKind()
	return gvk.Group == WritersGroup && gvk.Kind == WritersKind
}

// writerSpec is one entry of spec.writers.
type writerSpec struct {
	Type      string         `json:"type"`
	Manager   string         `json:"manager,omitempty"`
	Operation string         `json:"operation,omitempty"`
	Target    *Selector      `json:"target,omitempty"`
	Set       map[string]any `json:"set,omitempty"`
	Replicas  *int64         `json:"replicas,omitempty"`
	After     string         `json:"after,omitempty"`
	Every     string         `json:"every,omitempty"`
	// KyvernoGenerate.
	Clone       *Selector      `json:"clone,omitempty"`
	Namespaces  []string       `json:"namespaces,omitempty"`
	Data        map[string]any `json:"data,omitempty"`
	Synchronize bool           `json:"synchronize,omitempty"`
}

type writersDoc struct {
	APIVersion string         `json:"apiVersion"`
	Kind       string         `json:"kind"`
	Metadata   map[string]any `json:"metadata"`
	Spec       struct {
		// Detect turns detection from the repository's manifests off when
		// false (HPAs, cert-manager annotations).
		Detect  *bool        `json:"detect,omitempty"`
		Writers []writerSpec `json:"writers"`
	} `json:"spec"`
}

// ParseWriters reads a writers document; source is its file:line. detect
// is false when the document turns detection off.
func ParseWriters(obj *unstructured.Unstructured, source string) (writers []Writer, detect bool, err error) {
	var doc writersDoc
	if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(obj.Object, &doc, true); err != nil {
		return nil, false, fmt.Errorf("%s: %s: %w", source, WritersKind, err)
	}
	detect = doc.Spec.Detect == nil || *doc.Spec.Detect
	var errs []error
	for i, s := range doc.Spec.Writers {
		field := fmt.Sprintf("spec.writers[%d]", i)
		w, err := s.writer(source + " " + field)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %s: %w", source, field, err))
			continue
		}
		writers = append(writers, w)
	}
	return writers, detect, errors.Join(errs...)
}

func duration(s string, def time.Duration) (time.Duration, error) {
	if s == "" {
		return def, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("%q is not a duration such as 15s or 10m", s)
	}
	return d, nil
}

func (s writerSpec) writer(source string) (Writer, error) {
	after, err := duration(s.After, defaultAfter(s.Type))
	if err != nil {
		return nil, fmt.Errorf("after: %w", err)
	}
	every, err := duration(s.Every, 0)
	if err != nil {
		return nil, fmt.Errorf("every: %w", err)
	}
	if s.Operation != "" && s.Operation != "Update" && s.Operation != "Apply" {
		return nil, fmt.Errorf("operation: want Update or Apply, got %q", s.Operation)
	}
	switch s.Type {
	case TypeKyvernoGenerate:
		g := &Generator{Manager: or(s.Manager, "kyverno-background-controller"), Synchronize: s.Synchronize, After: after, Source: source}
		switch {
		case s.Clone != nil && s.Data != nil:
			return nil, errors.New("clone and data are alternatives: give one")
		case s.Clone != nil:
			if s.Clone.Kind == "" || s.Clone.Name == "" || len(s.Namespaces) == 0 {
				return nil, errors.New("clone needs kind, namespace and name, and namespaces the copies go to")
			}
			g.Clone, g.Namespaces = *s.Clone, s.Namespaces
		case s.Data != nil:
			u := &unstructured.Unstructured{Object: s.Data}
			if u.GetAPIVersion() == "" || u.GetKind() == "" || u.GetName() == "" {
				return nil, errors.New("data must be a whole object with apiVersion, kind and metadata.name")
			}
			g.Data = u
		default:
			return nil, errors.New("KyvernoGenerate needs clone (with namespaces) or data")
		}
		return g, nil
	case TypeClusterRoleAggregation:
		return &ClusterRoleAggregator{After: after, Source: source}, nil
	case TypeHPA, TypeCAInjector, TypeOperator, TypeKyvernoMutateExisting:
	default:
		return nil, fmt.Errorf("type: want one of %s, %s, %s, %s, %s or %s, got %q",
			TypeHPA, TypeCAInjector, TypeOperator, TypeKyvernoMutateExisting, TypeKyvernoGenerate, TypeClusterRoleAggregation, s.Type)
	}
	if s.Target == nil || s.Target.Kind == "" {
		return nil, errors.New("target.kind is required")
	}
	set := s.Set
	if s.Type == TypeHPA {
		if s.Replicas == nil {
			return nil, errors.New("replicas is required: the replica count the autoscaler holds")
		}
		set = map[string]any{"/spec/replicas": *s.Replicas}
	}
	if len(set) == 0 {
		return nil, errors.New("set is required: JSON pointers and the values the controller writes")
	}
	for p := range set {
		if _, err := ignore.ParsePointer(p); err != nil || p == "" {
			return nil, fmt.Errorf("set: %q is not a JSON pointer", p)
		}
	}
	return &FieldWriter{Type: s.Type, Manager: or(s.Manager, defaultManager(s.Type)), Operation: s.Operation,
		Target: *s.Target, Set: set, After: after, Every: every, Source: source}, nil
}

func or(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

func defaultManager(t string) string {
	switch t {
	case TypeHPA:
		return "kube-controller-manager"
	case TypeCAInjector:
		return "cert-manager-cainjector"
	case TypeKyvernoMutateExisting:
		return "kyverno-background-controller"
	}
	return "operator"
}

// defaultAfter is how long each kind of controller takes to react: the
// HPA's sync period is 15s; the others react to watch events at once.
func defaultAfter(t string) time.Duration {
	switch t {
	case TypeHPA:
		return 15 * time.Second
	case TypeKyvernoMutateExisting:
		return 10 * time.Second
	}
	return time.Second
}

// fakeCABundle is the CA bundle the simulated cainjector injects: a real
// self-signed certificate (the API server refuses bundles that are not),
// made for truce and valid until 2126.
const fakeCABundle = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCk1JSUJwekNDQVUyZ0F3SUJBZ0lVZW1tU1pTeU5UOUFsdmZMQjhmSDl2dmVxdUN3d0NnWUlLb1pJemowRUF3SXcKS0RFbU1DUUdBMVVFQXd3ZGRISjFZMlVnYzJsdGRXeGhkR1ZrSUdOaGFXNXFaV04wYjNJZ1EwRXdJQmNOTWpZeApNVE13TVRRek56TTVXaGdQTWpFeU5qRXhNRFl4TkRNM016bGFNQ2d4SmpBa0JnTlZCQU1NSFhSeWRXTmxJSE5wCmJYVnNZWFJsWkNCallXbHVhbVZqZEc5eUlFTkJNRmt3RXdZSEtvWkl6ajBDQVFZSUtvWkl6ajBEQVFjRFFnQUUKbDFMYXhqdUVkQnpJSTVFTUY1V2hCdmxJMzhCK0NRdHY4M2FVaVQyMTg1eVk2TXV6dzNvdE0rRjNCN0MvZHlXRApueFQ5Wks2YThJVTBhV3ZGa3NnblA2TlRNRkV3SFFZRFZSME9CQllFRlBJTnBDZHI5Y2lGMlZDWTRXVlJmUExoCmVLT2RNQjhHQTFVZEl3UVlNQmFBRlBJTnBDZHI5Y2lGMlZDWTRXVlJmUExoZUtPZE1BOEdBMVVkRXdFQi93UUYKTUFNQkFmOHdDZ1lJS29aSXpqMEVBd0lEU0FBd1JRSWhBUFRnUnJHUHMwMytFb1NjbVJWR3NvZkZSMlJuNDAvcQpCbThKOUVoOTZDOHFBaUF0ZTZ1S2NqY1dlcHZzeUNVMk01MVJIays5WnpwR0RRLzZTYjEwWUlUSy9RPT0KLS0tLS1FTkQgQ0VSVElGSUNBVEUtLS0tLQo="

// cert-manager's injection annotations.
var injectAnnotations = []string{
	"cert-manager.io/inject-ca-from",
	"cert-manager.io/inject-ca-from-secret",
	"cert-manager.io/inject-apiserver-ca",
}

// DetectWriters finds the controllers the manifests themselves imply: the
// HPA of a HorizontalPodAutoscaler (holding the replica count away from
// Git's: minReplicas, or maxReplicas when Git already says minReplicas),
// cert-manager's cainjector for objects with an injection annotation, and
// kube-controller-manager's clusterrole-aggregation controller when a
// ClusterRole has an aggregationRule.
func DetectWriters(desired []Desired) []Writer {
	var out []Writer
	aggregator := false
	for _, d := range desired {
		o := d.Object
		kind := o.GetKind()
		if !aggregator && kind == "ClusterRole" && isAggregatedClusterRole(o) {
			aggregator = true
			out = append(out, &ClusterRoleAggregator{After: defaultAfter(TypeClusterRoleAggregation),
				Source: d.Source.String() + " (detected)"})
		}
		if kind == "HorizontalPodAutoscaler" && o.GroupVersionKind().Group == "autoscaling" {
			if w := hpaWriter(d, desired); w != nil {
				out = append(out, w)
			}
		}
		switch kind {
		case "CustomResourceDefinition", "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "APIService":
			// Only the kinds caInjector writes: GetAnnotations copies,
			// and this runs for every object of each candidate fix.
			for _, a := range injectAnnotations {
				if _, ok := o.GetAnnotations()[a]; ok {
					if w := caInjector(d); w != nil {
						out = append(out, w)
					}
					break
				}
			}
		}
	}
	return out
}

func hpaWriter(d Desired, desired []Desired) Writer {
	o := d.Object.Object
	kind, _, _ := unstructured.NestedString(o, "spec", "scaleTargetRef", "kind")
	name, _, _ := unstructured.NestedString(o, "spec", "scaleTargetRef", "name")
	apiVersion, _, _ := unstructured.NestedString(o, "spec", "scaleTargetRef", "apiVersion")
	if kind == "" || name == "" {
		return nil
	}
	gv, _ := schema.ParseGroupVersion(apiVersion)
	minR, ok := intField(o, "spec", "minReplicas")
	if !ok {
		minR = 1
	}
	maxR, _ := intField(o, "spec", "maxReplicas")
	ns := d.Object.GetNamespace()
	replicas := minR
	for _, t := range desired {
		if t.Object.GetKind() == kind && t.Object.GetName() == name && t.Object.GetNamespace() == ns {
			if git, ok := intField(t.Object.Object, "spec", "replicas"); ok && git == minR && maxR > minR {
				replicas = maxR
			}
		}
	}
	return &FieldWriter{Type: TypeHPA, Manager: "kube-controller-manager",
		Target: Selector{Group: gv.Group, Kind: kind, Namespace: ns, Name: name},
		Set:    map[string]any{"/spec/replicas": replicas}, After: defaultAfter(TypeHPA),
		Source: d.Source.String() + " (detected)"}
}

// intField reads an integer however the decoder typed it.
func intField(o map[string]any, path ...string) (int64, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(o, path...)
	if !ok {
		return 0, false
	}
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), n == float64(int64(n))
	case int:
		return int64(n), true
	}
	return 0, false
}

func caInjector(d Desired) Writer {
	o := d.Object
	sel := Selector{Group: o.GroupVersionKind().Group, Kind: o.GetKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
	set := map[string]any{}
	switch o.GetKind() {
	case "CustomResourceDefinition":
		if s, _, _ := unstructured.NestedString(o.Object, "spec", "conversion", "strategy"); s == "Webhook" {
			set["/spec/conversion/webhook/clientConfig/caBundle"] = fakeCABundle
		}
	case "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration":
		hooks, _, _ := unstructured.NestedSlice(o.Object, "webhooks")
		for i := range hooks {
			set[fmt.Sprintf("/webhooks/%d/clientConfig/caBundle", i)] = fakeCABundle
		}
	case "APIService":
		set["/spec/caBundle"] = fakeCABundle
	}
	if len(set) == 0 {
		return nil
	}
	return &FieldWriter{Type: TypeCAInjector, Manager: "cert-manager-cainjector", Target: sel, Set: set,
		After: defaultAfter(TypeCAInjector), Source: d.Source.String() + " (detected)"}
}

// Kinds lists the kinds writers create, for the tool's prune candidates.
func Kinds(writers []Writer) []schema.GroupVersionKind {
	seen := map[schema.GroupVersionKind]bool{}
	var out []schema.GroupVersionKind
	for _, w := range writers {
		if c, ok := w.(creator); ok {
			for _, k := range c.Creates() {
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}
