package fix

import (
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/fix/yamledit"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
)

// gitValue writes the stored values into the manifest.
func (e *editor) gitValue(p Problem, fields []string, values map[string]any) (*Candidate, error) {
	if p.Source.Renderer == manifest.RendererHelm {
		return e.helmValues(p, fields, values)
	}
	if p.Source.Kustomization != "" && p.Source.Kustomization != p.Source.File {
		if c, err := e.kustomizeImages(p, fields, values); c != nil || err != nil {
			return c, err
		}
		if c, err := e.kustomizeExistingPatch(p, fields, values); c != nil || err != nil {
			return c, err
		}
		return e.kustomizePatch(p, fields, values)
	}
	f, doc, err := e.doc(p.Source)
	if err != nil {
		return nil, err
	}
	for _, ptr := range fields {
		if err := f.Set(doc, ptr, values[ptr]); err != nil {
			return nil, fmt.Errorf("setting %s in %s: %w", ptr, p.Source, err)
		}
	}
	return e.candidate("Put the mutation in Git",
		fmt.Sprintf("Write the value admission stores into %s (%s). Git then holds the final value, admission has nothing to change, and a diff shows real drift only.",
			p.Source, describeValues(fields, values)), ""), nil
}

// kustomizePatch adds a strategic merge patch with the stored values to the
// kustomization that renders the object, leaving its bases alone.
func (e *editor) kustomizePatch(p Problem, fields []string, values map[string]any) (*Candidate, error) {
	ref := p.Object.Ref
	var original map[string]any
	if p.Object.Drift != nil {
		original = p.Object.Drift.Desired
	}
	patch, err := yamledit.StrategicPatch(ref.GroupVersion().String(), ref.Kind, ref.Name, ref.Namespace, values, original)
	if err != nil {
		return nil, fmt.Errorf("writing a patch for %s: %w", ref, err)
	}
	kpath := p.Source.Kustomization
	kdata, err := e.read(kpath)
	if err != nil {
		return nil, err
	}
	dir := filepath.Dir(kpath)
	path := newFileNear(dir, "truce-"+strings.ToLower(ref.Kind)+"-"+ref.Name, e.read)
	kout, err := yamledit.AddKustomizePatch(kpath, kdata, path)
	if err != nil {
		return nil, err
	}
	head := "# Written by truce fix: the value admission stores, in Git.\n"
	c := e.candidate("Put the mutation in Git (kustomize patch)",
		fmt.Sprintf("Add a patch to %s with the value admission stores (%s), leaving the resource file and its other users alone. Git then holds the final value and a diff shows real drift only.",
			kpath, describeValues(fields, values)), "")
	c.Files[path], c.Before[path] = append([]byte(head), patch...), nil
	c.Files[kpath], c.Before[kpath] = kout, kdata
	return c, nil
}

func describeValues(fields []string, values map[string]any) string {
	var lines []string
	for _, ptr := range fields {
		lines = append(lines, fmt.Sprintf("%s = %s", ptr, show(values[ptr])))
	}
	return strings.Join(lines, "; ")
}

// policyStep returns the MutatingAdmissionPolicy binding a step names, if
// it names one.
func policyStep(step *admission.Step) (admission.Step, bool) {
	if step == nil || step.Kind != admission.PolicyStep || step.Binding == "" {
		return admission.Step{}, false
	}
	return *step, true
}

