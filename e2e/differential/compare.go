package differential

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"github.com/google/go-cmp/cmp"
)

// IgnoredMetadata are the metadata fields left out of object comparison:
// storage assigns them (uid, resourceVersion, creationTimestamp,
// generation), and truce cannot and need not predict them.
var IgnoredMetadata = []string{"uid", "resourceVersion", "creationTimestamp", "generation"}

// managedFields are compared but for their times, which the server sets to
// the second of each write, and in an order that does not depend on them:
// the server sorts entries by operation, time, then manager, and the
// entries of -c objects are recorded at a later second by truce than by the
// server.

// IgnoredAuditAnnotationPrefixes are left out of audit annotation comparison:
// the authorizer's verdict (truce does not authorize) and the server's
// latency breakdown (added to slow requests only).
var IgnoredAuditAnnotationPrefixes = []string{"authorization.k8s.io/", "apiserver.latency.k8s.io/"}

// RequestLevelAuditAnnotationPrefixes are audit annotations kube-apiserver
// records only at audit level Request and above: the mutating webhook
// dispatcher adds the JSON patch a webhook applied with
// AddAnnotationWithLevel(..., LevelRequest) (k8s.io/apiserver
// pkg/admission/plugin/webhook/mutating/dispatcher.go). Every other
// admission annotation is recorded from Metadata up. truce reports all
// annotations whatever their level.
var RequestLevelAuditAnnotationPrefixes = []string{"patch.webhook.admission.k8s.io/"}

// CompareOptions select the optional comparisons.
type CompareOptions struct {
	AuditAnnotations bool
	// AuditLevel is the audit level the server recorded the request at
	// (the harness's policy: "Metadata"); annotations recorded only at a
	// higher level (RequestLevelAuditAnnotationPrefixes) are then dropped
	// from truce's side, since the server's log cannot show them. Empty
	// means Metadata.
	AuditLevel string
	// UnpredictableWebhooks: see Spec.UnpredictableWebhooks. The denial
	// message is not compared, and truce must name each of these
	// webhooks in its unpredictable list; with none, truce must name
	// no webhook there.
	UnpredictableWebhooks []string
}

// auditLevelAtLeastRequest reports whether level records Request-level
// annotations.
func auditLevelAtLeastRequest(level string) bool {
	switch level {
	case "Request", "RequestResponse":
		return true
	}
	return false
}

// Compare returns the differences between the server's result and truce's,
// one human-readable entry per difference; none means truce agreed.
//
//   - operation and allowed must be equal;
//   - when both denied: code, reason and message must be equal;
//   - warnings are compared as sorted lists: the server evaluates policies
//     and webhooks in an unspecified order, so the order of their
//     warnings is not something truce can match;
//   - when both allowed: the stored objects must be equal but for
//     IgnoredMetadata and the times of managedFields;
//   - with opts.AuditAnnotations: the audit annotations but for
//     IgnoredAuditAnnotationPrefixes.
func Compare(server, truce Result, opts CompareOptions) []string {
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }

	if server.Operation != truce.Operation {
		add("operation: server %q, truce %q", server.Operation, truce.Operation)
	}
	if server.Allowed != truce.Allowed {
		add("allowed: server %v, truce %v (server said %d %s %q)", server.Allowed, truce.Allowed, server.Code, server.Reason, server.Message)
	}
	if !server.Allowed && !truce.Allowed {
		if server.Code != truce.Code {
			add("code: server %d, truce %d", server.Code, truce.Code)
		}
		if server.Reason != truce.Reason {
			add("reason: server %q, truce %q", server.Reason, truce.Reason)
		}
		if len(opts.UnpredictableWebhooks) == 0 && server.Message != truce.Message {
			add("message:\n  server: %s\n  truce:  %s", server.Message, truce.Message)
		}
	}
	if d := cmp.Diff(sortedStrings(server.Warnings), sortedStrings(truce.Warnings)); d != "" {
		add("warnings (sorted; -server +truce):\n%s", d)
	}
	if server.Allowed && truce.Allowed {
		if d := cmp.Diff(NormalizeObject(server.Object), NormalizeObject(truce.Object)); d != "" {
			add("stored object (-server +truce):\n%s", d)
		}
	}
	for _, w := range opts.UnpredictableWebhooks {
		found := false
		for _, u := range truce.Unpredictable {
			if strings.Contains(u, w) {
				found = true
				break
			}
		}
		if !found {
			add("unpredictable: truce does not report webhook %q as unpredictable (it reports %q)", w, truce.Unpredictable)
		}
	}
	if len(opts.UnpredictableWebhooks) == 0 && len(truce.Unpredictable) > 0 {
		add("unpredictable: truce could not call %q, which the server called", truce.Unpredictable)
	}
	if opts.AuditAnnotations {
		srvAnn, truceAnn := FilterAuditAnnotations(server.AuditAnnotations), FilterAuditAnnotations(truce.AuditAnnotations)
		if !auditLevelAtLeastRequest(opts.AuditLevel) {
			truceAnn = dropPrefixes(truceAnn, RequestLevelAuditAnnotationPrefixes)
		}
		if d := cmp.Diff(srvAnn, truceAnn); d != "" {
			add("audit annotations (-server +truce):\n%s", d)
		}
	}
	return diffs
}

