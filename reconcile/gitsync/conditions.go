package gitsync

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/truce-dev/truce/reconcile"
)

// Condition types of a GitSync.
const (
	// ConditionReady is True when the last pass left Git and the cluster
	// in agreement.
	ConditionReady = "Ready"
	// ConditionContested is True while truce leaves fields to another
	// writer; its message lists them.
	ConditionContested = "Contested"
)

// Condition reasons.
const (
	// ReasonSynced: the pass applied everything and nothing is contested.
	ReasonSynced = "Synced"
	// ReasonFailed: some objects could not be read, applied or pruned.
	ReasonFailed = "Failed"
	// ReasonContested: fields are left to another writer (Ready False,
	// Contested True).
	ReasonContested = "Contested"
	// ReasonError: the pass could not run (the source or the API server
	// unreachable, the state unreadable).
	ReasonError = "Error"
	// ReasonNoContest: Contested is False.
	ReasonNoContest = "NoContest"
)

// maxMessage bounds condition messages, well below the API's 32768.
const maxMessage = 4096

// Conditions are the Ready and Contested conditions that show the outcome
// of a pass (without transition times: meta.SetStatusCondition sets them).
func Conditions(st *reconcile.Status) []metav1.Condition {
	ready := metav1.Condition{Type: ConditionReady}
	contested := st.State.Contested
	switch {
	case len(st.Errors) > 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, ReasonFailed
		ready.Message = fmt.Sprintf("%s at %s: %s", plural(len(st.Errors), "error"), st.Revision, strings.Join(st.Errors, "; "))
	case len(contested) > 0:
		ready.Status, ready.Reason = metav1.ConditionFalse, ReasonContested
		ready.Message = fmt.Sprintf("%s contested at %s; truce stopped writing %s",
			plural(len(contested), "field"), st.Revision, pronoun(len(contested)))
	default:
		ready.Status, ready.Reason = metav1.ConditionTrue, ReasonSynced
		ready.Message = fmt.Sprintf("Applied revision %s: %d applied, %d unchanged, %d pruned",
			st.Revision, st.Applied, st.Unchanged, st.Pruned)
	}
	ready.Message = truncate(ready.Message)

	c := metav1.Condition{Type: ConditionContested, Status: metav1.ConditionFalse, Reason: ReasonNoContest,
		Message: "no field is contested"}
	if len(contested) > 0 {
		lines := make([]string, len(contested))
		for i, k := range contested {
			lines[i] = fmt.Sprintf("%s %s: %s (%d changes)", k.Ref, k.Pointer, k.Writer, k.Changes)
			if k.Fix.Kind != "" {
				lines[i] += "; fix: " + k.Fix.Kind
			}
		}
		c.Status, c.Reason = metav1.ConditionTrue, ReasonContested
		c.Message = truncate(strings.Join(lines, "\n"))
	}
	return []metav1.Condition{ready, c}
}

func plural(n int, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return fmt.Sprintf("%d %ss", n, what)
}

func pronoun(n int) string {
	if n == 1 {
		return "it"
	}
	return "them"
}

func truncate(s string) string {
	if len(s) <= maxMessage {
		return s
	}
	cut := maxMessage - len("...")
	for cut > 0 && !utf8RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "..."
}

func utf8RuneStart(b byte) bool { return b&0xC0 != 0x80 }
