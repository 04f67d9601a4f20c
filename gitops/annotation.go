package gitops

import (
	"errors"
	"fmt"
	"strings"

	"github.com/truce-dev/truce/drift/ignore"
)

// ResourceIgnoreDifferences reads the argocd.argoproj.io/ignore-differences
// annotation of a manifest: the resource's own ignore rule.
//
// The value is a comma-separated list of JSON pointers (RFC 6901, "/" in a
// key written "~1"), surrounding spaces trimmed, applying to this resource
// only (its group, kind, name and namespace), for example:
//
//	metadata:
//	  annotations:
//	    argocd.argoproj.io/ignore-differences: /spec/replicas,/metadata/labels/version
//
// This is the format Argo CD reads (util/argo/diff.ExtractIgnoreDifferencesFromAnnotations):
// jqPathExpressions and managedFieldsManagers cannot be given here, and a
// YAML document is not read as one. Argo CD silently skips a pointer that
// is not valid; here it is an error naming the file:line.
func ResourceIgnoreDifferences(o Object) ([]ignore.Rule, error) {
	v, ok := o.GetAnnotations()[AnnotationIgnoreDifferences]
	if !ok || v == "" {
		return nil, nil
	}
	field := "metadata.annotations[" + AnnotationIgnoreDifferences + "]"
	var pointers []string
	for _, p := range strings.Split(v, ",") {
		if p = strings.TrimSpace(p); p != "" {
			pointers = append(pointers, p)
		}
	}
	if len(pointers) == 0 {
		return nil, nil
	}
	if strings.Contains(v, "\n") || strings.Contains(v, "jsonPointers:") || strings.Contains(v, "jqPathExpressions:") || strings.Contains(v, "managedFieldsManagers:") {
		return nil, fieldError(o.where().String(), field, errors.New(
			"the value must be comma-separated JSON pointers, e.g. \"/spec/replicas,/metadata/labels/version\" (Argo CD reads no YAML here); "+
				"use the Application's ignoreDifferences for jqPathExpressions or managedFieldsManagers"))
	}
	gvk := o.GroupVersionKind()
	rule := ignore.Rule{
		Tool:   ignore.ArgoCD,
		Source: o.where().String(),
		Field:  field,
		// Literal group and kind: Argo CD matches them as globs, and API
		// groups and kinds contain no glob characters.
		Target:       ignore.Target{Group: gvk.Group, Kind: gvk.Kind, Name: o.GetName(), Namespace: o.GetNamespace()},
		JSONPointers: pointers,
	}
	if err := rule.Validate(); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", o.where(), field, err)
	}
	return []ignore.Rule{rule}, nil
}
