package admission

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/truce-dev/truce/schema"
)

// changes turns the recorded before/after snapshots of each mutating plugin
// into per-field changes, naming the webhook inside the webhook plugin from
// the patch audit annotations the server records.
func (c *Chain) changes(rec *recorder, resource *schema.Resource) ([]Change, error) {
	patches := webhookPatches(rec.annotations)
	var out []Change
	codec, _, err := c.handlerFor(resource)
	if err != nil {
		return nil, err
	}
	for _, s := range rec.steps {
		before, err := codec.encode(s.before, resource.GVK())
		if err != nil {
			return nil, fmt.Errorf("attributing changes of %s: %w", s.plugin, err)
		}
		after, err := codec.encode(s.after, resource.GVK())
		if err != nil {
			return nil, fmt.Errorf("attributing changes of %s: %w", s.plugin, err)
		}
		for _, p := range Diff(before.Object, after.Object) {
			st := Step{Kind: PluginStep, Name: s.plugin}
			switch s.plugin {
			case "MutatingAdmissionPolicy":
				st = policyStep(rec.mutatingPolicies)
			case "MutatingAdmissionWebhook":
				if name := patches.owner(s.round, p); name != "" {
					st = Step{Kind: WebhookStep, Name: name}
				}
			}
			out = append(out, Change{Path: p, By: st.String(), Round: s.round, Step: st})
		}
	}
	return out, nil
}

type webhookPatch struct {
	round   int
	webhook string
	paths   []string
}

type patchSet []webhookPatch

// owner returns the webhook whose patch touched path (or a parent or child
// of it) in the given round.
func (ps patchSet) owner(round int, path string) string {
	for _, p := range ps {
		if p.round != round {
			continue
		}
		for _, pp := range p.paths {
			if pp == path || strings.HasPrefix(path, pp+"/") || strings.HasPrefix(pp, path+"/") {
				return p.webhook
			}
		}
	}
	return ""
}

// webhookPatches parses patch.webhook.admission.k8s.io/round_N_index_M.
func webhookPatches(annotations map[string]string) patchSet {
	var out patchSet
	for _, k := range slices.Sorted(maps.Keys(annotations)) {
		rest, ok := strings.CutPrefix(k, "patch.webhook.admission.k8s.io/round_")
		if !ok {
			continue
		}
		round, err := strconv.Atoi(strings.SplitN(rest, "_", 2)[0])
		if err != nil {
			continue
		}
		var v struct {
			Webhook string `json:"webhook"`
			Patch   []struct {
				Path string `json:"path"`
			} `json:"patch"`
		}
		if err := json.Unmarshal([]byte(annotations[k]), &v); err != nil {
			continue
		}
		wp := webhookPatch{round: round, webhook: v.Webhook}
		for _, op := range v.Patch {
			wp.paths = append(wp.paths, op.Path)
		}
		out = append(out, wp)
	}
	return out
}

// Diff returns the JSON pointers of the leaves that differ between a and b:
// fields added, removed or changed. Lists of equal length are compared
// element by element; a list whose length changed is reported whole.
func Diff(a, b map[string]any) []string {
	var out []string
	diffValue("", a, b, &out)
	sort.Strings(out)
	return out
}

func diffValue(path string, a, b any, out *[]string) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, pathOrRoot(path))
			return
		}
		keys := map[string]bool{}
		for k := range av {
			keys[k] = true
		}
		for k := range bv {
			keys[k] = true
		}
		for k := range keys {
			diffValue(path+"/"+escapePointer(k), av[k], bv[k], out)
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			*out = append(*out, pathOrRoot(path))
			return
		}
		for i := range av {
			diffValue(path+"/"+strconv.Itoa(i), av[i], bv[i], out)
		}
	default:
		if !reflect.DeepEqual(normalizeNumber(a), normalizeNumber(b)) {
			*out = append(*out, pathOrRoot(path))
		}
	}
}

func normalizeNumber(v any) any {
	switch n := v.(type) {
	case int64:
		return float64(n)
	case int:
		return float64(n)
	case int32:
		return float64(n)
	}
	return v
}

func pathOrRoot(p string) string {
	if p == "" {
		return "/"
	}
	return p
}

// escapePointer escapes a key for a JSON pointer (RFC 6901).
func escapePointer(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}
