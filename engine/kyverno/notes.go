package kyverno

import (
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// notes are what Kyverno did with the policies beyond any one request,
// kept for the user once each: a policy its engines left out or could only
// partly place, and why its generator did not turn a policy into a
// built-in admission policy (the message Kyverno writes in the policy's
// status). The chain is rebuilt many times in one run; a note is kept
// once.
type notes struct {
	mu   sync.Mutex
	seen map[string]bool
	list []string
	// per counts the notes of each source of failures (a background
	// writer), so that a rule failing for every one of thousands of
	// objects gives a few examples, not thousands of notes.
	per map[string]int
}

// maxFailureNotes is how many distinct failures of one source are kept.
const maxFailureNotes = 5

func (n *notes) add(note string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.addLocked(note)
}

// addLocked keeps note unless it is kept already; n.mu is held.
func (n *notes) addLocked(note string) {
	if n.seen[note] {
		return
	}
	if n.seen == nil {
		n.seen = map[string]bool{}
	}
	n.seen[note] = true
	n.list = append(n.list, note)
}

// failures keeps what Kyverno's background and cleanup controllers failed
// at for who (a writer, or the cleanup policies read): Kyverno fails the
// UpdateRequest or refuses the policy, which its users see, so truce's
// must too. Past maxFailureNotes distinct ones, a last note says more
// were left out.
func (n *notes) failures(who string, errs []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, e := range errs {
		if n.seen[who+": "+e] {
			continue
		}
		if n.per == nil {
			n.per = map[string]int{}
		}
		count := n.per[who]
		n.per[who] = count + 1
		switch {
		case count < maxFailureNotes:
			n.addLocked(who + ": " + e)
		case count == maxFailureNotes:
			n.addLocked(fmt.Sprintf("%s: more failures than the %d above (%s=1 logs every one)", who, maxFailureNotes, LogEnv))
		}
	}
}

// Notes implements admission.Noter.
func (e *Engine) Notes() []string {
	e.notes.mu.Lock()
	defer e.notes.mu.Unlock()
	return append([]string(nil), e.notes.list...)
}

// noteInstall keeps what an installation left out: the helper's load
// warnings, the generator's, and its refusals of policies that asked to be
// generated (Kyverno writes a status on every policy it looks at; most
// never asked, and "not set to true" is no news).
func (e *Engine) noteInstall(objs []*unstructured.Unstructured, gen *generatedPolicies, loadWarnings []string) {
	for _, w := range gen.warnings {
		e.notes.add(w)
	}
	asked := map[string]bool{}
	for _, o := range objs {
		if asksToBeGenerated(o) {
			asked[o.GetKind()+"/"+o.GetName()] = true
		}
	}
	for _, s := range gen.statuses {
		if !s.Generated && s.Message != "" && asked[s.Kind+"/"+s.Name] {
			e.notes.add(fmt.Sprintf("%s %s asks to become a built-in admission policy but stays with Kyverno's webhook: Kyverno's generator says %q", s.Kind, s.Name, s.Message))
		}
	}
	for _, w := range loadWarnings {
		e.notes.add(w)
	}
}

// asksToBeGenerated reports whether a cluster-wide policy asks Kyverno to
// turn it into a ValidatingAdmissionPolicy or MutatingAdmissionPolicy:
// a ClusterPolicy rule's validate.cel.generate, a ValidatingPolicy's or
// MutatingPolicy's spec.autogen.{validating,mutating}AdmissionPolicy.enabled.
func asksToBeGenerated(o *unstructured.Unstructured) bool {
	if o.GetNamespace() != "" {
		return false
	}
	gvk := o.GroupVersionKind()
	switch {
	case gvk.Group == GroupLegacy && gvk.Kind == "ClusterPolicy":
		rules, _, _ := unstructured.NestedSlice(o.Object, "spec", "rules")
		for _, r := range rules {
			rule, _ := r.(map[string]any)
			if on, _, _ := unstructured.NestedBool(rule, "validate", "cel", "generate"); on {
				return true
			}
		}
	case gvk.Group == GroupCEL && gvk.Kind == "ValidatingPolicy":
		on, _, _ := unstructured.NestedBool(o.Object, "spec", "autogen", "validatingAdmissionPolicy", "enabled")
		return on
	case gvk.Group == GroupCEL && gvk.Kind == "MutatingPolicy":
		on, _, _ := unstructured.NestedBool(o.Object, "spec", "autogen", "mutatingAdmissionPolicy", "enabled")
		return on
	}
	return false
}
