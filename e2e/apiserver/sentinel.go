package apiserver

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/uuid"
	"sigs.k8s.io/yaml"
)

// The admission sentinel.
//
// kube-apiserver does not apply admission configuration synchronously: the
// policy plugins recompile their policy set from informer caches in a loop
// (every second by default), webhook configurations come from informers, and
// namespaceSelectors are matched against an informer's copy of the
// namespaces. A write sent right after creating a policy may or may not see
// it. Sleeping would be slow and still racy, so the harness keeps a set of
// sentinel objects, one per cache that matters, and before each case (and
// after each cleanup) bumps a generation number in all of them, *after*
// every change the case made. It then dry-runs a probe object, labelled
// with the new generation, that only the sentinels match, until each
// sentinel answers with the new generation:
//
//   - MutatingAdmissionPolicy + Binding: a JSONPatch writes the generation
//     into an annotation of the probe (binding selects the generation);
//   - ValidatingAdmissionPolicy + Binding: a Warn action whose message
//     carries the generation (binding selects the generation);
//   - Mutating/ValidatingWebhookConfiguration: a fail-open webhook named
//     after the generation, pointing at a closed loopback port; the server
//     records "failed-open" audit annotations naming the webhook;
//   - the sentinel namespace carries the generation as a label that all the
//     bindings and webhooks select on, which covers the namespace informer
//     used for namespaceSelectors (and by Pod Security).
//
// Each informer delivers its resource's events in order, and the policy
// plugins compile from a snapshot of their caches, so once a sentinel shows
// generation N, every change made to that resource before the bump is
// visible to admission too. None of the signals depends on the order in
// which the server evaluates policies or webhooks, and the probe is a
// custom resource of the harness's own, so a case's policies are very
// unlikely to match it.
//
// Not covered: other informer-fed admission plugins (LimitRanger,
// ResourceQuota, Priority, RuntimeClass, DefaultStorageClass, ...) and the
// paramKind caches (DryRunCreate retries those, see TransientTimeout).

const (
	// SentinelLabel marks the harness's own objects; Cleanup leaves
	// objects that carry it alone.
	SentinelLabel = "truce-e2e.dev/sentinel"
	// SentinelNamespace holds the probe objects.
	SentinelNamespace = "truce-e2e-sentinel"
	// SentinelName names every sentinel object.
	SentinelName = "truce-e2e-sentinel"
	// SentinelGroup is the API group of the harness's probe CRD.
	SentinelGroup = "e2e.truce.dev"

	sentinelGenLabel      = "truce-e2e.dev/sentinel-gen"
	sentinelSeenAnno      = "truce-e2e.dev/sentinel-seen"
	sentinelWarningPrefix = "truce-e2e-sentinel gen="
)

// sentinelObjects renders the sentinel objects for generation gen.
func sentinelObjects(gen int) ([]*unstructured.Unstructured, error) {
	docs := strings.Split(strings.NewReplacer(
		"{{GEN}}", fmt.Sprint(gen),
		"{{LABEL}}", SentinelLabel,
		"{{GENLABEL}}", sentinelGenLabel,
		"{{SEEN}}", strings.ReplaceAll(sentinelSeenAnno, "/", "~1"),
		"{{NAMESPACE}}", SentinelNamespace,
		"{{NAME}}", SentinelName,
		"{{GROUP}}", SentinelGroup,
		"{{WARNING}}", sentinelWarningPrefix,
	).Replace(sentinelTemplate), "\n---\n")
	out := make([]*unstructured.Unstructured, 0, len(docs))
	for _, d := range docs {
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &u.Object); err != nil {
			return nil, fmt.Errorf("sentinel template: %w", err)
		}
		out = append(out, u)
	}
	return out, nil
}

// The webhooks point at port 1 on loopback, where nothing listens: the call
// fails at once with "connection refused", and failurePolicy Ignore turns
// that into a failed-open audit annotation instead of a denial.
const sentinelTemplate = `apiVersion: v1
kind: Namespace
metadata:
  name: {{NAMESPACE}}
  labels: {"{{LABEL}}": "true", "{{GENLABEL}}": "{{GEN}}"}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: trucesentinels.{{GROUP}}
  labels: {"{{LABEL}}": "true"}
spec:
  group: {{GROUP}}
  scope: Namespaced
  names: {plural: trucesentinels, singular: trucesentinel, kind: TruceSentinel, listKind: TruceSentinelList}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: {{NAME}}
  labels: {"{{LABEL}}": "true"}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: ["{{GROUP}}"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["trucesentinels"]}
  mutations:
  - patchType: JSONPatch
    jsonPatch:
      expression: '[JSONPatch{op: "add", path: "/metadata/annotations/{{SEEN}}", value: "{{GEN}}"}]'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: {{NAME}}
  labels: {"{{LABEL}}": "true"}
spec:
  policyName: {{NAME}}
  matchResources:
    namespaceSelector: {matchLabels: {"{{GENLABEL}}": "{{GEN}}"}}
    objectSelector: {matchLabels: {"{{GENLABEL}}": "{{GEN}}"}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: {{NAME}}
  labels: {"{{LABEL}}": "true"}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: ["{{GROUP}}"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["trucesentinels"]}
  validations:
  - expression: "false"
    message: "{{WARNING}}{{GEN}}"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: {{NAME}}
  labels: {"{{LABEL}}": "true"}
spec:
  policyName: {{NAME}}
  validationActions: [Warn]
  matchResources:
    namespaceSelector: {matchLabels: {"{{GENLABEL}}": "{{GEN}}"}}
    objectSelector: {matchLabels: {"{{GENLABEL}}": "{{GEN}}"}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: {{NAME}}
  labels: {"{{LABEL}}": "true"}
webhooks:
- name: g{{GEN}}.mutating.sentinel.{{GROUP}}
  clientConfig: {url: "https://127.0.0.1:1/sentinel"}
  rules:
  - {apiGroups: ["{{GROUP}}"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["trucesentinels"], scope: Namespaced}
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: ["v1"]
  timeoutSeconds: 2
  reinvocationPolicy: Never
  namespaceSelector: {matchLabels: {"{{GENLABEL}}": "{{GEN}}"}}
  objectSelector: {matchLabels: {"{{GENLABEL}}": "{{GEN}}"}}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: {{NAME}}
  labels: {"{{LABEL}}": "true"}
webhooks:
- name: g{{GEN}}.validating.sentinel.{{GROUP}}
  clientConfig: {url: "https://127.0.0.1:1/sentinel"}
  rules:
  - {apiGroups: ["{{GROUP}}"], apiVersions: ["v1"], operations: ["CREATE"], resources: ["trucesentinels"], scope: Namespaced}
  failurePolicy: Ignore
  sideEffects: None
  admissionReviewVersions: ["v1"]
  timeoutSeconds: 2
  namespaceSelector: {matchLabels: {"{{GENLABEL}}": "{{GEN}}"}}
  objectSelector: {matchLabels: {"{{GENLABEL}}": "{{GEN}}"}}`

