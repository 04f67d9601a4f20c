package kyverno_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
)

// verifyQuay is a legacy verifyImages rule: the registry it needs is not
// contacted offline.
const verifyQuay = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: verify-quay}
spec:
  rules:
  - name: check-signature
    match:
      any:
      - resources: {kinds: [Pod]}
    verifyImages:
    - imageReferences: ["quay.io/acme/*"]
      failureAction: Enforce
      attestors:
      - entries:
        - keys:
            publicKeys: |-
              -----BEGIN PUBLIC KEY-----
              MFkwEwYHKoZIzj0CAQYIKoZIzj0DAQcDQgAEW8gDJqRpEnPIT3niJ7sm1HxgYcm7
              LXTfGRms5233fwKrLRO/dlXh9IWHBeaII1/9C8sL4bByMslExbD28o14FQ==
              -----END PUBLIC KEY-----
`

const ivpolNamespaces = `
apiVersion: v1
kind: Namespace
metadata: {name: apps, labels: {kubernetes.io/metadata.name: apps}}
---
apiVersion: v1
kind: Namespace
metadata: {name: team, labels: {kubernetes.io/metadata.name: team}}
`

func pod(name, ns, labels, image string) string {
	return `
apiVersion: v1
kind: Pod
metadata: {name: ` + name + `, namespace: ` + ns + `, labels: {` + labels + `}}
spec: {containers: [{name: c, image: "` + image + `"}]}
`
}

// inNamespace puts a policy of Kyverno's conformance tests (which chainsaw
// creates in the test's namespace) into ns.
func inNamespace(policy, ns string) string {
	return strings.Replace(policy, "\nmetadata:\n", "\nmetadata:\n  namespace: "+ns+"\n", 1)
}

// TestImageValidatingPolicies: Kyverno's engine decides which writes an
// ImageValidatingPolicy matches (matchConstraints, matchConditions,
// matchImageReferences, exceptions, a namespaced policy's namespace);
// those reach for a registry, which truce does not contact, and are
// Unpredictable, named; the others are answered as without the policy.
func TestImageValidatingPolicies(t *testing.T) {
	chain := newChain(t, ivpolNamespaces,
		// ivpol-sample: Pods labelled prod=true, ghcr.io images, Deny,
		// failurePolicy Ignore, no digest mutation; its exception skips
		// the Pod named skipped-pod.
		conformance(t, "image-validating-policies_exceptions_regular"),
		conformance(t, "image-validating-policies_exceptions_regular-exception"),
		// check-signed-images in namespace team: the same match, with
		// digest pinning (mutateDigest, verifyDigest by default).
		inNamespace(conformance(t, "namespaced-image-validating-policies_validation-actions_deny"), "team"),
		verifyQuay)
	// Kyverno's webhook controller places them: the validating webhook
	// for every policy, the mutating one (digest pinning) only for
	// policies with mutateDigest; fine-grained for a timeout, with the
	// policy's failurePolicy.
	hooks := []struct {
		kind, config, name, failurePolicy, path string
		timeout                                 int64
	}{
		{"ValidatingWebhookConfiguration", "kyverno-resource-validating-webhook-cfg", "ivpol.validate.kyverno.svc-ignore-finegrained-ivpol-sample",
			"Ignore", "/ivpol/validate/ivpol-sample", 20},
		{"ValidatingWebhookConfiguration", "kyverno-resource-validating-webhook-cfg", "ivpol.validate.kyverno.svc-fail-finegrained-team-check-signed-images",
			"Fail", "/nivpol/validate/check-signed-images", 20},
		{"MutatingWebhookConfiguration", "kyverno-resource-mutating-webhook-cfg", "ivpol.mutate.kyverno.svc-fail-finegrained-team-check-signed-images",
			"Fail", "/nivpol/mutate/check-signed-images", 20},
	}
	for _, h := range hooks {
		cfg, ok := chain.State().Get(k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: h.kind}, "", h.config)
		if !ok {
			t.Fatalf("no %s", h.config)
		}
		hook := findHook(t, cfg, h.name)
		if hook["failurePolicy"] != h.failurePolicy || hook["timeoutSeconds"] != h.timeout {
			t.Errorf("%s: failurePolicy %v, timeoutSeconds %v; want %s, %d", h.name, hook["failurePolicy"], hook["timeoutSeconds"], h.failurePolicy, h.timeout)
		}
		if path, _, _ := unstructured.NestedString(hook, "clientConfig", "service", "path"); path != h.path {
			t.Errorf("%s: path %q, want %q", h.name, path, h.path)
		}
	}
	mwc, _ := chain.State().Get(k8sschema.GroupKind{Group: "admissionregistration.k8s.io", Kind: "MutatingWebhookConfiguration"}, "", "kyverno-resource-mutating-webhook-cfg")
	if hooks, _, _ := unstructured.NestedSlice(mwc.Object, "webhooks"); strings.Contains(fmt.Sprint(hooks), "ivpol-sample") {
		t.Errorf("a mutating webhook for ivpol-sample, whose mutateDigest is false: %v", hooks)
	}

	// The same cluster without Kyverno's policies: what an unaffected
	// write is answered.
	baseline := newChain(t, ivpolNamespaces)
	tests := []struct {
		name    string
		object  string
		allowed bool
		// message is part of Kyverno's answer; unpredictable are parts of
		// one Result.Unpredictable entry each; none asserts there is none.
		message       string
		unpredictable []string
	}{
		{name: "ivpol matches the image", object: pod("bad", "apps", "prod: 'true'", "ghcr.io/kyverno/test-verify-image:unsigned"),
			message: "Policy ivpol-sample error",
			unpredictable: []string{"webhook ivpol.validate.kyverno.svc-ignore-finegrained-ivpol-sample",
				"ImageValidatingPolicy ivpol-sample", "ghcr.io/kyverno/test-verify-image:unsigned", "registries are not contacted"}},
		{name: "image outside matchImageReferences", object: pod("other", "apps", "prod: 'true'", "docker.io/library/nginx:1.27"), allowed: true},
		{name: "matchConditions do not match", object: pod("dev", "apps", "prod: 'false'", "ghcr.io/kyverno/test-verify-image:unsigned"), allowed: true},
		{name: "exception skips the pod", object: pod("skipped-pod", "apps", "prod: 'true'", "ghcr.io/kyverno/test-verify-image:unsigned"), allowed: true},
		{name: "namespaced ivpol in its namespace pins the digest", object: pod("skipped-pod", "team", "prod: 'true'", "ghcr.io/kyverno/test-verify-image:unsigned"),
			message: "Policy check-signed-images error: failed to update digest",
			unpredictable: []string{"webhook ivpol.mutate.kyverno.svc-fail-finegrained-team-check-signed-images",
				"NamespacedImageValidatingPolicy team/check-signed-images", "ghcr.io/kyverno/test-verify-image:unsigned"}},
		{name: "legacy verifyImages", object: pod("q", "apps", "", "quay.io/acme/app:1.0"),
			message: "quay.io/acme/app:1.0",
			unpredictable: []string{"webhook mutate.kyverno.svc-fail", "ClusterPolicy verify-quay rule check-signature",
				"quay.io/acme/app:1.0", "registries are not contacted"}},
		{name: "legacy verifyImages, another image", object: pod("nginx", "apps", "", "docker.io/library/nginx:1.27"), allowed: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, tt.object)})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != tt.allowed {
				t.Fatalf("allowed = %v (%s), want %v; unpredictable %q", res.Allowed, res.Message, tt.allowed, res.Unpredictable)
			}
			if !strings.Contains(res.Message, tt.message) {
				t.Errorf("message = %q, want it to contain %q", res.Message, tt.message)
			}
			if len(tt.unpredictable) == 0 {
				want, err := baseline.Admit(testContext(t), admission.Request{Object: obj(t, tt.object)})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Unpredictable) > 0 || !reflect.DeepEqual(res.Changes, want.Changes) || len(res.Warnings) > 0 {
					t.Errorf("unpredictable %q, changes %+v, warnings %q; want the write answered as without the policies (changes %+v)",
						res.Unpredictable, res.Changes, res.Warnings, want.Changes)
				}
				if d := cmp.Diff(withoutRandom(want.Object), withoutRandom(res.Object)); d != "" {
					t.Errorf("stored object differs from the one without the policies (-without +with):\n%s", d)
				}
				return
			}
			found := false
			for _, u := range res.Unpredictable {
				all := true
				for _, want := range tt.unpredictable {
					all = all && strings.Contains(u, want)
				}
				found = found || all
			}
			if !found {
				t.Errorf("unpredictable %q, want an entry containing all of %q", res.Unpredictable, tt.unpredictable)
			}
		})
	}
}

// withoutRandom is a stored Pod without what differs between two
// admissions of the same Pod: its uid, times (creation, managedFields) and the generated
// name of its service account token volume.
func withoutRandom(o map[string]any) map[string]any {
	u := (&unstructured.Unstructured{Object: o}).DeepCopy()
	for _, f := range [][]string{{"metadata", "uid"}, {"metadata", "creationTimestamp"}, {"metadata", "managedFields"}, {"spec", "volumes"}} {
		unstructured.RemoveNestedField(u.Object, f...)
	}
	containers, _, _ := unstructured.NestedSlice(u.Object, "spec", "containers")
	for _, c := range containers {
		delete(c.(map[string]any), "volumeMounts")
	}
	_ = unstructured.SetNestedSlice(u.Object, containers, "spec", "containers")
	return u.Object
}

// An ImageValidatingPolicy on Pods also matches pod controllers, through
// Kyverno's autogen: the Deployment of Kyverno's conformance test reaches
// for the registry, named; one its matchConditions leave out does not.
func TestImageValidatingPolicyAutogen(t *testing.T) {
	chain := newChain(t, ivpolNamespaces, conformance(t, "image-validating-policies_validation-actions_deny"))
	deploy := func(prod string) string {
		return `
