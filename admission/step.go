package admission

import (
	"strings"
)

// StepKind says what kind of admission step changed a field.
type StepKind string

// The kinds of admission steps that change objects.
const (
	// PluginStep is a built-in admission plugin; Name is the plugin's
	// (MutatingAdmissionWebhook when a webhook's change could not be
	// told from another's).
	PluginStep StepKind = "plugin"
	// PolicyStep is a MutatingAdmissionPolicy: Name and Binding when one
	// binding matched the request, Candidates when several did (the plugin
	// does not say which one made a change), neither when none is known.
	PolicyStep StepKind = "MutatingAdmissionPolicy"
	// WebhookStep is a mutating webhook; Name is the webhook's.
	WebhookStep StepKind = "webhook"
)

// Step is the admission step that made a change.
type Step struct {
	Kind StepKind `json:"kind"`
	// Name is the plugin's, the policy's or the webhook's name.
	Name string `json:"name,omitempty"`
	// Binding is the MutatingAdmissionPolicyBinding of a PolicyStep.
	Binding string `json:"binding,omitempty"`
	// Candidates are the policy steps one of which made the change.
	Candidates []Step `json:"candidates,omitempty"`
}

// policyPrefix starts the text of a MutatingAdmissionPolicy step.
const policyPrefix = "MutatingAdmissionPolicy"

// String is how results show the step: a plugin's name,
// "MutatingAdmissionPolicy/NAME (binding B)", "one of ..." listing the
// candidate policies, or "webhook NAME".
func (s Step) String() string {
	switch s.Kind {
	case WebhookStep:
		return "webhook " + s.Name
	case PolicyStep:
		switch {
		case len(s.Candidates) > 0:
			texts := make([]string, len(s.Candidates))
			for i, c := range s.Candidates {
				texts[i] = c.String()
			}
			return "one of " + strings.Join(texts, ", ")
		case s.Name == "":
			return policyPrefix
		}
		return policyPrefix + "/" + s.Name + " (binding " + s.Binding + ")"
	}
	return s.Name
}
