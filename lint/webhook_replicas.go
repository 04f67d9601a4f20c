package lint

import (
	"context"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/truce-dev/truce/engine/gatekeeper"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/argovalues"
)

// RuleWebhookFailClosedSingleReplica reports a fail-closed webhook served
// by a single replica.
const RuleWebhookFailClosedSingleReplica = "webhook-fail-closed-single-replica"

const (
	whyFailClosedSingleReplica = "With failurePolicy Fail every write the webhook matches is rejected while no Pod of its server is ready. " +
		"With one replica that is every rollout of the server, every eviction of its Pod (a node drain, a cluster upgrade) and every crash: " +
		"the writes fail until the new Pod is ready, and the Pod's own replacement may need writes the webhook matches. " +
		"With more replicas, evictions respect only a PodDisruptionBudget: without one that keeps a Pod, a drain of the nodes they run on evicts them all."
	fixFailClosedSingleReplica = "Run at least two replicas (spec.replicas, or a HorizontalPodAutoscaler's minReplicas) with a PodDisruptionBudget " +
		"that keeps at least one (minAvailable: 1, or maxUnavailable below the replicas), " +
		"as the engines' guides advise for production (Gatekeeper's chart runs 3, Kyverno's admission controller should run 3); " +
		"or use failurePolicy: Ignore if the webhook is not a security boundary."
	// kyvernoAdmissionController is the Deployment of Kyverno's Helm chart
	// that serves its admission webhooks.
	kyvernoAdmissionController = "admission-controller"
)

// checkFailClosedSingleReplica: a fail-closed webhook whose service selects
// the Pods of a Deployment of the input with fewer than two replicas; and
// Kyverno's admission controller with one replica while policies of the
// input make Kyverno register fail-closed webhooks (Kyverno writes its
// webhook configurations at run time, so they are not in the repository);
// and the same read from the Helm values of Argo CD Applications that
// install Kyverno's or Gatekeeper's chart.
func checkFailClosedSingleReplica(_ context.Context, in *Input) ([]Finding, error) {
	deploys, err := replicaSets(in)
	if err != nil {
		return nil, err
	}
	out, err := forEachWebhook(in, func(c webhookConfig, w webhook) ([]Finding, error) {
		if !w.failsClosed() || w.service == nil {
			return nil, nil
		}
		d, err := serving(in, deploys, w.service.Namespace, w.service.Name)
		if err != nil || d == nil {
			return nil, err
		}
		problem, err := replicaProblem(in, *d)
		if err != nil || problem == "" {
			return nil, err
		}
		msg := fmt.Sprintf("%s fails closed and its service %s/%s is served by %s (%s) %s", w.label(), w.service.Namespace, w.service.Name,
			objectName(d.obj.Object), where(d.obj), problem)
		return []Finding{finding(c.obj, msg, whyFailClosedSingleReplica, fixFailClosedSingleReplica)}, nil
	})
	if err != nil {
		return nil, err
	}
	charts, err := checkChartReplicas(in)
	if err != nil {
		return nil, err
	}
	out = append(out, charts...)
	failing := kyvernoFailClosedPolicies(in)
	if len(failing) == 0 {
		return out, nil
	}
	for _, d := range deploys {
		l := d.obj.Object.GetLabels()
		if l["app.kubernetes.io/part-of"] != "kyverno" && !strings.HasPrefix(d.obj.Object.GetName(), "kyverno") {
			continue
		}
		if l["app.kubernetes.io/component"] != kyvernoAdmissionController && !strings.HasSuffix(d.obj.Object.GetName(), kyvernoAdmissionController) {
			continue
		}
		problem, err := replicaProblem(in, d)
		if err != nil {
			return nil, err
		}
		if problem == "" {
			continue
		}
		msg := fmt.Sprintf("%s fail closed (Kyverno registers its webhooks for them with failurePolicy Fail) and Kyverno's admission controller runs %s",
			strings.Join(failing, ", "), problem)
		out = append(out, finding(d.obj, msg, whyFailClosedSingleReplica, fixFailClosedSingleReplica))
	}
	return out, nil
}