apiVersion: apps/v1
kind: Deployment
metadata: {name: unsigned-deployment, namespace: apps, labels: {prod: "` + prod + `", app: nginx}}
spec:
  selector: {matchLabels: {prod: "` + prod + `", app: nginx}}
  template:
    metadata: {labels: {prod: "` + prod + `", app: nginx}}
    spec: {containers: [{name: nginx, image: ghcr.io/kyverno/test-verify-image:unsigned}]}
`
	}
	tests := []struct {
		name, prod, unpredictable string
	}{
		{name: "matched", prod: "true",
			unpredictable: "webhook ivpol.validate.kyverno.svc-fail-finegrained-check-signed-images: Kyverno ImageValidatingPolicy check-signed-images: verifying ghcr.io/kyverno/test-verify-image:unsigned needs a registry"},
		{name: "matchConditions leave it out", prod: "false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, deploy(tt.prod))})
			if err != nil {
				t.Fatal(err)
			}
			got := strings.Join(res.Unpredictable, "\n")
			if tt.unpredictable == "" {
				if !res.Allowed || got != "" {
					t.Errorf("allowed %v (%s), unpredictable %q; want allowed, none", res.Allowed, res.Message, got)
				}
				return
			}
			// Kyverno's conformance test, against a real registry, denies
			// with "Policy check-signed-images failed: failed to verify
			// image with notary cert"; offline the evaluation errors.
			if res.Allowed || !strings.Contains(res.Message, "Policy check-signed-images error") {
				t.Errorf("allowed %v (%s), want Kyverno's error denying", res.Allowed, res.Message)
			}
			if !strings.Contains(got, tt.unpredictable) {
				t.Errorf("unpredictable %q, want %q…", got, tt.unpredictable)
			}
		})
	}
}
