package gitops

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/manifest"
)

const (
	argoCMName       = "argocd-cm"
	argoParamsCMName = "argocd-cmd-params-cm"

	keyTrackingMethod     = "application.resourceTrackingMethod"
	keyInstanceLabelKey   = "application.instanceLabelKey"
	keyCompareOptions     = "resource.compareoptions"
	keyCustomizations     = "resource.customizations"
	keyServerSideDiff     = "controller.diff.server.side"
	defaultInstanceLabel  = "app.kubernetes.io/instance"
	customizationIgnore   = "ignoreDifferences"
	wildcardOverrideKey   = "*/*"
	crdOverrideKey        = "apiextensions.k8s.io/CustomResourceDefinition"
	statusIgnoreAll       = "all"
	statusIgnoreCRD       = "crd"
	defaultStatusIgnoring = statusIgnoreAll // Argo CD 3.x GetDefaultDiffOptions
)

// TrackingMethod is how Argo CD marks the live objects of an Application.
type TrackingMethod string

const (
	TrackingLabel              TrackingMethod = "label"
	TrackingAnnotation         TrackingMethod = "annotation"
	TrackingAnnotationAndLabel TrackingMethod = "annotation+label"
)

// ArgoConfig holds the Argo CD settings that change diffing, from argocd-cm
// and argocd-cmd-params-cm, with Argo CD 3.x defaults for what is unset.
type ArgoConfig struct {
	// Position is where argocd-cm is, zero when absent; Source is the
	// same as text ("" when absent).
	Position manifest.Source
	Source   string
	// ParamsSource is where argocd-cmd-params-cm is, zero when absent.
	ParamsSource manifest.Source
	Namespace    string
	// TrackingMethod defaults to annotation (Argo CD 3.x).
	TrackingMethod   TrackingMethod
	InstanceLabelKey string
	// Overrides are the resource.customizations ignoreDifferences, by
	// override key ("apps/Deployment", "Service", "*/*"), sorted by key.
	Overrides []ArgoOverride
	// IgnoreAggregatedRoles and IgnoreResourceStatusField come from
	// resource.compareoptions; the status field defaults to "all".
	IgnoreAggregatedRoles     bool
	IgnoreResourceStatusField string
	// ServerSideDiff is controller.diff.server.side from
	// argocd-cmd-params-cm: server-side diff for every Application.
	ServerSideDiff bool
}

// ArgoOverride is the ignoreDifferences of one resource override.
type ArgoOverride struct {
	Key                   string
	Field                 string // where it was written, e.g. data[resource.customizations.ignoreDifferences.all]
	JSONPointers          []string
	JQPathExpressions     []string
	ManagedFieldsManagers []string
	// managersApply is false when Argo CD's exact-key lookup of managed
	// fields overrides can never find this key (see ParseArgoConfig).
	managersApply bool
}

// DefaultArgoConfig is what Argo CD 3.x uses without any settings.
func DefaultArgoConfig() *ArgoConfig {
	return &ArgoConfig{
		TrackingMethod:            TrackingAnnotation,
		InstanceLabelKey:          defaultInstanceLabel,
		IgnoreResourceStatusField: defaultStatusIgnoring,
	}
}

// Rules returns the overrides as ignore rules, followed by the status rule
// resource.compareoptions implies. Override keys match like Argo CD's
// ignore normalizer: "<group>/<kind>" globs, a bare "<kind>" in the core
// group, "*/*" everything.
func (c *ArgoConfig) Rules() []ignore.Rule {
	var out []ignore.Rule
	for _, o := range c.Overrides {
		group, kind, ok := overrideGroupKind(o.Key)
		if !ok {
			continue // warned about when parsed: matches nothing
		}
		r := ignore.Rule{
			Tool:              ignore.ArgoCD,
			Source:            c.Source,
			Field:             o.Field,
			Target:            ignore.Target{Group: group, Kind: kind},
			JSONPointers:      o.JSONPointers,
			JQPathExpressions: o.JQPathExpressions,
		}
		if o.managersApply {
			r.ManagedFieldsManagers = o.ManagedFieldsManagers
		}
		if len(r.JSONPointers)+len(r.JQPathExpressions)+len(r.ManagedFieldsManagers) > 0 {
			out = append(out, r)
		}
	}
	source, field := c.Source, "data["+keyCompareOptions+"].ignoreResourceStatusField"
	if source == "" {
		source, field = "Argo CD default", keyCompareOptions+".ignoreResourceStatusField: all"
	}
	switch c.IgnoreResourceStatusField {
	case "off", "false", "none":
	case statusIgnoreCRD:
		out = append(out, ignore.Rule{Tool: ignore.ArgoCD, Source: source, Field: field,
			Target: ignore.Target{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}, JSONPointers: []string{"/status"}, Implied: true})
	default: // "", "all" and unknown values: Argo CD ignores status everywhere
		out = append(out, ignore.Rule{Tool: ignore.ArgoCD, Source: source, Field: field,
			Target: ignore.Target{Group: "*", Kind: "*"}, JSONPointers: []string{"/status"}, Implied: true})
	}
	return out
}