// validatingPolicy replaces the mutating binding with a validating policy
// in Warn that checks the value the mutation set.
func (e *editor) validatingPolicy(p Problem, fields []string, values map[string]any) (*Candidate, error) {
	var found *admission.Step
	what := ""
	if p.Object.Loop != nil {
		found, what = p.Object.Loop.OtherStep, p.Object.Loop.Other
	} else if p.Object.Drift != nil {
		for _, f := range p.Object.Drift.Fields {
			for i := range f.Steps {
				if _, ok := policyStep(&f.Steps[i]); ok {
					found, what = &f.Steps[i], f.Origin
				}
			}
		}
	}
	step, ok := policyStep(found)
	if !ok {
		return nil, fmt.Errorf("the mutation is not made by a MutatingAdmissionPolicy truce can read (%q)", what)
	}
	policyName, bindingName := step.Name, step.Binding
	var policy, binding *admissionObject
	for i := range p.Admission {
		o := p.Admission[i]
		switch {
		case o.Object.GetKind() == "MutatingAdmissionPolicy" && o.Object.GetName() == policyName:
			policy = &admissionObject{o.Source, o.Object.Object}
		case o.Object.GetKind() == "MutatingAdmissionPolicyBinding" && o.Object.GetName() == bindingName:
			binding = &admissionObject{o.Source, o.Object.Object}
		}
	}
	if policy == nil || binding == nil {
		return nil, fmt.Errorf("MutatingAdmissionPolicy %s or its binding %s is not in the files read", policyName, bindingName)
	}
	var checks []string
	for _, ptr := range fields {
		path, err := celPath(ptr)
		if err != nil {
			return nil, err
		}
		lit, err := celLiteral(values[ptr])
		if err != nil {
			return nil, fmt.Errorf("%s: %w", ptr, err)
		}
		checks = append(checks, path+" == "+lit)
	}
	ref := p.Object.Ref
	name := policyName + "-validate"
	vap := validatingPolicyDocument(name, policy.object, binding.object, ref.Namespace, ref.Name, checks,
		fmt.Sprintf("must be what MutatingAdmissionPolicy %s used to set: %s", policyName, strings.Join(checks, " && ")))
	bsrc := binding.source
	data, err := e.read(bsrc.File)
	if err != nil {
		return nil, err
	}
	without, err := removeDocument(bsrc.File, data, bsrc.Line)
	if err != nil {
		return nil, err
	}
	path := newFileNear(filepath.Dir(policy.source.File), name, e.read)
	c := e.candidate("Switch mutate to validate",
		fmt.Sprintf("Remove MutatingAdmissionPolicyBinding %s and add ValidatingAdmissionPolicy %s with a binding in Warn: %s is no longer rewritten, "+
			"and a write without the value gets a warning. Fix the manifests (the fix above), then switch the binding to [Deny]. "+
			"The check is written for %s; widen it to the rule the mutation encodes.", bindingName, name, ref, ref),
		"Until the manifests carry the value, objects are stored as Git has them (a warning only).")
	if len(without) == 0 {
		without = []byte{}
	}
	c.Files[bsrc.File] = without
	c.Before[bsrc.File] = data
	c.Files[path] = vap
	c.Before[path] = nil
	return c, nil
}

type admissionObject struct {
	source manifest.Source
	object map[string]any
}

// serverSideDiff turns on Argo CD's server-side diff with
// IncludeMutationWebhook (and server-side apply) for the Application.
func (e *editor) serverSideDiff(p Problem) (*Candidate, error) {
	if p.App == nil {
		return nil, errors.New("no Argo CD Application in the repository to change")
	}
	if p.App.CompareOptions.IncludeMutationWebhook && p.App.CompareOptions.ServerSideDiff != nil && *p.App.CompareOptions.ServerSideDiff && p.App.SyncOptions.ServerSideApply {
		return nil, errors.New("the Application already diffs server-side with IncludeMutationWebhook")
	}
	f, doc, err := e.doc(p.App.Source)
	if err != nil {
		return nil, err
	}
	ptr := "/metadata/annotations/" + ignore.FormatPointer([]string{gitops.AnnotationCompareOptions})[1:]
	value := "ServerSideDiff=true,IncludeMutationWebhook=true"
	if cur, ok, _ := f.Get(doc, ptr); ok {
		if s, isString := cur.(string); isString && strings.TrimSpace(s) != "" {
			var keep []string
			for _, o := range strings.Split(s, ",") {
				o = strings.TrimSpace(o)
				if !strings.HasPrefix(o, "ServerSideDiff=") && !strings.HasPrefix(o, "IncludeMutationWebhook=") && o != "" {
					keep = append(keep, o)
				}
			}
			value = strings.Join(append(keep, "ServerSideDiff=true", "IncludeMutationWebhook=true"), ",")
		}
	}
	if err := f.Set(doc, ptr, value); err != nil {
		return nil, err
	}
	if !p.App.SyncOptions.ServerSideApply {
		if err := appendSyncOption(f, doc, "ServerSideApply=true"); err != nil {
			return nil, err
		}
	}
	return e.candidate("Argo CD server-side diff with IncludeMutationWebhook",
		fmt.Sprintf("Application %s diffs with a server-side apply dry run that passes through mutating admission, so the desired object already holds the mutation (annotation %s: %s, sync option ServerSideApply=true).",
			p.App.Name, gitops.AnnotationCompareOptions, value),
		"Every refresh makes a dry-run request per resource, and mutating webhooks are called during the diff. Not performed while a resource does not exist yet."), nil
}

func appendSyncOption(f interface {
	Get(int, string) (any, bool, error)
	Set(int, string, any) error
}, doc int, option string) error {
	if cur, ok, _ := f.Get(doc, "/spec/syncPolicy/syncOptions"); ok {
		if l, isList := cur.([]any); isList {
			for _, v := range l {
				if v == option {
					return nil
				}
			}
			return f.Set(doc, "/spec/syncPolicy/syncOptions/-", option)
		}
	}
	return f.Set(doc, "/spec/syncPolicy/syncOptions", []any{option})
}

