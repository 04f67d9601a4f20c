package gatekeeper_test

import (
	"strings"
	"testing"
)

// A mutator whose value comes from an external data provider cannot be
// predicted offline: truce calls no provider. The write it changes is
// reported unpredictable, naming the provider, the field it would set
// keeps the value it held when the mutator ran, and the other mutators
// still apply. (Before,
// Gatekeeper's failure to reach the provider denied the write: a false
// rejection.)
func TestExternalDataIsUnpredictable(t *testing.T) {
	externalImage := `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: image-digest}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  match: {namespaces: [apps]}
  location: "spec.template.spec.containers[name: *].image"
  parameters:
    assign:
      externalData: {provider: tag-to-digest, dataSource: ValueAtLocation, failurePolicy: %s}
---
apiVersion: externaldata.gatekeeper.sh/v1beta1
kind: Provider
metadata: {name: tag-to-digest}
spec: {url: "https://tag-to-digest.gatekeeper-system:8090/digest", timeout: 3}
`
	externalLabel := `
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: owner}
spec:
  match: {namespaces: [apps]}
  location: metadata.labels.owner
  parameters:
    assign:
      externalData: {provider: owners, dataSource: Username}
`
	replicas := `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: replicas}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: spec.replicas
  parameters: {assign: {value: 3}}
`
	tests := []struct {
		name, policies, namespace string
		unpredictable             string
		want                      map[string]any
	}{{
		name:          "external data beside another mutator",
		policies:      strings.ReplaceAll(externalImage, "%s", "Fail") + "---" + replicas,
		namespace:     "apps",
		unpredictable: "webhook mutation.gatekeeper.sh: Gatekeeper mutators take a value from external data (Provider tag-to-digest), which truce does not call offline",
		want:          map[string]any{"/spec/replicas": int64(3), "/spec/template/spec/containers/0/image": "nginx:1.27"},
	}, {
		name:          "failurePolicy Ignore is as unknown",
		policies:      strings.ReplaceAll(externalImage, "%s", "Ignore"),
		namespace:     "apps",
		unpredictable: "(Provider tag-to-digest)",
		want:          map[string]any{"/spec/template/spec/containers/0/image": "nginx:1.27"},
	}, {
		name:          "a label the write does not have is left out",
		policies:      externalLabel + "---" + strings.ReplaceAll(externalImage, "%s", "Fail"),
		namespace:     "apps",
		unpredictable: "(Provider owners, tag-to-digest)",
		want:          map[string]any{"/metadata/labels/owner": nil, "/spec/template/spec/containers/0/image": "nginx:1.27"},
	}, {
		// Gatekeeper's own example (test/externaldata/dummy-provider):
		// a sidecar Assign adds a container, external data then sets its
		// image; the image the sidecar gave stays.
		name: "a value another mutator set stays",
		policies: strings.ReplaceAll(externalImage, "%s", "Fail") + `---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: a-sidecar}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: "spec.template.spec.containers[name:networking]"
  parameters: {assign: {value: {name: networking, image: busybox}}}
`,
		namespace:     "apps",
		unpredictable: "(Provider tag-to-digest)",
		want:          map[string]any{"/spec/template/spec/containers/1/image": "busybox", "/spec/template/spec/containers/0/image": "nginx:1.27"},
	}, {
		name:      "a write the mutator does not match is predicted",
		policies:  strings.ReplaceAll(externalImage, "%s", "Fail") + "---" + replicas,
		namespace: "excluded", // not among the mutator's namespaces
		want:      map[string]any{"/spec/replicas": int64(3)},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := admitDeployment(t, tc.policies, tc.namespace, tc.want)
			got := strings.Join(res.Unpredictable, "; ")
			if tc.unpredictable == "" && got != "" || !strings.Contains(got, tc.unpredictable) {
				t.Errorf("unpredictable %q, want %q", got, tc.unpredictable)
			}
		})
	}
}
