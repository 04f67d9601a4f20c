package admission_test

import (
	"reflect"
	"testing"

	"github.com/truce-dev/truce/admission"
)

func TestStepText(t *testing.T) {
	mirror := admission.Step{Kind: admission.PolicyStep, Name: "mirror", Binding: "mirror-binding"}
	label := admission.Step{Kind: admission.PolicyStep, Name: "label", Binding: "label-binding"}
	for _, tc := range []struct {
		step admission.Step
		text string
	}{
		{admission.Step{Kind: admission.PluginStep, Name: "ServiceAccount"}, "ServiceAccount"},
		{admission.Step{Kind: admission.PluginStep, Name: "MutatingAdmissionWebhook"}, "MutatingAdmissionWebhook"},
		{admission.Step{Kind: admission.WebhookStep, Name: "sidecar.example.com"}, "webhook sidecar.example.com"},
		{mirror, "MutatingAdmissionPolicy/mirror (binding mirror-binding)"},
		{admission.Step{Kind: admission.PolicyStep}, "MutatingAdmissionPolicy"},
		{admission.Step{Kind: admission.PolicyStep, Candidates: []admission.Step{label, mirror}},
			"one of MutatingAdmissionPolicy/label (binding label-binding), MutatingAdmissionPolicy/mirror (binding mirror-binding)"},
	} {
		if got := tc.step.String(); got != tc.text {
			t.Errorf("%+v reads %q, want %q", tc.step, got, tc.text)
		}
	}
}

// TestChangeSteps: the changes of a write carry their steps typed.
func TestChangeSteps(t *testing.T) {
	c := newChain(t, admission.Options{}, namespace("steps"), mapPolicy("steps", "configmaps", setMutatedLabel, inNamespace("steps")))
	res := admit(t, c, admission.Request{Object: object(t, cmWith("c", "steps", nil, nil))})
	want := []admission.Change{{Path: "/metadata/labels", By: "MutatingAdmissionPolicy/steps (binding steps-binding)",
		Step: admission.Step{Kind: admission.PolicyStep, Name: "steps", Binding: "steps-binding"}}}
	if !reflect.DeepEqual(res.Changes, want) {
		t.Errorf("changes %+v, want %+v", res.Changes, want)
	}
}
