package differential

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// The generator builds random but reproducible cases from a seed: a
// namespace, up to three MutatingAdmissionPolicies and three
// ValidatingAdmissionPolicies (with matchConditions, namespace and object
// selectors, params), and one object to write (Deployment, ConfigMap, Pod
// or a custom resource). Case i of seed S depends on (S, i) only, so one
// case can be rerun alone.
//
// The server runs policies in an unspecified order, so generated policies
// are order-independent:
//   - each MAP writes only its own key (label or annotation
//     gen.truce.dev/mN), and matchConditions and VAPs look only at fields
//     no MAP writes, except that a VAP may check a MAP's key when there is
//     exactly one MAP;
//   - at most one VAP has the Deny action (the denial names the first
//     failing policy) and at most one has Audit (the
//     validation_failure audit annotation lists failures in evaluation
//     order).

// GeneratedArea is the area of generated cases.
const GeneratedArea = "generated"

// GeneratedCase is one generated case as the files of a case directory.
type GeneratedCase struct {
	Name  string
	Files map[string]string // cluster.yaml, write.yaml, case.yaml
}

// WriteTo writes the case's files to dir/<name>/ and returns that directory.
func (g *GeneratedCase) WriteTo(dir string) (string, error) {
	d := filepath.Join(dir, g.Name)
	if err := os.MkdirAll(d, 0o755); err != nil {
		return "", err
	}
	for name, content := range g.Files {
		if err := os.WriteFile(filepath.Join(d, name), []byte(content), 0o644); err != nil {
			return "", err
		}
	}
	return d, nil
}

// String prints the case as files, ready to be added to the corpus.
func (g *GeneratedCase) String() string {
	var b strings.Builder
	for _, name := range []string{SpecFile, ClusterFile, WriteFile} {
		fmt.Fprintf(&b, "----- %s/%s/%s -----\n%s", GeneratedArea, g.Name, name, g.Files[name])
	}
	return b.String()
}

type gen struct {
	r *rand.Rand
}

func (g *gen) pick(options ...string) string { return options[g.r.IntN(len(options))] }
func (g *gen) chance(p float64) bool         { return g.r.Float64() < p }

// target is the kind of object a case writes.
type target struct {
	kind, apiVersion, group, version, resource string
}

var targets = []target{
	{"Deployment", "apps/v1", "apps", "v1", "deployments"},
	{"ConfigMap", "v1", "", "v1", "configmaps"},
	{"Pod", "v1", "", "v1", "pods"},
	{"Widget", "gen.truce.dev/v1", "gen.truce.dev", "v1", "widgets"},
}

