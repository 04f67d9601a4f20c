package gatekeeper

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/render/argovalues"
)

// Flags are the command-line flags of Gatekeeper's controller manager
// (the webhook's process) that change its webhooks' answers.
type Flags struct {
	// ExemptNamespaces, ExemptNamespacePrefixes and
	// ExemptNamespaceSuffixes are --exempt-namespace,
	// --exempt-namespace-prefix and --exempt-namespace-suffix: the
	// namespaces that may carry the admission.gatekeeper.sh/ignore label
	// (pkg/webhook/namespacelabel.go).
	ExemptNamespaces        []string
	ExemptNamespacePrefixes []string
	ExemptNamespaceSuffixes []string
	// GeneratorExpansion is --enable-generator-resource-expansion: the
	// validating webhook expands generators with ExpansionTemplates.
	GeneratorExpansion bool
	// K8sNativeValidation is --enable-k8s-native-validation: the CEL
	// driver runs templates' K8sNativeValidation code.
	K8sNativeValidation bool
	// ReferentialRules is --enable-referential-rules: Rego reads
	// data.inventory.
	ReferentialRules bool
	// DisableEnforcementActionValidation is
	// --disable-enforcementaction-validation: the validating webhook
	// accepts a constraint with an enforcementAction it does not know.
	DisableEnforcementActionValidation bool
	// DisabledBuiltins are --disable-opa-builtin: Rego built-ins a
	// template may not call (Gatekeeper cannot ingest one that does).
	// Gatekeeper's manifests and chart pass "{http.send}", braces
	// included, which names no built-in: http.send stays enabled.
	DisabledBuiltins []string
	// ExternalData is --enable-external-data: Rego may call
	// external_data.
	ExternalData bool
	// From says where the flags were read, for errors and reports.
	From string
}

// DefaultFlags are the flags of Gatekeeper's manifests (deploy/gatekeeper.yaml)
// and of its Helm chart's default values: gatekeeper-system exempt, every
// feature on.
func DefaultFlags() Flags {
	return Flags{
		ExemptNamespaces:    []string{Namespace},
		GeneratorExpansion:  true,
		K8sNativeValidation: true,
		ReferentialRules:    true,
		DisabledBuiltins:    []string{shippedDisabledBuiltin},
		ExternalData:        true,
		From:                "the defaults of Gatekeeper's manifests",
	}
}

// shippedDisabledBuiltin is the --disable-opa-builtin value of
// Gatekeeper's manifests and of its chart's default values.
const shippedDisabledBuiltin = "{http.send}"

// exempt reports whether namespace name may carry the ignore label
// (namespaceLabelHandler.Handle: exact, prefix or suffix match).
func (f Flags) exempt(name string) bool {
	if slices.Contains(f.ExemptNamespaces, name) {
		return true
	}
	for _, p := range f.ExemptNamespacePrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, s := range f.ExemptNamespaceSuffixes {
		if strings.HasSuffix(name, s) {
			return true
		}
	}
	return false
}

// controllerManager reports whether o is the Deployment of Gatekeeper's
// controller manager, the process that serves its webhooks: so named by
// Gatekeeper's manifests and chart, or labelled gatekeeper.sh/operation:
// webhook as they label it (the audit Deployment is labelled audit).
func controllerManager(o *unstructured.Unstructured) bool {
	if o.GetKind() != "Deployment" || o.GroupVersionKind().Group != "apps" {
		return false
	}
	if o.GetName() == "gatekeeper-controller-manager" {
		return true
	}
	if o.GetLabels()["gatekeeper.sh/operation"] == "webhook" {
		return true
	}
	l, _, _ := unstructured.NestedStringMap(o.Object, "spec", "template", "metadata", "labels")
	return l["gatekeeper.sh/operation"] == "webhook"
}