// ignoreRule adds an ignore rule scoped to the object and the loop's
// fields: Argo CD ignoreDifferences with RespectIgnoreDifferences, or a
// Flux spec.ignore entry with a target.
func (e *editor) ignoreRule(p Problem) (*Candidate, error) {
	fields := p.loopFields()
	ref := p.Object.Ref
	warning := "Real drift in these fields becomes invisible: the tool no longer compares or corrects them for this object."
	switch p.Tool {
	case "argocd":
		if p.App == nil {
			return nil, errors.New("no Argo CD Application in the repository to change")
		}
		f, doc, err := e.doc(p.App.Source)
		if err != nil {
			return nil, err
		}
		entry := map[string]any{"kind": ref.Kind, "name": ref.Name}
		if ref.Group != "" {
			entry["group"] = ref.Group
		}
		if ref.Namespace != "" {
			entry["namespace"] = ref.Namespace
		}
		var pointers, jq []string
		for _, ptr := range fields {
			if q, ok := jqPath(p.Object, ptr); ok {
				jq = append(jq, q)
			} else {
				pointers = append(pointers, ptr)
			}
		}
		if len(pointers) > 0 {
			entry["jsonPointers"] = toAny(pointers)
		}
		if len(jq) > 0 {
			entry["jqPathExpressions"] = toAny(jq)
		}
		if err := appendList(f, doc, "/spec/ignoreDifferences", entry); err != nil {
			return nil, err
		}
		if !p.App.SyncOptions.RespectIgnoreDifferences {
			if err := appendSyncOption(f, doc, "RespectIgnoreDifferences=true"); err != nil {
				return nil, err
			}
		}
		return e.candidate("Narrow ignore rule (Argo CD ignoreDifferences)",
			fmt.Sprintf("Application %s ignores %s of %s, and RespectIgnoreDifferences=true makes its syncs keep the live value instead of writing Git's.",
				p.App.Name, strings.Join(fields, ", "), ref), warning), nil
	case "flux":
		target := map[string]any{"kind": ref.Kind, "name": "^" + regexp.QuoteMeta(ref.Name) + "$"}
		if ref.Group != "" {
			target["group"] = regexp.QuoteMeta(ref.Group)
		}
		if ref.Namespace != "" {
			target["namespace"] = "^" + regexp.QuoteMeta(ref.Namespace) + "$"
		}
		entry := map[string]any{"paths": toAny(fields), "target": target}
		if hr := p.HelmRelease; hr != nil {
			// helm-controller's drift detection takes the same rules.
			f, doc, err := e.doc(hr.Source)
			if err != nil {
				return nil, err
			}
			if err := appendList(f, doc, "/spec/driftDetection/ignore", entry); err != nil {
				return nil, err
			}
			return e.candidate("Narrow ignore rule (HelmRelease driftDetection.ignore)",
				fmt.Sprintf("HelmRelease %s's drift detection ignores %s of %s: helm-controller no longer compares or corrects them; the chart's value is still applied at install and upgrade.",
					hr.Name, strings.Join(fields, ", "), ref), warning), nil
		}
		if p.Kustomization == nil {
			return nil, errors.New("no Flux Kustomization in the repository to change")
		}
		f, doc, err := e.doc(p.Kustomization.Source)
		if err != nil {
			return nil, err
		}
		if err := appendList(f, doc, "/spec/ignore", entry); err != nil {
			return nil, err
		}
		return e.candidate("Narrow ignore rule (Flux spec.ignore)",
			fmt.Sprintf("Kustomization %s ignores %s of %s: Flux strips the field from its apply when another manager owns it and adopts the live value otherwise; Git's value is still applied when the object is created.",
				p.Kustomization.Name, strings.Join(fields, ", "), ref), warning), nil
	}
	return nil, fmt.Errorf("unknown tool %q", p.Tool)
}

func appendList(f interface {
	Get(int, string) (any, bool, error)
	Set(int, string, any) error
}, doc int, ptr string, entry any) error {
	if cur, ok, _ := f.Get(doc, ptr); ok {
		if _, isList := cur.([]any); isList {
			return f.Set(doc, ptr+"/-", entry)
		}
	}
	return f.Set(doc, ptr, []any{entry})
}

// trackingAnnotation switches Argo CD to annotation tracking, so copies
// that inherit the instance label are not the application's.
func (e *editor) trackingAnnotation(p Problem) (*Candidate, error) {
	if p.Tool != "argocd" {
		return nil, errors.New("only Argo CD tracks by label")
	}
	if p.ArgoConfig == nil || p.ArgoConfig.Position == (manifest.Source{}) {
		return nil, errors.New("no argocd-cm in the repository to change (set application.resourceTrackingMethod: annotation in it)")
	}
	f, doc, err := e.doc(p.ArgoConfig.Position)
	if err != nil {
		return nil, err
	}
	if err := f.Set(doc, "/data/application.resourceTrackingMethod", "annotation"); err != nil {
		return nil, err
	}
	return e.candidate("Switch Argo CD to annotation tracking",
		"argocd-cm application.resourceTrackingMethod: annotation. A copy made by another tool carries a tracking-id that names its original, so Argo CD leaves it alone: no sync status, no pruning.",
		"Argo CD re-marks every object of every Application on its next sync."), nil
}

func toAny(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}