// Generate returns case index of seed.
func Generate(seed uint64, index int) *GeneratedCase {
	g := &gen{r: rand.New(rand.NewPCG(seed, uint64(index)))}
	name := fmt.Sprintf("seed%d-case%03d", seed, index)
	ns := fmt.Sprintf("gen-%d", index)
	env := g.pick("prod", "dev")

	// The custom resource costs seconds per case (a new CRD); less often.
	tw := []int{3, 3, 3, 1}
	n := g.r.IntN(10)
	ti := 0
	for acc := 0; ti < len(tw); ti++ {
		acc += tw[ti]
		if n < acc {
			break
		}
	}
	tg := targets[ti]

	var cluster []map[string]any
	cluster = append(cluster, map[string]any{
		"apiVersion": "v1", "kind": "Namespace",
		"metadata": map[string]any{"name": ns, "labels": map[string]any{"env": env, "truce-e2e/generated": "true"}},
	})
	if tg.kind == "Widget" {
		cluster = append(cluster, widgetCRD())
	}

	objName := g.pick("web", "payments-api", "a-rather-long-object-name")
	labels := map[string]any{}
	if g.chance(0.8) {
		labels["app"] = g.pick("web", "db")
	}
	if g.chance(0.5) {
		labels["tier"] = g.pick("frontend", "backend")
	}
	obj := g.object(tg, objName, ns, labels)

	nMAP := g.r.IntN(4)
	nVAP := g.r.IntN(4)
	var descr []string
	rule := map[string]any{
		"apiGroups": []any{tg.group}, "apiVersions": []any{tg.version},
		"operations": []any{"CREATE"}, "resources": []any{tg.resource},
	}
	var mapKeys []string // label keys written by MAPs (for a single-MAP VAP)
	for j := 0; j < nMAP; j++ {
		pname := fmt.Sprintf("gen-m%d", j)
		key := fmt.Sprintf("gen.truce.dev/m%d", j)
		field := g.pick("labels", "annotations")
		value := fmt.Sprintf("'v%d'", j)
		spec := map[string]any{
			"failurePolicy":      "Fail",
			"reinvocationPolicy": g.pick("Never", "IfNeeded"),
			"matchConstraints":   map[string]any{"resourceRules": []any{rule}},
		}
		var paramRef map[string]any
		switch g.r.IntN(3) {
		case 1:
			value = "object.metadata.name"
		case 2:
			spec["paramKind"] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}
			cm := pname + "-params"
			cluster = append(cluster, map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": cm, "namespace": ns},
				"data":     map[string]any{"value": fmt.Sprintf("from-params-%d", j)},
			})
			paramRef = map[string]any{"name": cm, "namespace": ns, "parameterNotFoundAction": "Deny"}
			value = "params.data.value"
		}
		patchType := g.pick("ApplyConfiguration", "JSONPatch")
		var mutation map[string]any
		if patchType == "ApplyConfiguration" {
			mutation = map[string]any{"patchType": patchType, "applyConfiguration": map[string]any{
				"expression": fmt.Sprintf("Object{metadata: Object.metadata{%s: {%q: %s}}}", field, key, value),
			}}
		} else {
			mutation = map[string]any{"patchType": patchType, "jsonPatch": map[string]any{
				"expression": fmt.Sprintf(`has(object.metadata.%[1]s) ? [JSONPatch{op: "add", path: "/metadata/%[1]s/" + jsonpatch.escapeKey(%[2]q), value: %[3]s}] : [JSONPatch{op: "add", path: "/metadata/%[1]s", value: {%[2]q: %[3]s}}]`, field, key, value),
			}}
		}
		spec["mutations"] = []any{mutation}
		if g.chance(0.4) {
			spec["matchConditions"] = []any{g.matchCondition()}
		}
		cluster = append(cluster, map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicy",
			"metadata": map[string]any{"name": pname}, "spec": spec,
		})
		bspec := map[string]any{"policyName": pname}
		if sel := g.selector(ns); sel != nil {
			bspec["matchResources"] = sel
		}
		if paramRef != nil {
			bspec["paramRef"] = paramRef
		}
		cluster = append(cluster, map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingAdmissionPolicyBinding",
			"metadata": map[string]any{"name": pname}, "spec": bspec,
		})
		if field == "labels" {
			mapKeys = append(mapKeys, key)
		}
		descr = append(descr, fmt.Sprintf("MAP %s (%s, %s.%s=%s)", pname, patchType, field, key, value))
	}

	denyUsed, auditUsed := false, false
	for j := 0; j < nVAP; j++ {
		pname := fmt.Sprintf("gen-v%d", j)
		spec := map[string]any{
			"failurePolicy":    "Fail",
			"matchConstraints": map[string]any{"resourceRules": []any{rule}},
		}
		var paramRef map[string]any
		validation := g.validation(tg, mapKeys, nMAP)
		if g.chance(0.25) {
			spec["paramKind"] = map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}
			cm := pname + "-params"
			cluster = append(cluster, map[string]any{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": cm, "namespace": ns},
				"data":     map[string]any{"maxLen": g.pick("5", "12", "40")},
			})
			paramRef = map[string]any{"name": cm, "namespace": ns, "parameterNotFoundAction": "Deny"}
			validation = map[string]any{
				"expression":        "object.metadata.name.size() <= int(params.data.maxLen)",
				"messageExpression": "'name ' + object.metadata.name + ' is longer than ' + params.data.maxLen",
			}
		}
		spec["validations"] = []any{validation}
		if g.chance(0.3) {
			spec["matchConditions"] = []any{g.matchCondition()}
		}
		if g.chance(0.3) {
			spec["auditAnnotations"] = []any{map[string]any{"key": "name", "valueExpression": "'saw ' + object.metadata.name"}}
		}
		var actions []any
		for len(actions) == 0 {
			switch g.r.IntN(4) {
			case 0:
				if !denyUsed {
					actions, denyUsed = []any{"Deny"}, true
				}
			case 1:
				actions = []any{"Warn"}
			case 2:
				if !auditUsed {
					actions, auditUsed = []any{"Audit"}, true
				}
			case 3:
				if !auditUsed {
					actions, auditUsed = []any{"Warn", "Audit"}, true
				}
			}
		}
		cluster = append(cluster, map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
			"metadata": map[string]any{"name": pname}, "spec": spec,
		})
		bspec := map[string]any{"policyName": pname, "validationActions": actions}
		if sel := g.selector(ns); sel != nil {
			bspec["matchResources"] = sel
		}
		if paramRef != nil {
			bspec["paramRef"] = paramRef
		}
		cluster = append(cluster, map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
			"metadata": map[string]any{"name": pname}, "spec": bspec,
		})
		descr = append(descr, fmt.Sprintf("VAP %s %v (%s)", pname, actions, validation["expression"]))
	}

	// Webhooks (the suite's webhook server, see e2e/webhookserver): a
	// mutating one writing its own label, a validating one warning.
	// Mutating webhooks run after the MAPs, and a MAP with
	// reinvocationPolicy IfNeeded is reinvoked after the webhook's change;
	// every step is idempotent, so the order does not matter.
	var hooks []any
	if g.chance(0.3) {
		hooks = append(hooks, g.webhook("gen-label.truce-e2e.dev", "/add-label/gen-wh/"+g.pick("yes", "set-by-webhook"), tg, true))
		descr = append(descr, "mutating webhook adding label gen-wh")
	}
	if len(hooks) > 0 {
		cluster = append(cluster, map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
			"metadata": map[string]any{"name": "gen-mutating"}, "webhooks": hooks,
		})
	}
	if g.chance(0.2) {
		cluster = append(cluster, map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
			"metadata": map[string]any{"name": "gen-validating"},
			"webhooks": []any{g.webhook("gen-warn.truce-e2e.dev", "/warn/generated-webhook-warning", tg, false)},
		})
		descr = append(descr, "validating webhook warning")
	}

	if len(descr) == 0 {
		descr = []string{"no policies"}
	}
	spec := map[string]any{
		"description": fmt.Sprintf("generated (seed %d, case %d): %s %s/%s in a %s namespace; %s",
			seed, index, tg.kind, ns, objName, env, strings.Join(descr, "; ")),
		"compareAuditAnnotations": true,
		"expect":                  map[string]any{"operation": "CREATE"},
	}
	return &GeneratedCase{Name: name, Files: map[string]string{
		SpecFile:    mustYAML(spec),
		ClusterFile: joinYAML(cluster),
		WriteFile:   mustYAML(obj),
	}}
}

