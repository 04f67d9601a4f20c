package drift

import (
	"reflect"
	"sort"
	"strings"

	"github.com/go-openapi/jsonpointer"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
)

// FieldsBetween lists the fields that differ between desired and live, leaf
// by leaf (lists of different length whole).
func FieldsBetween(desired, live map[string]any) []Field {
	var out []Field
	for _, p := range admission.Diff(desired, live) {
		f := Field{Pointer: p}
		f.Desired, f.DesiredAbsent = lookup(desired, p)
		f.Live, f.LiveAbsent = lookup(live, p)
		out = append(out, f)
	}
	return out
}

// lookup returns the value at a JSON pointer and whether it is absent.
func lookup(doc map[string]any, pointer string) (any, bool) {
	if pointer == "/" || pointer == "" {
		return doc, doc == nil
	}
	p, err := jsonpointer.New(pointer)
	if err != nil {
		return nil, true
	}
	v, _, err := p.Get(doc)
	if err != nil {
		return nil, true
	}
	return v, false
}

// isSecret reports whether values of obj must never be shown.
func isSecret(obj map[string]any) bool {
	u := unstructured.Unstructured{Object: obj}
	return u.GetKind() == "Secret" && u.GroupVersionKind().Group == ""
}

// masked is what a Secret value is shown as.
const masked = "***"

// maskSecrets replaces the values of a Secret's data and stringData in
// both documents so that no output shows them, while a difference stays
// visible: equal values become "***", different ones "*** (desired)" and
// "*** (live)", as Flux's sanitiser does with before/after.
func maskSecrets(desired, live map[string]any) {
	if !isSecret(desired) && !isSecret(live) {
		return
	}
	for _, key := range []string{"data", "stringData"} {
		d, _ := desired[key].(map[string]any)
		l, _ := live[key].(map[string]any)
		for k, dv := range d {
			if lv, ok := l[k]; ok && reflect.DeepEqual(lv, dv) {
				d[k], l[k] = masked, masked
				continue
			}
			d[k] = masked + " (desired)"
		}
		for k, lv := range l {
			if lv != masked {
				l[k] = masked + " (live)"
			}
		}
	}
}

// maskSecretFields masks the values of a Secret's data fields; other kinds
// (a ConfigMap's data) are shown.
func maskSecretFields(o *Object) {
	if o.Kind != "Secret" || o.APIVersion != "v1" {
		return
	}
	fields := o.Fields
	for i := range fields {
		p := fields[i].Pointer
		if p == "/data" || p == "/stringData" || strings.HasPrefix(p, "/data/") || strings.HasPrefix(p, "/stringData/") {
			if !fields[i].DesiredAbsent {
				fields[i].Desired = masked + " (desired)"
			}
			if !fields[i].LiveAbsent {
				fields[i].Live = masked + " (live)"
			}
		}
	}
}

func sortFields(fields []Field) {
	sort.SliceStable(fields, func(i, j int) bool { return fields[i].Pointer < fields[j].Pointer })
}
