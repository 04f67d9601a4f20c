package lint

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

// loopRules ask the Simulator of Options (`truce check`'s simulation): the
// input's GitOps manifests are simulated against its admission
// configuration, and every object that loops is a finding, with the
// writers, the fields and the fix the simulation recommends.
func loopRules() []Rule {
	return []Rule{{
		ID:       RuleAdmissionGitOpsLoop,
		Severity: SeverityError,
		Summary:  "Admission (or another controller) and the GitOps tool write the same field back and forth",
		Check:    checkLoops,
	}}
}

// RuleAdmissionGitOpsLoop is the id of the loop rule, which `truce check`
// leaves out of its findings: the loops are what it reports itself.
const RuleAdmissionGitOpsLoop = "admission-gitops-loop"

// Simulator simulates the GitOps tools of a repository against the cluster
// it is applied to, as `truce check` does. lint does not simulate: check
// sits beside it, so the caller passes one (the CLI passes check's).
type Simulator interface {
	// Simulate returns the verdicts of the repository's objects, per tool;
	// cluster holds the admission configuration, namespaces and CRDs the
	// repository is applied to.
	Simulate(ctx context.Context, repository, cluster []manifest.Object) ([]Simulated, error)
}

// Simulated is the verdict for one object under one GitOps tool.
type Simulated struct {
	// Source is where the manifest is; Object names the object.
	Source  manifest.Source
	Object  string
	Verdict simulate.Verdict
	// Loop is set for Loop verdicts.
	Loop *simulate.LoopInfo
	// FixTitle and FixDescription are the fix the simulation recommends
	// ("" when it has none).
	FixTitle, FixDescription string
}

func checkLoops(ctx context.Context, in *Input) ([]Finding, error) {
	repo, live := splitLive(in.Objects)
	if !hasGitOps(repo, live) {
		return nil, nil
	}
	sim := in.options.Simulator
	if sim == nil {
		return []Finding{notSimulated("no simulator was given to lint")}, nil
	}
	objs, err := sim.Simulate(ctx, repo, live)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		// What check cannot take apart (two Argo CD instances in one
		// input, say) is not a reason to drop the other rules' findings.
		return []Finding{notSimulated(err.Error())}, nil
	}
	var findings []Finding
	for _, o := range objs {
		if o.Verdict != simulate.Loop || o.Loop == nil {
			continue
		}
		f := Finding{
			Rule: RuleAdmissionGitOpsLoop, Severity: SeverityError, Source: o.Source.String(), Object: o.Object,
			Message: fmt.Sprintf("%s (%s) and %s write %s back and forth every %s, %.0f writes an hour",
				o.Loop.Other, o.Loop.OtherKind, o.Loop.Tool, strings.Join(o.Loop.Fields, ", "), o.Loop.Period, o.Loop.WritesPerHour),
			Why: "The GitOps tool applies the Git value, admission (or the other writer) changes it again, the tool sees drift and applies " +
				"again: the two repeat that forever unless one is told about the other.",
			Fix: "run `truce check` for the verified fix",
		}
		if o.FixTitle != "" {
			f.Fix = o.FixTitle + ": " + o.FixDescription + " (verify with `truce check`)"
		}
		findings = append(findings, f)
	}
	return findings, nil
}

// notSimulated is the finding of a loop rule that could not simulate.
func notSimulated(why string) Finding {
	return Finding{
		Rule: RuleAdmissionGitOpsLoop, Severity: SeverityInfo, Object: "(the input)",
		Message: "the GitOps tools were not simulated: " + why,
		Why:     "Loops are found by simulating the tools; without the simulation this rule cannot say whether there is one.",
		Fix:     "lint the repositories one at a time, or run `truce check` on each",
	}
}

// splitLive separates the files from what was read from a live cluster.
// The cluster's admission configuration, namespaces and CRDs are the state
// the files are applied to, as `truce check --kubeconfig` reads it; its
// other objects (Applications and Kyverno policies of other repositories,
// argocd-cm) are not what these files deploy and are left out.
func splitLive(objs []manifest.Object) (files, live []manifest.Object) {
	for _, o := range objs {
		if o.Source.File != LiveSource {
			files = append(files, o)
			continue
		}
		gvk := o.Object.GroupVersionKind()
		switch {
		case admission.IsConfigurationKind(gvk.GroupKind()),
			gvk.Group == "" && gvk.Kind == "Namespace",
			gvk.Group == "apiextensions.k8s.io" && gvk.Kind == "CustomResourceDefinition":
			live = append(live, o)
		}
	}
	return files, live
}

// hasGitOps reports whether a loop is possible at all: something besides
// the GitOps tool writes (a bound mutating policy, a mutating webhook, a
// writers document, a HorizontalPodAutoscaler, an aggregated ClusterRole;
// in the files or the live cluster) and the files hold manifests for the tool to apply. Without an
// Application or Kustomization, check simulates both tools with their
// defaults.
func hasGitOps(files, live []manifest.Object) bool {
	// An aggregated ClusterRole is applied, and written by the
	// clusterrole-aggregation controller.
	aggregated := func(o manifest.Object) bool {
		_, ok := o.Object.Object["aggregationRule"].(map[string]any)
		return ok && o.Object.GetKind() == "ClusterRole"
	}
	writes := func(o manifest.Object) bool {
		// Gatekeeper's mutators, which its mutating webhook applies.
		if o.Object.GroupVersionKind().Group == "mutations.gatekeeper.sh" {
			return true
		}
		switch o.Object.GetKind() {
		case "MutatingAdmissionPolicyBinding", "MutatingWebhookConfiguration", "Writers", "HorizontalPodAutoscaler":
			return true
		}
		return aggregated(o)
	}
	applied := func(o manifest.Object) bool {
		switch o.Object.GetKind() {
		case "MutatingAdmissionPolicy", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding",
			"ValidatingWebhookConfiguration", "Namespace", "CustomResourceDefinition":
			return false
		}
		return aggregated(o) || !writes(o)
	}
	return (slices.ContainsFunc(files, writes) || slices.ContainsFunc(live, writes)) && slices.ContainsFunc(files, applied)
}