func (g *gen) object(tg target, name, ns string, labels map[string]any) map[string]any {
	md := map[string]any{"name": name, "namespace": ns}
	if len(labels) > 0 {
		md["labels"] = labels
	}
	obj := map[string]any{"apiVersion": tg.apiVersion, "kind": tg.kind, "metadata": md}
	containers := func() []any {
		var cs []any
		for i := 0; i <= g.r.IntN(2); i++ {
			cs = append(cs, map[string]any{"name": fmt.Sprintf("c%d", i), "image": g.pick("nginx:1.27", "registry.internal/envoy:v1.30", "busybox")})
		}
		return cs
	}
	switch tg.kind {
	case "Deployment":
		obj["spec"] = map[string]any{
			"replicas": g.r.IntN(6),
			"selector": map[string]any{"matchLabels": map[string]any{"pod": name}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"pod": name}},
				"spec":     map[string]any{"containers": containers()},
			},
		}
	case "ConfigMap":
		data := map[string]any{}
		for i := 0; i < g.r.IntN(4); i++ {
			data[fmt.Sprintf("k%d", i)] = g.pick("a", "bb", "ccc")
		}
		if len(data) > 0 {
			obj["data"] = data
		}
	case "Pod":
		obj["spec"] = map[string]any{"containers": containers()}
	case "Widget":
		obj["spec"] = map[string]any{"size": g.r.IntN(10), "color": g.pick("red", "blue")}
	}
	return obj
}

// webhook returns one webhook of the suite's webhook server (service
// webhook-system/truce-webhook) at path, for the target's CREATEs in the
// case's namespace. The runner expands {{CA_BUNDLE}}.
func (g *gen) webhook(name, path string, tg target, mutating bool) map[string]any {
	w := map[string]any{
		"name":                    name,
		"admissionReviewVersions": []any{"v1"},
		"sideEffects":             "None",
		"failurePolicy":           "Fail",
		"timeoutSeconds":          5,
		"clientConfig": map[string]any{
			"service":  map[string]any{"namespace": "webhook-system", "name": "truce-webhook", "path": path, "port": 443},
			"caBundle": "{{CA_BUNDLE}}",
		},
		"rules": []any{map[string]any{
			"apiGroups": []any{tg.group}, "apiVersions": []any{tg.version},
			"operations": []any{"CREATE"}, "resources": []any{tg.resource},
		}},
		"namespaceSelector": map[string]any{"matchLabels": map[string]any{"truce-e2e/generated": "true"}},
	}
	if mutating {
		w["reinvocationPolicy"] = g.pick("Never", "IfNeeded")
	}
	if g.chance(0.3) {
		w["matchConditions"] = []any{g.matchCondition()}
	}
	return w
}

