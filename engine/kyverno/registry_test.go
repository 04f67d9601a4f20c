package kyverno_test

import (
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
)

// imageSize reads an image's manifest from its registry: offline, the rule
// errors naming the image, and Enforce blocks the write, where a helper
// with a real registry client would reach the internet from truce's machine.
const imageSize = `
apiVersion: kyverno.io/v1
kind: ClusterPolicy
metadata: {name: image-size}
spec:
  validationFailureAction: Enforce
  rules:
  - name: check-image
    match:
      any:
      - resources: {kinds: [ConfigMap]}
    context:
    - name: imageData
      imageRegistry:
        reference: "registry.example.com/web:1.0"
    validate:
      message: "the image is too large"
      deny:
        conditions:
          any:
          - key: "{{ imageData.manifest.config.size }}"
            operator: GreaterThan
            value: 1000000000
`

func TestRegistryOffline(t *testing.T) {
	chain := newChain(t, namespaces, imageSize)
	res, err := chain.Admit(testContext(t), admission.Request{Object: obj(t, configMap("c", "app: a"))})
	if err != nil {
		t.Fatal(err)
	}
	if res.Allowed {
		t.Fatalf("allowed; want the rule's error to block the write")
	}
	for _, want := range []string{"registry.example.com/web:1.0", "registries are not contacted"} {
		if !strings.Contains(res.Message, want) {
			t.Errorf("message %q, want it to contain %q", res.Message, want)
		}
	}
	// Kyverno's answer stands; truce names what it could not predict.
	want := "webhook validate.kyverno.svc-fail: Kyverno ClusterPolicy image-size rule check-image: "
	if len(res.Unpredictable) != 1 || !strings.HasPrefix(res.Unpredictable[0], want) ||
		!strings.Contains(res.Unpredictable[0], "registry.example.com/web:1.0") {
		t.Errorf("unpredictable %q, want one entry %q… naming the image", res.Unpredictable, want)
	}
}