// overrideGroupKind splits an override key like Argo CD's
// getGroupKindForOverrideKey.
func overrideGroupKind(key string) (group, kind string, ok bool) {
	parts := strings.Split(key, "/")
	switch len(parts) {
	case 1:
		return "", parts[0], true
	case 2:
		return parts[0], parts[1], true
	}
	return "", "", false
}

// convertToOverrideKey turns the <group_Kind> suffix of a split
// resource.customizations key into an override key, as Argo CD's
// settings.convertToOverrideKey: "apps_Deployment" is "apps/Deployment",
// "Service" stays "Service" (core group), and "all" means every resource.
func convertToOverrideKey(groupKind string) (string, error) {
	parts := strings.Split(groupKind, "_")
	switch {
	case len(parts) == 2:
		return parts[0] + "/" + parts[1], nil
	case len(parts) == 1 && groupKind != "":
		if groupKind == "all" {
			return wildcardOverrideKey, nil
		}
		return groupKind, nil
	}
	return "", fmt.Errorf("group kind should be <group>_<Kind> or <Kind>, got %q", groupKind)
}

// overrideIgnoreDiff is the YAML of an ignoreDifferences customization.
type overrideIgnoreDiff struct {
	JSONPointers          []string `json:"jsonPointers,omitempty"`
	JQPathExpressions     []string `json:"jqPathExpressions,omitempty"`
	ManagedFieldsManagers []string `json:"managedFieldsManagers,omitempty"`
}

type compareOptions struct {
	IgnoreAggregatedRoles              bool   `json:"ignoreAggregatedRoles,omitempty"`
	IgnoreResourceStatusField          string `json:"ignoreResourceStatusField,omitempty"`
	IgnoreDifferencesOnResourceUpdates *bool  `json:"ignoreDifferencesOnResourceUpdates,omitempty"`
}