// readFlags returns the flags Gatekeeper runs with in a cluster holding
// objs: the container arguments of its controller manager's Deployment
// when objs hold one, else the Helm values of an Argo CD Application
// installing Gatekeeper's chart, else DefaultFlags. Gatekeeper's flags are
// Go flag package flags: -name or --name, =value or the next argument, a
// boolean without a value is true, a repeated list flag adds.
func readFlags(objs []*unstructured.Unstructured) (Flags, error) {
	var deploys []*unstructured.Unstructured
	var apps []*unstructured.Unstructured
	for _, o := range objs {
		switch {
		case controllerManager(o):
			deploys = append(deploys, o)
		case o.GroupVersionKind().Group == "argoproj.io" && o.GetKind() == "Application":
			apps = append(apps, o)
		}
	}
	key := func(o *unstructured.Unstructured) string { return o.GetNamespace() + "/" + o.GetName() }
	sort.Slice(deploys, func(i, j int) bool { return key(deploys[i]) < key(deploys[j]) })
	if len(deploys) > 1 {
		// Two webhook servers behind one Service answer alike only when
		// their flags agree; truce cannot say which one a request reaches.
		first, err := deploymentFlags(deploys[0])
		if err != nil {
			return Flags{}, err
		}
		for _, d := range deploys[1:] {
			f, err := deploymentFlags(d)
			if err != nil {
				return Flags{}, err
			}
			first.From, f.From = "", ""
			if fmt.Sprint(first) != fmt.Sprint(f) {
				return Flags{}, fmt.Errorf("two Deployments of Gatekeeper's controller manager, %s and %s, have different flags; truce cannot tell which one answers", key(deploys[0]), key(d))
			}
		}
	}
	if len(deploys) > 0 {
		return deploymentFlags(deploys[0])
	}
	sort.Slice(apps, func(i, j int) bool { return key(apps[i]) < key(apps[j]) })
	for _, a := range apps {
		f, ok, err := chartFlags(a)
		if err != nil || ok {
			return f, err
		}
	}
	return DefaultFlags(), nil
}

// deploymentFlags reads the flags of the controller manager's containers.
// A flag not given has Gatekeeper's own default, so no namespace is exempt
// unless an --exempt-namespace names it.
func deploymentFlags(d *unstructured.Unstructured) (Flags, error) {
	f := Flags{GeneratorExpansion: true, K8sNativeValidation: true, ReferentialRules: true, ExternalData: true,
		From: fmt.Sprintf("Deployment %s/%s", d.GetNamespace(), d.GetName())}
	containers, _, err := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	if err != nil {
		return Flags{}, fmt.Errorf("reading Gatekeeper's %s: %w", f.From, err)
	}
	for _, c := range containers {
		m, _ := c.(map[string]any)
		args, _, err := unstructured.NestedStringSlice(m, "args")
		if err != nil {
			return Flags{}, fmt.Errorf("reading Gatekeeper's %s: containers[].args: %w", f.From, err)
		}
		if err := f.parse(args); err != nil {
			return Flags{}, fmt.Errorf("reading Gatekeeper's %s: %w", f.From, err)
		}
	}
	return f, nil
}

// boolFlags are the boolean flags read, by name.
func (f *Flags) boolFlags() map[string]*bool {
	return map[string]*bool{
		"enable-generator-resource-expansion":  &f.GeneratorExpansion,
		"enable-k8s-native-validation":         &f.K8sNativeValidation,
		"enable-referential-rules":             &f.ReferentialRules,
		"disable-enforcementaction-validation": &f.DisableEnforcementActionValidation,
		"enable-external-data":                 &f.ExternalData,
	}
}

// parse reads args as Go's flag package does; flags truce does not read
// are skipped (their values, when separate, are skipped by the "-" test
// alone, which is what flag does for a non-boolean flag it knows).
func (f *Flags) parse(args []string) error {
	lists := map[string]*[]string{
		"exempt-namespace":        &f.ExemptNamespaces,
		"exempt-namespace-prefix": &f.ExemptNamespacePrefixes,
		"exempt-namespace-suffix": &f.ExemptNamespaceSuffixes,
		"disable-opa-builtin":     &f.DisabledBuiltins,
	}
	bools := f.boolFlags()
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name := strings.TrimPrefix(strings.TrimPrefix(a, "-"), "-")
		if name == a || name == "" {
			continue
		}
		name, value, hasValue := strings.Cut(name, "=")
		if list, ok := lists[name]; ok {
			if !hasValue {
				if i+1 >= len(args) {
					return fmt.Errorf("flag --%s without a value", name)
				}
				i++
				value = args[i]
			}
			*list = append(*list, value)
			continue
		}
		if b, ok := bools[name]; ok {
			if !hasValue {
				// A boolean flag without =value is true (flag package).
				*b = true
				continue
			}
			v, err := strconv.ParseBool(value)
			if err != nil {
				return fmt.Errorf("flag --%s=%s: %w", name, value, err)
			}
			*b = v
		}
	}
	return nil
}