// NormalizeObject returns a JSON-normalized copy of obj (numbers as float64,
// as encoding/json decodes them, so an int64 from the server equals the
// same number parsed from truce's output) without IgnoredMetadata.
func NormalizeObject(obj map[string]any) any {
	if obj == nil {
		return nil
	}
	n := jsonNormalize(obj)
	m, ok := n.(map[string]any)
	if !ok {
		return n
	}
	if md, ok := m["metadata"].(map[string]any); ok {
		for _, f := range IgnoredMetadata {
			delete(md, f)
		}
		if entries, ok := md["managedFields"].([]any); ok {
			md["managedFields"] = normalizeManagedFields(entries)
		}
	}
	return m
}

// normalizeManagedFields drops the entries' times and sorts them by
// manager, operation, subresource and apiVersion.
func normalizeManagedFields(entries []any) []any {
	out := make([]any, 0, len(entries))
	for _, e := range entries {
		if m, ok := e.(map[string]any); ok {
			delete(m, "time")
		}
		out = append(out, e)
	}
	key := func(e any) string {
		m, _ := e.(map[string]any)
		var parts []string
		for _, f := range []string{"manager", "operation", "subresource", "apiVersion"} {
			v, _ := m[f].(string)
			parts = append(parts, v)
		}
		return strings.Join(parts, "\x00")
	}
	sort.SliceStable(out, func(i, j int) bool { return key(out[i]) < key(out[j]) })
	return out
}

// FilterAuditAnnotations drops IgnoredAuditAnnotationPrefixes; an empty
// result is nil so that "none" compares equal however it is spelt.
func FilterAuditAnnotations(in map[string]string) map[string]string {
	return dropPrefixes(in, IgnoredAuditAnnotationPrefixes)
}

// dropPrefixes returns in without the keys with one of prefixes (nil if
// nothing is left).
func dropPrefixes(in map[string]string, prefixes []string) map[string]string {
	var out map[string]string
	for k, v := range in {
		ignored := false
		for _, p := range prefixes {
			if strings.HasPrefix(k, p) {
				ignored = true
				break
			}
		}
		if ignored {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[k] = v
	}
	return out
}

func sortedStrings(in []string) []string {
	if len(in) == 0 {
		return nil
	}
	out := append([]string(nil), in...)
	sort.Strings(out)
	return out
}

// jsonNormalize round-trips v through encoding/json.
func jsonNormalize(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return v
	}
	var out any
	if err := json.Unmarshal(data, &out); err != nil {
		return v
	}
	return out
}

// CheckExpect returns how r falls short of e (nil e: nothing expected).
func CheckExpect(e *Expect, r Result) []string {
	if e == nil {
		return nil
	}
	var diffs []string
	add := func(format string, args ...any) { diffs = append(diffs, fmt.Sprintf(format, args...)) }
	if e.Allowed != nil && *e.Allowed != r.Allowed {
		add("expected allowed=%v, server said allowed=%v (%d %s %q)", *e.Allowed, r.Allowed, r.Code, r.Reason, r.Message)
	}
	if e.Operation != "" && e.Operation != r.Operation {
		add("expected operation %s, got %s", e.Operation, r.Operation)
	}
	if e.Code != 0 && e.Code != r.Code {
		add("expected code %d, got %d", e.Code, r.Code)
	}
	if e.Reason != "" && e.Reason != r.Reason {
		add("expected reason %q, got %q", e.Reason, r.Reason)
	}
	for _, m := range e.MessageContains {
		if !strings.Contains(r.Message, m) {
			add("expected message to contain %q, got %q", m, r.Message)
		}
	}
	for _, w := range e.WarningsContain {
		found := false
		for _, got := range r.Warnings {
			if strings.Contains(got, w) {
				found = true
				break
			}
		}
		if !found {
			add("expected a warning containing %q, got %q", w, r.Warnings)
		}
	}
	if e.NoWarnings && len(r.Warnings) > 0 {
		add("expected no warnings, got %q", r.Warnings)
	}
	if e.Object != nil {
		if r.Object == nil {
			add("expected a stored object, got none")
		} else {
			for _, d := range subsetDiff("", jsonNormalize(e.Object), jsonNormalize(r.Object)) {
				add("stored object: %s", d)
			}
		}
	}
	for k, v := range e.AuditAnnotations {
		if got, ok := r.AuditAnnotations[k]; !ok || got != v {
			add("expected audit annotation %s=%q, got %q (present: %v)", k, v, got, ok)
		}
	}
	return diffs
}

// subsetDiff reports where want is not a subset of got.
func subsetDiff(path string, want, got any) []string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return []string{fmt.Sprintf("%s: want an object, got %v", pathOrRoot(path), got)}
		}
		var out []string
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			gv, ok := g[k]
			if !ok {
				out = append(out, fmt.Sprintf("%s/%s: missing (want %v)", path, k, w[k]))
				continue
			}
			out = append(out, subsetDiff(path+"/"+k, w[k], gv)...)
		}
		return out
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return []string{fmt.Sprintf("%s: want %d-element list %v, got %v", pathOrRoot(path), len(w), w, got)}
		}
		var out []string
		for i := range w {
			out = append(out, subsetDiff(fmt.Sprintf("%s/%d", path, i), w[i], g[i])...)
		}
		return out
	default:
		if !reflect.DeepEqual(want, got) {
			return []string{fmt.Sprintf("%s: want %v, got %v", pathOrRoot(path), want, got)}
		}
		return nil
	}
}

func pathOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}