// ParseArgoConfig reads argocd-cm and argocd-cmd-params-cm; either may be
// nil. The result is never nil.
func ParseArgoConfig(cm, params *Object) (*ArgoConfig, []Warning, error) {
	cfg := DefaultArgoConfig()
	var warns []Warning
	r := &reader{}
	if params != nil {
		cfg.ParamsSource = params.where()
		r.source = params.where().String()
		data := configMapData(r, params.Object)
		if v, ok := data[keyServerSideDiff]; ok {
			b, err := strconv.ParseBool(strings.TrimSpace(v))
			if err != nil {
				// Argo CD logs and keeps the default.
				warns = append(warns, Warning{Source: params.where(), Field: "data[" + keyServerSideDiff + "]",
					Message: fmt.Sprintf("%q is not a boolean; Argo CD keeps server-side diff off", v)})
			}
			cfg.ServerSideDiff = b
		}
	}
	if cm == nil {
		return cfg, warns, r.err()
	}
	cfg.Position, cfg.Source, cfg.Namespace = cm.where(), cm.where().String(), cm.GetNamespace()
	r.source = cfg.Source
	data := configMapData(r, cm.Object)

	switch tm := data[keyTrackingMethod]; TrackingMethod(tm) {
	case "":
	case TrackingLabel, TrackingAnnotation, TrackingAnnotationAndLabel:
		cfg.TrackingMethod = TrackingMethod(tm)
	default:
		warns = append(warns, Warning{Source: cfg.Position, Field: "data[" + keyTrackingMethod + "]",
			Message: fmt.Sprintf("unknown tracking method %q (want label, annotation or annotation+label); truce assumes annotation", tm)})
	}
	if k := data[keyInstanceLabelKey]; k != "" {
		cfg.InstanceLabelKey = k
	}
	if v, ok := data[keyCompareOptions]; ok {
		var co compareOptions
		if err := yaml.Unmarshal([]byte(v), &co); err != nil {
			r.fail("data["+keyCompareOptions+"]", "invalid YAML: %v", err)
		} else {
			cfg.IgnoreAggregatedRoles = co.IgnoreAggregatedRoles
			if co.IgnoreResourceStatusField != "" {
				cfg.IgnoreResourceStatusField = co.IgnoreResourceStatusField
			}
			switch co.IgnoreResourceStatusField {
			case "", statusIgnoreAll, statusIgnoreCRD, "off", "false", "none":
			default:
				warns = append(warns, Warning{Source: cfg.Position, Field: "data[" + keyCompareOptions + "].ignoreResourceStatusField",
					Message: fmt.Sprintf("unknown value %q (want all, crd or off); Argo CD ignores status for all resources", co.IgnoreResourceStatusField)})
			}
		}
	}

	overrides := map[string]*ArgoOverride{}
	// The combined key first; split keys replace its ignoreDifferences, as in
	// settings.GetResourceOverrides.
	if v := data[keyCustomizations]; v != "" {
		field := "data[" + keyCustomizations + "]"
		var combined map[string]map[string]any
		if err := yaml.Unmarshal([]byte(v), &combined); err != nil {
			r.fail(field, "invalid YAML: %v", err)
		}
		for _, key := range slices.Sorted(maps.Keys(combined)) {
			raw, ok := combined[key][customizationIgnore]
			if !ok {
				continue
			}
			f := fmt.Sprintf("%s[%s].%s", field, key, customizationIgnore)
			s, ok := raw.(string)
			if !ok {
				r.fail(f, "want a YAML string (ignoreDifferences: |), got %s", typeName(raw))
				continue
			}
			if o, ok := parseOverride(r, &warns, cfg.Position, f, s); ok {
				o.Key = key
				overrides[key] = o
			}
		}
	}
	for _, k := range slices.Sorted(maps.Keys(data)) {
		if !strings.HasPrefix(k, keyCustomizations) {
			continue
		}
		parts := strings.SplitN(k, ".", 4)
		if len(parts) < 4 {
			continue // resource.customizations itself, read above
		}
		field := "data[" + k + "]"
		switch parts[2] {
		case customizationIgnore:
		case "health", "useOpenLibs", "actions", "ignoreResourceUpdates", "knownTypeFields":
			continue // not about diffing
		default:
			r.fail(field, "resource customization type %q not supported; Argo CD then fails to load all resource customizations", parts[2])
			continue
		}
		key, err := convertToOverrideKey(parts[3])
		if err != nil {
			r.fail(field, "%v", err)
			continue
		}
		if o, ok := parseOverride(r, &warns, cfg.Position, field, data[k]); ok {
			o.Key = key
			overrides[key] = o
		}
	}
	for _, key := range slices.Sorted(maps.Keys(overrides)) {
		o := overrides[key]
		if _, _, ok := overrideGroupKind(key); !ok {
			warns = append(warns, Warning{Source: cfg.Position, Field: o.Field,
				Message: fmt.Sprintf("override key %q must be <group>/<kind> or <kind>; Argo CD applies it to nothing", key)})
		}
		// Argo CD finds managed-fields overrides by the exact key
		// "<group>/<kind>" of the resource, or "*/*" (diff.HasIgnoreDifference),
		// unlike pointers and jq, which match the key as globs.
		o.managersApply = key == wildcardOverrideKey || (strings.Count(key, "/") == 1 && !strings.ContainsAny(key, `*?[]{}\`))
		if len(o.ManagedFieldsManagers) > 0 && !o.managersApply {
			hint := ""
			if !strings.Contains(key, "/") {
				hint = fmt.Sprintf("; for a core kind write the key as resource.customizations.ignoreDifferences._%s", key)
			}
			warns = append(warns, Warning{Source: cfg.Position, Field: o.Field + ".managedFieldsManagers",
				Message: fmt.Sprintf("Argo CD looks managed-fields overrides up by the exact key \"<group>/<kind>\" or \"*/*\", never %q, so these managers are not applied%s", key, hint)})
		}
		cfg.Overrides = append(cfg.Overrides, *o)
	}
	if err := errors.Join(r.err(), ruleErrors(cfg.Rules())); err != nil {
		return nil, warns, err
	}
	return cfg, warns, nil
}

func parseOverride(r *reader, warns *[]Warning, source manifest.Source, field, value string) (*ArgoOverride, bool) {
	var d overrideIgnoreDiff
	if err := yaml.Unmarshal([]byte(value), &d); err != nil {
		r.fail(field, "invalid ignoreDifferences YAML: %v", err)
		return nil, false
	}
	if err := yaml.UnmarshalStrict([]byte(value), &overrideIgnoreDiff{}); err != nil {
		*warns = append(*warns, Warning{Source: source, Field: field,
			Message: fmt.Sprintf("Argo CD ignores unknown fields here (want jsonPointers, jqPathExpressions, managedFieldsManagers): %v", err)})
	}
	return &ArgoOverride{
		Field:                 field,
		JSONPointers:          d.JSONPointers,
		JQPathExpressions:     d.JQPathExpressions,
		ManagedFieldsManagers: d.ManagedFieldsManagers,
	}, true
}

// configMapData returns a ConfigMap's data, every value a string.
func configMapData(r *reader, m map[string]any) map[string]string {
	raw := r.object(m, "data", "data")
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		s, ok := v.(string)
		if !ok {
			r.fail("data["+k+"]", "want a string, got %s", typeName(v))
			continue
		}
		out[k] = s
	}
	return out
}