// replicated is a Deployment or StatefulSet of the input with the replicas
// it runs with.
type replicated struct {
	obj      manifest.Object
	selector labels.Set // its Pods' labels
	replicas int32
	what     string // "1 replica (spec.replicas unset)"
}

// replicaSets returns the input's Deployments and StatefulSets, with the
// replicas a HorizontalPodAutoscaler of the input keeps at least.
func replicaSets(in *Input) ([]replicated, error) {
	minReplicas := map[string]int32{}
	for _, o := range in.Objects {
		if isKind(o, "autoscaling", "HorizontalPodAutoscaler") {
			kind, _, _ := unstructured.NestedString(o.Object.Object, "spec", "scaleTargetRef", "kind")
			name, _, _ := unstructured.NestedString(o.Object.Object, "spec", "scaleTargetRef", "name")
			m, ok, _ := unstructured.NestedInt64(o.Object.Object, "spec", "minReplicas")
			if !ok {
				m = 1
			}
			minReplicas[o.Object.GetNamespace()+"/"+kind+"/"+name] = int32(m)
		}
	}
	var out []replicated
	for _, o := range in.Objects {
		var replicas *int32
		var template map[string]string
		switch {
		case isKind(o, "apps", "Deployment"):
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object.Object, &d); err != nil {
				return nil, fmt.Errorf("%s: decoding Deployment: %w", where(o), err)
			}
			replicas, template = d.Spec.Replicas, d.Spec.Template.Labels
		case isKind(o, "apps", "StatefulSet"):
			var s appsv1.StatefulSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object.Object, &s); err != nil {
				return nil, fmt.Errorf("%s: decoding StatefulSet: %w", where(o), err)
			}
			replicas, template = s.Spec.Replicas, s.Spec.Template.Labels
		default:
			continue
		}
		r := replicated{obj: o, selector: template, replicas: 1, what: "1 replica (spec.replicas unset)"}
		if replicas != nil {
			r.replicas = *replicas
			r.what = fmt.Sprintf("%d replica(s)", *replicas)
		}
		if m, ok := minReplicas[o.Object.GetNamespace()+"/"+o.Object.GetKind()+"/"+o.Object.GetName()]; ok {
			r.replicas = m
			r.what = fmt.Sprintf("%d replica(s) at least (HorizontalPodAutoscaler minReplicas)", m)
		}
		out = append(out, r)
	}
	return out, nil
}

// serving returns the workload of the input whose Pods the Service
// namespace/name of the input selects, or nil.
func serving(in *Input, workloads []replicated, namespace, name string) (*replicated, error) {
	for _, o := range in.Objects {
		if !isKind(o, "", "Service") || o.Object.GetNamespace() != namespace || o.Object.GetName() != name {
			continue
		}
		var svc corev1.Service
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object.Object, &svc); err != nil {
			return nil, fmt.Errorf("%s: decoding Service: %w", where(o), err)
		}
		if len(svc.Spec.Selector) == 0 {
			return nil, nil
		}
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		for i, w := range workloads {
			if w.obj.Object.GetNamespace() == namespace && sel.Matches(w.selector) {
				return &workloads[i], nil
			}
		}
	}
	return nil, nil
}

// kyvernoFailClosedPolicies names the Kyverno policies of the input that
// Kyverno serves with a fail-closed webhook: failurePolicy Fail, the
// default of ClusterPolicy, Policy and the policies.kyverno.io kinds.
func kyvernoFailClosedPolicies(in *Input) []string {
	var out []string
	for _, o := range in.Objects {
		g := o.Object.GroupVersionKind().Group
		if g != "kyverno.io" && g != "policies.kyverno.io" {
			continue
		}
		if strings.HasSuffix(o.Object.GetKind(), "Exception") || strings.HasSuffix(o.Object.GetKind(), "Report") {
			continue
		}
		fp, _, _ := unstructured.NestedString(o.Object.Object, "spec", "failurePolicy")
		if fp == "" {
			fp, _, _ = unstructured.NestedString(o.Object.Object, "spec", "webhookConfiguration", "failurePolicy")
		}
		if fp == "" || fp == "Fail" {
			out = append(out, objectName(o.Object))
		}
	}
	return out
}