// Gatekeeper's Helm chart, as Argo CD Applications name it.
const (
	ChartName       = "gatekeeper"
	ChartRepository = "open-policy-agent.github.io/gatekeeper/charts"
)

// chartFlags reads the flags Gatekeeper's chart (v3.23.1) passes its
// controller manager from the Helm values of an Argo CD Application that
// installs it (the values the source sets itself, as Argo CD gives them
// to helm template: render/argovalues): --exempt-namespace for the
// release namespace (the Application's destination namespace) and for
// each of controllerManager.exemptNamespaces, the prefixes and suffixes,
// and enableGeneratorResourceExpansion, enableK8sNativeValidation,
// enableReferentialRules, disableEnforcementActionValidation. Value files
// are not read here; when truce renders the chart, its Deployment is read
// instead.
func chartFlags(app *unstructured.Unstructured) (Flags, bool, error) {
	where := fmt.Sprintf("Argo CD Application %s/%s", app.GetNamespace(), app.GetName())
	sources, err := argovalues.Sources(app)
	if err != nil {
		return Flags{}, false, fmt.Errorf("reading Gatekeeper's flags from %s: %w", where, err)
	}
	for _, src := range sources {
		if !src.Installs(ChartName, ChartRepository) {
			continue
		}
		values, err := src.Inline()
		if err != nil {
			return Flags{}, false, fmt.Errorf("reading Gatekeeper's flags from %s: %w", where, err)
		}
		releaseNS, _, _ := unstructured.NestedString(app.Object, "spec", "destination", "namespace")
		if releaseNS == "" {
			releaseNS = "default"
		}
		f := Flags{ExemptNamespaces: []string{releaseNS}, From: where + " (Helm values of Gatekeeper's chart)"}
		for _, l := range []struct {
			key  string
			into *[]string
		}{
			{"exemptNamespaces", &f.ExemptNamespaces},
			{"exemptNamespacePrefixes", &f.ExemptNamespacePrefixes},
			{"exemptNamespaceSuffixes", &f.ExemptNamespaceSuffixes},
		} {
			list, _, err := unstructured.NestedFieldNoCopy(values, "controllerManager", l.key)
			if err != nil {
				continue
			}
			items, _ := list.([]any)
			for _, it := range items {
				*l.into = append(*l.into, fmt.Sprint(it))
			}
		}
		for _, b := range []struct {
			key  string
			into *bool
			def  bool
		}{
			{"enableGeneratorResourceExpansion", &f.GeneratorExpansion, true},
			{"enableK8sNativeValidation", &f.K8sNativeValidation, true},
			{"enableReferentialRules", &f.ReferentialRules, true},
			{"disableEnforcementActionValidation", &f.DisableEnforcementActionValidation, false},
			{"enableExternalData", &f.ExternalData, true},
		} {
			*b.into = b.def
			v, ok := values[b.key]
			if !ok || v == nil {
				continue
			}
			// The chart prints the value into the flag (--name={{ .Values.name }}),
			// which Go's flag package then parses.
			parsed, err := strconv.ParseBool(fmt.Sprint(v))
			if err != nil {
				return Flags{}, false, fmt.Errorf("reading Gatekeeper's flags from %s: %s: %w", where, b.key, err)
			}
			*b.into = parsed
		}
		f.DisabledBuiltins = []string{shippedDisabledBuiltin}
		if v, ok := values["disabledBuiltins"]; ok && v != nil {
			// The chart ranges over the list.
			items, isList := v.([]any)
			if !isList {
				return Flags{}, false, fmt.Errorf("reading Gatekeeper's flags from %s: disabledBuiltins: %v is not a list", where, v)
			}
			f.DisabledBuiltins = nil
			for _, it := range items {
				f.DisabledBuiltins = append(f.DisabledBuiltins, fmt.Sprint(it))
			}
		}
		return f, true, nil
	}
	return Flags{}, false, nil
}
