package lint

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	psaapi "k8s.io/pod-security-admission/api"
	psapolicy "k8s.io/pod-security-admission/policy"
)

// podSecurityRules check workloads against the Pod Security level their
// namespace enforces, with the upstream evaluator kube-apiserver's
// PodSecurity plugin runs. The plugin only warns about a Deployment whose
// template violates the level; it rejects the Pods its ReplicaSet creates,
// so the Deployment is "applied" and never runs.
func podSecurityRules() []Rule {
	return []Rule{{
		ID:       "pod-security-rejects-workload-pods",
		Severity: SeverityError,
		Summary:  "A workload's pod template violates the Pod Security level its namespace enforces",
		Check:    checkPodSecurity,
	}}
}

// podTemplatePaths are where workload kinds keep their pod template.
var podTemplatePaths = map[string][]string{
	"Deployment":            {"spec", "template"},
	"StatefulSet":           {"spec", "template"},
	"DaemonSet":             {"spec", "template"},
	"ReplicaSet":            {"spec", "template"},
	"ReplicationController": {"spec", "template"},
	"Job":                   {"spec", "template"},
	"CronJob":               {"spec", "jobTemplate", "spec", "template"},
}

func checkPodSecurity(ctx context.Context, in *Input) ([]Finding, error) {
	evaluator, err := psapolicy.NewEvaluator(psapolicy.DefaultChecks(), nil)
	if err != nil {
		return nil, fmt.Errorf("building the Pod Security evaluator: %w", err)
	}
	policies := map[string]psaapi.Policy{}
	for _, o := range in.Objects {
		u := o.Object
		if u.GetKind() != "Namespace" || u.GetAPIVersion() != "v1" {
			continue
		}
		// The API server's defaults are privileged everywhere; a
		// malformed label is the namespace's own problem (the API server
		// refuses it), not this rule's.
		p, errs := psaapi.PolicyToEvaluate(u.GetLabels(), psaapi.Policy{
			Enforce: psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()},
			Audit:   psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()},
			Warn:    psaapi.LevelVersion{Level: psaapi.LevelPrivileged, Version: psaapi.LatestVersion()},
		})
		if len(errs) == 0 && p.Enforce.Level != psaapi.LevelPrivileged {
			policies[u.GetName()] = p
		}
	}
	var out []Finding
	var mutator *podMutator // built when a template first fails as written
	defer func() { mutator.close() }()
	built := false
	for _, o := range in.Objects {
		u := o.Object
		path, ok := podTemplatePaths[u.GetKind()]
		if !ok {
			continue
		}
		ns := u.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		p, ok := policies[ns]
		if !ok {
			continue
		}
		raw, found, _ := unstructured.NestedMap(u.Object, path...)
		if !found {
			continue
		}
		var tmpl corev1.PodTemplateSpec
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &tmpl); err != nil {
			continue // not a valid template: the API server says so itself
		}
		agg := psapolicy.AggregateCheckResults(evaluator.EvaluatePod(p.Enforce, &tmpl.ObjectMeta, &tmpl.Spec))
		if agg.Allowed {
			continue
		}
		// PodSecurity judges the Pod after mutating admission.
		if !built {
			mutator, built = newPodMutator(ctx, in), true
		}
		pod, by, err := mutator.mutate(ctx, u, &tmpl, ns)
		if err != nil {
			return nil, err
		}
		after := ""
		if len(by) > 0 {
			agg = psapolicy.AggregateCheckResults(evaluator.EvaluatePod(p.Enforce, &pod.ObjectMeta, &pod.Spec))
			if agg.Allowed {
				continue // the policies fix it
			}
			after = fmt.Sprintf(" (after %s)", strings.Join(by, ", "))
		}
		out = append(out, Finding{
			Rule:     "pod-security-rejects-workload-pods",
			Severity: SeverityError,
			Source:   sourceOf(o),
			Object:   objectName(u),
			Message: fmt.Sprintf("namespace %s enforces Pod Security %q; the pods of this %s would be rejected%s: %s",
				ns, p.Enforce.String(), u.GetKind(), after, agg.ForbiddenDetail()),
			Why: "The PodSecurity admission plugin enforces the level on Pods only: the " + u.GetKind() +
				" is accepted (at most with a warning), its controller's Pods are refused, and nothing runs while GitOps reports it synced.",
			Fix: fmt.Sprintf("make the pod template meet %q (%s), or lower the namespace's pod-security.kubernetes.io/enforce label", p.Enforce.String(), agg.ForbiddenReason()),
		})
	}
	return out, nil
}