// valueInt reads a number of Helm values at path.
func valueInt(values map[string]any, path ...string) (int64, bool) {
	v, ok, _ := unstructured.NestedFieldNoCopy(values, path...)
	n, isNumber := number(v)
	return n, ok && isNumber
}

// number is a value of a chart's values that is a number (YAML and JSON
// decode numbers as int64 or float64).
func number(v any) (int64, bool) {
	switch n := v.(type) {
	case int64:
		return n, true
	case float64:
		return int64(n), true
	case int:
		return int64(n), true
	}
	return 0, false
}

// checkChartReplicas: an Argo CD Application installing Kyverno's chart
// whose values leave its admission controller at one replica (the chart's
// default: Kyverno's policies fail closed by default), or Gatekeeper's
// chart whose values make a webhook fail closed with fewer than two
// replicas of its controller manager (3 by default).
func checkChartReplicas(in *Input) ([]Finding, error) {
	var out []Finding
	for _, o := range in.Objects {
		if !isKind(o, "argoproj.io", "Application") {
			continue
		}
		sources, err := argovalues.Sources(o.Object)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", where(o), err)
		}
		for _, s := range sources {
			if f, err := chartReplicas(o, s); err != nil || f != nil {
				if err != nil {
					return nil, err
				}
				out = append(out, *f)
				break
			}
		}
	}
	return out, nil
}

// chartReplicas is the finding for one Application source installing
// Kyverno's or Gatekeeper's chart, nil when the source's own values (as
// Argo CD passes them to helm template) give it replicas to fail closed
// with, or it installs neither.
func chartReplicas(o manifest.Object, s argovalues.Source) (*Finding, error) {
	src := kyvernoSource(s.RepoURL, s.Chart, s.Path)
	if src == "" && !s.Installs(gatekeeper.ChartName, gatekeeper.ChartRepository) {
		return nil, nil
	}
	values, err := s.Inline()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", where(o), err)
	}
	if src != "" {
		what := "1 replica (admissionController.replicas unset, the chart's default)"
		if n, ok := valueInt(values, "admissionController", "replicas"); ok {
			what = fmt.Sprintf("%d replica(s) (admissionController.replicas)", n)
			if n >= 2 {
				budget, keep, err := kyvernoChartBudget(values, int(n))
				if err != nil || keep >= 1 {
					return nil, err
				}
				f := finding(o, fmt.Sprintf("Application %q installs Kyverno's Helm chart (%s) with its admission controller at %s and the chart's PodDisruptionBudget with %s, which lets all of them be evicted at once; Kyverno's policies fail closed by default",
					o.Object.GetName(), src, what, budget), whyFailClosedSingleReplica, fixFailClosedSingleReplica)
				return &f, nil
			}
		}
		f := finding(o, fmt.Sprintf("Application %q installs Kyverno's Helm chart (%s) with its admission controller at %s; Kyverno's policies fail closed by default",
			o.Object.GetName(), src, what), whyFailClosedSingleReplica, fixFailClosedSingleReplica)
		return &f, nil
	}
	var closed []string
	for _, key := range []string{"validatingWebhookFailurePolicy", "mutatingWebhookFailurePolicy"} {
		if v, _, _ := unstructured.NestedString(values, key); v == "Fail" {
			closed = append(closed, key+": Fail")
		}
	}
	if len(closed) == 0 {
		return nil, nil
	}
	n, ok := valueInt(values, "replicas")
	if !ok {
		n = gatekeeperChartReplicas
	}
	if n < 2 {
		f := finding(o, fmt.Sprintf("Application %q installs Gatekeeper's Helm chart with %s and replicas: %d",
			o.Object.GetName(), strings.Join(closed, ", "), n), whyFailClosedSingleReplica, fixFailClosedSingleReplica)
		return &f, nil
	}
	budget, keep, err := gatekeeperChartBudget(values, int(n))
	if err != nil || keep >= 1 {
		return nil, err
	}
	f := finding(o, fmt.Sprintf("Application %q installs Gatekeeper's Helm chart with %s, %d replicas and the chart's PodDisruptionBudget with %s, which lets all of them be evicted at once",
		o.Object.GetName(), strings.Join(closed, ", "), n, budget), whyFailClosedSingleReplica, fixFailClosedSingleReplica)
	return &f, nil
}

