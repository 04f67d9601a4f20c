package fix

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"

	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/simulate"
)

var celIdent = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// celReserved are CEL words that cannot follow a dot.
var celReserved = map[string]bool{
	"true": true, "false": true, "null": true, "in": true, "as": true, "break": true, "const": true,
	"continue": true, "else": true, "for": true, "function": true, "if": true, "import": true,
	"let": true, "loop": true, "package": true, "namespace": true, "return": true, "var": true, "void": true, "while": true,
}

// celPath turns a JSON pointer into a CEL field path on object.
func celPath(ptr string) (string, error) {
	toks, err := ignore.ParsePointer(ptr)
	if err != nil {
		return "", err
	}
	out := "object"
	for _, t := range toks {
		if n, err := strconv.Atoi(t); err == nil && n >= 0 {
			out += fmt.Sprintf("[%d]", n)
			continue
		}
		if celIdent.MatchString(t) && !celReserved[t] {
			out += "." + t
			continue
		}
		lit, _ := json.Marshal(t)
		out += "[" + string(lit) + "]"
	}
	return out, nil
}

// celLiteral writes a scalar as a CEL literal.
func celLiteral(v any) (string, error) {
	switch x := v.(type) {
	case string:
		b, _ := json.Marshal(x)
		return string(b), nil
	case bool:
		return strconv.FormatBool(x), nil
	case int64:
		return strconv.FormatInt(x, 10), nil
	case int:
		return strconv.Itoa(x), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("a %T value cannot be checked as a literal", v)
}

// show formats a value for a description.
func show(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// validatingPolicyDocument writes a ValidatingAdmissionPolicy with the
// mutating policy's matchConstraints, checks scoped to one object by
// matchConditions, and a Warn binding with the mutating binding's
// matchResources.
func validatingPolicyDocument(name string, mutating, binding map[string]any, namespace, object string, checks []string, message string) []byte {
	spec := map[string]any{"failurePolicy": "Fail"}
	if ms, ok := mutating["spec"].(map[string]any); ok {
		if mc, ok := ms["matchConstraints"]; ok {
			spec["matchConstraints"] = mc
		}
	}
	cond := fmt.Sprintf("object.metadata.name == %s", mustJSON(object))
	if namespace != "" {
		cond += fmt.Sprintf(" && object.metadata.namespace == %s", mustJSON(namespace))
	}
	spec["matchConditions"] = []any{map[string]any{"name": "the-object-in-the-loop", "expression": cond}}
	var vals []any
	for _, c := range checks {
		vals = append(vals, map[string]any{"expression": c, "message": message})
	}
	spec["validations"] = vals
	policy := map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}
	bspec := map[string]any{"policyName": name, "validationActions": []any{"Warn"}}
	if bs, ok := binding["spec"].(map[string]any); ok {
		if mr, ok := bs["matchResources"]; ok {
			bspec["matchResources"] = mr
		}
	}
	b := map[string]any{
		"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
		"metadata": map[string]any{"name": name}, "spec": bspec,
	}
	p, _ := yaml.Marshal(policy)
	bb, _ := yaml.Marshal(b)
	head := "# Written by truce fix: validate instead of mutate. Start in Warn; switch\n# validationActions to [Deny] once the manifests carry the value.\n"
	return []byte(head + string(p) + "---\n" + string(bb))
}

func mustJSON(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// jqPath writes a pointer through list items that have a name as an Argo
// CD jq path selecting the item by name (robust to reordering, unlike an
// index); ok is false when the pointer crosses no such list.
func jqPath(o *simulate.Object, ptr string) (string, bool) {
	if o.Drift == nil || o.Drift.Desired == nil {
		return "", false
	}
	toks, err := ignore.ParsePointer(ptr)
	if err != nil {
		return "", false
	}
	var cur any = o.Drift.Desired
	out := ""
	crossed := false
	for _, t := range toks {
		switch c := cur.(type) {
		case map[string]any:
			if celIdent.MatchString(t) {
				out += "." + t
			} else {
				out += "[" + mustJSON(t) + "]"
			}
			cur = c[t]
		case []any:
			n, err := strconv.Atoi(t)
			if err != nil || n < 0 || n >= len(c) {
				return "", false
			}
			item, _ := c[n].(map[string]any)
			name, ok := item["name"].(string)
			if !ok {
				return "", false
			}
			out += "[] | select(.name == " + mustJSON(name) + ") | "
			crossed = true
			cur = c[n]
		default:
			return "", false
		}
	}
	if !crossed {
		return "", false
	}
	// "| .image" reads better than "| .image" after a select; drop a
	// dangling separator.
	out = regexp.MustCompile(`\| \.`).ReplaceAllString(out, "| .")
	return out, true
}
