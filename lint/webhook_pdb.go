package lint

import (
	"fmt"
	"strings"

	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// budget is what the PodDisruptionBudgets of the input let voluntary
// disruptions (evictions by a node drain or a cluster upgrade) do to a
// workload's Pods.
type budget struct {
	// pdbs name the budgets selecting the Pods ("PodDisruptionBudget
	// ns/name (minAvailable: 1)").
	pdbs []string
	// keep is how many Pods the eviction API keeps running: the disruption
	// controller's desiredHealthy for the workload's replicas (0 without
	// a budget).
	keep int
}

// disruptionBudget reads the PodDisruptionBudgets of the input that select
// w's Pods, computing desiredHealthy as the disruption controller does
// (pkg/controller/disruption: minAvailable, or replicas minus
// maxUnavailable, percentages of the replicas rounded up). With more than
// one budget the eviction API refuses every eviction of the Pods, so they
// keep all replicas.
func disruptionBudget(in *Input, w replicated) (budget, error) {
	var b budget
	for _, o := range in.Objects {
		if !isKind(o, "policy", "PodDisruptionBudget") || o.Object.GetNamespace() != w.obj.Object.GetNamespace() {
			continue
		}
		var pdb policyv1.PodDisruptionBudget
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object.Object, &pdb); err != nil {
			return budget{}, fmt.Errorf("%s: decoding PodDisruptionBudget: %w", where(o), err)
		}
		if pdb.Spec.Selector == nil {
			continue // policy/v1: a nil selector selects no Pods
		}
		sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
		if err != nil {
			return budget{}, fmt.Errorf("%s: PodDisruptionBudget spec.selector: %w", where(o), err)
		}
		if !sel.Matches(labels.Set(w.selector)) {
			continue
		}
		replicas := int(w.replicas)
		keep, what, err := desiredHealthy(pdb.Spec.MinAvailable, pdb.Spec.MaxUnavailable, replicas)
		if err != nil {
			return budget{}, fmt.Errorf("%s: PodDisruptionBudget spec.%w", where(o), err)
		}
		b.pdbs = append(b.pdbs, fmt.Sprintf("PodDisruptionBudget %s/%s (%s)", pdb.Namespace, pdb.Name, what))
		if len(b.pdbs) > 1 {
			keep = replicas
		}
		b.keep = max(keep, 0)
	}
	return b, nil
}

// desiredHealthy is how many of replicas Pods a budget with minAvailable
// or maxUnavailable (maxUnavailable first) keeps: the disruption
// controller's desiredHealthy (pkg/controller/disruption), percentages of
// the replicas rounded up; with neither set (policy/v1 has no default) it
// keeps none. what says which field decided; an error names the field.
func desiredHealthy(minAvailable, maxUnavailable *intstr.IntOrString, replicas int) (keep int, what string, err error) {
	switch {
	case maxUnavailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(maxUnavailable, replicas, true)
		if err != nil {
			return 0, "", fmt.Errorf("maxUnavailable: %w", err)
		}
		return replicas - n, "maxUnavailable: " + maxUnavailable.String(), nil
	case minAvailable != nil:
		n, err := intstr.GetScaledValueFromIntOrPercent(minAvailable, replicas, true)
		if err != nil {
			return 0, "", fmt.Errorf("minAvailable: %w", err)
		}
		return n, "minAvailable: " + minAvailable.String(), nil
	}
	return 0, "neither minAvailable nor maxUnavailable", nil
}

// replicaProblem says why w, serving a fail-closed webhook, can be left
// with no Pod, or "" when it cannot: fewer than two replicas (with what
// its budget then does to node drains), or two or more that voluntary
// disruptions may all evict at once because no budget keeps one.
func replicaProblem(in *Input, w replicated) (string, error) {
	b, err := disruptionBudget(in, w)
	if err != nil {
		return "", err
	}
	if w.replicas < 2 {
		msg := "with " + w.what
		if b.keep >= 1 && w.replicas >= 1 {
			msg += fmt.Sprintf("; %s lets no eviction through, so node drains wait on it instead", strings.Join(b.pdbs, ", "))
		}
		return msg, nil
	}
	if b.keep >= 1 {
		return "", nil
	}
	if len(b.pdbs) == 0 {
		return fmt.Sprintf("with %s and no PodDisruptionBudget: a node drain or cluster upgrade may evict all of them at once", w.what), nil
	}
	return fmt.Sprintf("with %s and %s, which lets all of them be evicted at once", w.what, strings.Join(b.pdbs, ", ")), nil
}