// gatekeeperChartReplicas is the controller manager's replicas in
// Gatekeeper's chart (values.yaml replicas).
const gatekeeperChartReplicas = 3

// kyvernoChartBudget is what the PodDisruptionBudget Kyverno's chart
// renders for its admission controller keeps of replicas (two or more:
// the chart then always renders one, templates/admission-controller/
// poddisruptionbudget.yaml), as the disruption controller computes it.
// The chart writes maxUnavailable when set (not empty, zero or null),
// else minAvailable with Helm's `default 1` (so 0 becomes 1,
// _helpers/_pdb.tpl); minAvailable is 1 in its values, so a
// maxUnavailable needs minAvailable set to null or 0 beside it, or the
// chart fails to render ("Cannot set both"), which is not this rule's
// finding: it then reports the replicas as kept.
func kyvernoChartBudget(values map[string]any, replicas int) (string, int, error) {
	minimum, found, _ := unstructured.NestedFieldNoCopy(values, "admissionController", "podDisruptionBudget", "minAvailable")
	if !found {
		minimum = int64(1)
	}
	maximum, _, _ := unstructured.NestedFieldNoCopy(values, "admissionController", "podDisruptionBudget", "maxUnavailable")
	if !helmEmpty(maximum) && !helmEmpty(minimum) {
		return "", replicas, nil
	}
	if helmEmpty(minimum) {
		minimum = int64(1)
	}
	var minAvailable, maxUnavailable *intstr.IntOrString
	var err error
	if helmEmpty(maximum) {
		minAvailable, err = intOrString(minimum)
	} else {
		maxUnavailable, err = intOrString(maximum)
	}
	if err != nil {
		return "", 0, fmt.Errorf("admissionController.podDisruptionBudget: %w", err)
	}
	keep, what, err := desiredHealthy(minAvailable, maxUnavailable, replicas)
	if err != nil {
		return "", 0, fmt.Errorf("admissionController.podDisruptionBudget.%w", err)
	}
	return what, keep, nil
}

// gatekeeperChartBudget is what the PodDisruptionBudget Gatekeeper's chart
// always renders for its controller manager keeps of replicas:
// minAvailable is pdb.controllerManager.minAvailable (1 in its values); a
// value set to null removes it, and a budget with neither field keeps
// none.
func gatekeeperChartBudget(values map[string]any, replicas int) (string, int, error) {
	v, found, _ := unstructured.NestedFieldNoCopy(values, "pdb", "controllerManager", "minAvailable")
	switch {
	case !found:
		v = int64(1)
	case v == nil:
		return "no minAvailable (pdb.controllerManager.minAvailable: null)", 0, nil
	}
	minAvailable, err := intOrString(v)
	if err != nil {
		return "", 0, fmt.Errorf("pdb.controllerManager.minAvailable: %w", err)
	}
	keep, what, err := desiredHealthy(minAvailable, nil, replicas)
	if err != nil {
		return "", 0, fmt.Errorf("pdb.controllerManager.%w", err)
	}
	return what, keep, nil
}

// helmEmpty is Go templates' and Sprig's "empty": what `if` skips and
// `default` replaces.
func helmEmpty(v any) bool {
	if s, ok := v.(string); ok {
		return s == ""
	}
	if b, ok := v.(bool); ok {
		return !b
	}
	n, ok := number(v)
	return v == nil || ok && n == 0
}

// intOrString is a budget value of a chart's values as its template
// writes it into the PodDisruptionBudget: a number, or a string (a
// number or a percentage).
func intOrString(v any) (*intstr.IntOrString, error) {
	if s, ok := v.(string); ok {
		x := intstr.Parse(s)
		return &x, nil
	}
	if n, ok := number(v); ok {
		x := intstr.FromInt32(int32(n))
		return &x, nil
	}
	return nil, fmt.Errorf("%v is neither a number nor a percentage", v)
}