// sentinelProbe is the object dry-run to test the sentinels of generation gen.
func sentinelProbe(gen int) *unstructured.Unstructured {
	probe := &unstructured.Unstructured{}
	probe.SetAPIVersion(SentinelGroup + "/v1")
	probe.SetKind("TruceSentinel")
	probe.SetNamespace(SentinelNamespace)
	probe.SetName(fmt.Sprintf("probe-g%d", gen))
	probe.SetLabels(map[string]string{sentinelGenLabel: fmt.Sprint(gen)})
	// The MAP patches a key into annotations, which must therefore exist.
	probe.SetAnnotations(map[string]string{"truce-e2e.dev/probe": "true"})
	return probe
}

// WaitForAdmissionSync returns once kube-apiserver's admission chain reflects
// every admission policy, binding, webhook configuration and namespace
// change made before the call (see the sentinel description above). It
// polls up to SyncTimeout.
func (s *Server) WaitForAdmissionSync(ctx context.Context) error {
	s.mu.Lock()
	s.sentinelGen++
	gen := s.sentinelGen
	s.mu.Unlock()

	objs, err := sentinelObjects(gen)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		isCRD := obj.GetKind() == "CustomResourceDefinition"
		if isCRD && s.sentinelCRDReady {
			continue // never changes; skip the no-op update
		}
		if _, err := s.upsert(ctx, obj, false); err != nil {
			return fmt.Errorf("sentinel %s: %w", obj.GetKind(), err)
		}
		if isCRD {
			if err := s.waitForCRDs(ctx, []string{obj.GetName()}); err != nil {
				return err
			}
			s.sentinelCRDReady = true
		}
	}

	wantWarning := fmt.Sprint(sentinelWarningPrefix, gen)
	wantHooks := []string{
		fmt.Sprintf("g%d.mutating.sentinel.%s", gen, SentinelGroup),
		fmt.Sprintf("g%d.validating.sentinel.%s", gen, SentinelGroup),
	}
	probe := sentinelProbe(gen)
	var missing []string
	err = poll(ctx, SyncTimeout, func(ctx context.Context) (bool, error) {
		res, err := s.dryRunOnce(ctx, Create, probe, "", nil, "truce-e2e-sentinel-"+string(uuid.NewUUID()), dryRunOptions{})
		if err != nil {
			return false, err
		}
		missing = missing[:0]
		if res.Status != nil {
			// Typically the MAP type converter warming up for the
			// sentinel CRD (once, after start). A case policy that
			// denies the probe would show here until the deadline.
			missing = append(missing, "probe denied: "+res.Status.Error())
			return false, nil
		}
		if res.Object.GetAnnotations()[sentinelSeenAnno] != fmt.Sprint(gen) {
			missing = append(missing, "MutatingAdmissionPolicy")
		}
		if !containsSubstring(res.Warnings, wantWarning) {
			missing = append(missing, "ValidatingAdmissionPolicy")
		}
		ann, err := s.AuditAnnotations(ctx, res.AuditID)
		if err != nil {
			return false, err
		}
		for _, hook := range wantHooks {
			if !failedOpen(ann, hook) {
				missing = append(missing, "webhook "+hook)
			}
		}
		return len(missing) == 0, nil
	})
	if err != nil {
		return fmt.Errorf("admission sentinel generation %d not seen after %s (missing: %s): %w", gen, SyncTimeout, strings.Join(missing, "; "), err)
	}
	return nil
}

func containsSubstring(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// failedOpen reports whether the audit annotations record that webhook hook
// was called and failed open.
func failedOpen(ann map[string]string, hook string) bool {
	for k, v := range ann {
		if strings.HasPrefix(k, "failed-open.") && v == hook {
			return true
		}
	}
	return false
}