func (g *gen) matchCondition() map[string]any {
	exprs := [][2]string{
		{"long-name", "object.metadata.name.size() > 5"},
		{"is-web", "has(object.metadata.labels) && 'app' in object.metadata.labels && object.metadata.labels['app'] == 'web'"},
		{"is-create", "request.operation == 'CREATE'"},
		{"not-backend", "!has(object.metadata.labels) || !('tier' in object.metadata.labels) || object.metadata.labels['tier'] != 'backend'"},
	}
	e := exprs[g.r.IntN(len(exprs))]
	return map[string]any{"name": e[0], "expression": e[1]}
}

// selector returns a binding's matchResources, or nil for none.
func (g *gen) selector(ns string) map[string]any {
	switch g.r.IntN(4) {
	case 1:
		return map[string]any{"namespaceSelector": map[string]any{"matchLabels": map[string]any{"env": "prod"}}}
	case 2:
		return map[string]any{"objectSelector": map[string]any{"matchLabels": map[string]any{"app": "web"}}}
	case 3:
		return map[string]any{
			"namespaceSelector": map[string]any{"matchExpressions": []any{map[string]any{"key": "kubernetes.io/metadata.name", "operator": "In", "values": []any{ns}}}},
			"objectSelector":    map[string]any{"matchExpressions": []any{map[string]any{"key": "tier", "operator": "NotIn", "values": []any{"backend"}}}},
		}
	}
	return nil
}

func (g *gen) validation(tg target, mapKeys []string, nMAP int) map[string]any {
	type v struct{ expr, msg string }
	opts := []v{
		{fmt.Sprintf("object.metadata.name.size() <= %d", []int{5, 12, 40}[g.r.IntN(3)]), "name too long"},
		{"has(object.metadata.labels) && 'app' in object.metadata.labels", ""},
	}
	switch tg.kind {
	case "Deployment":
		opts = append(opts, v{fmt.Sprintf("object.spec.replicas <= %d", g.r.IntN(5)), "too many replicas"},
			v{"object.spec.template.spec.containers.all(c, c.image.startsWith('registry.internal/'))", "images must come from registry.internal"})
	case "ConfigMap":
		opts = append(opts, v{fmt.Sprintf("!has(object.data) || object.data.size() <= %d", g.r.IntN(3)), "too many keys"})
	case "Pod":
		opts = append(opts, v{"object.spec.containers.all(c, c.image.startsWith('registry.internal/'))", "images must come from registry.internal"})
	case "Widget":
		opts = append(opts, v{fmt.Sprintf("object.spec.size <= %d", g.r.IntN(10)), "widget too big"})
	}
	if nMAP == 1 && len(mapKeys) == 1 {
		opts = append(opts, v{fmt.Sprintf("has(object.metadata.labels) && %q in object.metadata.labels", mapKeys[0]), "the MAP's label is missing"})
	}
	c := opts[g.r.IntN(len(opts))]
	out := map[string]any{"expression": c.expr}
	switch {
	case c.msg != "" && g.chance(0.5):
		out["message"] = c.msg
	case g.chance(0.5):
		out["messageExpression"] = "'rejected ' + object.metadata.name"
	}
	return out
}

func widgetCRD() map[string]any {
	return map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": "widgets.gen.truce.dev"},
		"spec": map[string]any{
			"group": "gen.truce.dev", "scope": "Namespaced",
			"names": map[string]any{"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
			"versions": []any{map[string]any{
				"name": "v1", "served": true, "storage": true,
				"schema": map[string]any{"openAPIV3Schema": map[string]any{
					"type": "object",
					"properties": map[string]any{"spec": map[string]any{
						"type": "object",
						"properties": map[string]any{
							"size":  map[string]any{"type": "integer"},
							"color": map[string]any{"type": "string"},
						},
					}},
				}},
			}},
		},
	}
}

func mustYAML(v any) string {
	data, err := yaml.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(data)
}

func joinYAML(objs []map[string]any) string {
	parts := make([]string, len(objs))
	for i, o := range objs {
		parts[i] = mustYAML(o)
	}
	return strings.Join(parts, "---\n")
}
