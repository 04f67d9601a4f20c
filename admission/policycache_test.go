package admission_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
)

// paramsVAP validates ConfigMaps against a limit read from a param, with a
// variable, a match condition, a message expression and an audit
// annotation.
var paramsVAP = vap("limits", `
paramKind: {apiVersion: v1, kind: ConfigMap}
failurePolicy: Fail
matchConditions:
- name: not-exempt
  expression: '!has(object.metadata.labels) || !("exempt" in object.metadata.labels)'
variables:
- name: keys
  expression: 'has(object.data) ? object.data.size() : 0'
validations:
- expression: 'variables.keys <= int(params.data.max)'
  messageExpression: '"too many keys: " + string(variables.keys) + " > " + params.data.max'
auditAnnotations:
- key: keys
  valueExpression: 'string(variables.keys)'
`, `
paramRef: {name: limits, namespace: default, parameterNotFoundAction: Deny}
validationActions: [Deny, Audit]
`) + `
---
apiVersion: v1
kind: ConfigMap
metadata: {name: limits, namespace: default}
data: {max: "2"}
`

// paramsMAP labels ConfigMaps from a param, by JSONPatch, unless a match
// condition excludes them.
var paramsMAP = mapPolicy("owner", "configmaps", `
paramKind: {apiVersion: v1, kind: ConfigMap}
failurePolicy: Fail
reinvocationPolicy: IfNeeded
matchConditions:
- name: unlabelled
  expression: '!has(object.metadata.annotations) || !("owner" in object.metadata.annotations)'
variables:
- name: owner
  expression: 'params.data.owner'
mutations:
- patchType: JSONPatch
  jsonPatch:
    expression: >
      [JSONPatch{op: "add", path: "/metadata/annotations", value: {"owner": variables.owner}}]
`, `
paramRef: {name: owner, namespace: default, parameterNotFoundAction: Deny}
`) + `
---
apiVersion: v1
kind: ConfigMap
metadata: {name: owner, namespace: default}
data: {owner: platform}
`

// shelfCRD's items are a list whose merge strategy and item type the
// cases change: the same policies must follow each cluster's schema.
func shelfCRD(listType, sizeType string) string {
	return `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: shelves.example.com}
spec:
  group: example.com
  names: {plural: shelves, kind: Shelf}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: ` + sizeType + `}
              items:
                type: array
                x-kubernetes-list-type: ` + listType + `
` + map[string]string{"map": "                x-kubernetes-list-map-keys: [name]\n"}[listType] + `                items:
                  type: object
                  required: [name]
                  properties:
                    name: {type: string}
                    count: {type: integer}
`
}

// shelfPolicies set one item of a Shelf by ApplyConfiguration and check
// its size.
const shelfPolicies = `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: stock}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    resourceRules:
    - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [shelves]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: 'Object{spec: Object.spec{items: [Object.spec.items{name: "a", count: 9}]}}'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: stock}
spec: {policyName: stock}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: size}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: [example.com], apiVersions: [v1], operations: [CREATE, UPDATE], resources: [shelves]}
  validations:
  - expression: 'object.spec.size < 100'
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: size}
spec: {policyName: size, validationActions: [Deny]}
`

func shelf(size string) string {
	return `
apiVersion: example.com/v1
kind: Shelf
metadata: {name: s, namespace: default}
spec:
  size: ` + size + `
  items:
  - {name: a, count: 1}
  - {name: b, count: 1}
`
}

// runawayVAP's validation costs more than a CEL expression may spend.
var runawayVAP = vap("runaway", `
failurePolicy: Fail
variables:
- name: l
  expression: '[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17,18,19,20,21,22,23,24,25,26,27,28,29,30,31,32,33,34,35,36,37,38,39,40,41,42,43,44,45,46,47,48,49]'
validations:
- expression: 'variables.l.all(a, variables.l.all(b, variables.l.all(c, variables.l.all(d, a + b + c + d >= 0))))'
`, `validationActions: [Deny]`)

// TestCacheSameResults admits the same writes through chains without a
// shared cache (each compiles its own), with a fresh cache and with a
// cache already holding every policy, and compares every result.
func TestCacheSameResults(t *testing.T) {
	cases := []struct {
		name    string
		cluster []string
		writes  []string
		// check asserts something of the uncached results, so that
		// the comparison is about a chain that did run the policies.
		check func(t *testing.T, rs []*admission.Result)
	}{{
		name:    "params, variables, match conditions, messages, audit annotations",
		cluster: []string{paramsVAP, paramsMAP},
		writes: []string{
			cmWith("small", "default", map[string]string{"a": "1"}, nil),
			cmWith("big", "default", map[string]string{"a": "1", "b": "2", "c": "3"}, nil),
			cmWith("exempt", "default", map[string]string{"a": "1", "b": "2", "c": "3"}, map[string]string{"exempt": "yes"}),
		},
		check: func(t *testing.T, rs []*admission.Result) {
			if !rs[0].Allowed || rs[1].Allowed || !rs[2].Allowed {
				t.Fatalf("allowed: %v %v %v, want true false true", rs[0].Allowed, rs[1].Allowed, rs[2].Allowed)
			}
			if !strings.Contains(rs[1].Message, "too many keys: 3 > 2") {
				t.Errorf("message %q", rs[1].Message)
			}
			if rs[0].AuditAnnotations["limits/keys"] != "1" {
				t.Errorf("audit annotations %v", rs[0].AuditAnnotations)
			}
			if len(rs[0].Changes) == 0 {
				t.Errorf("the mutating policy changed nothing")
			}
		},
	}, {
		name:    "custom resources, list merged by key",
		cluster: []string{shelfCRD("map", "integer"), shelfPolicies},
		writes:  []string{shelf("3"), shelf("300")},
		check: func(t *testing.T, rs []*admission.Result) {
			if !rs[0].Allowed || rs[1].Allowed {
				t.Fatalf("allowed: %v %v, want true false", rs[0].Allowed, rs[1].Allowed)
			}
			if items := mustJSON(rs[0].Object["spec"].(map[string]any)["items"]); items != `[{"count":9,"name":"a"},{"count":1,"name":"b"}]` {
				t.Errorf("items %s, want a merged by key", items)
			}
		},
	}, {
		// The same policies as above on a cluster whose CRD changed:
		// compiled policies are shared, results follow the new schema.
		name:    "custom resources, string size",
		cluster: []string{shelfCRD("map", "string"), shelfPolicies},
		writes:  []string{shelf(`"3"`)},
		check: func(t *testing.T, rs []*admission.Result) {
			if rs[0].Allowed {
				t.Fatalf("allowed; want the size check to fail on a string")
			}
			if !strings.Contains(rs[0].Message, "no such overload") {
				t.Errorf("message %q", rs[0].Message)
			}
		},
	}, {
		name:    "custom resources, atomic list",
		cluster: []string{shelfCRD("atomic", "integer"), shelfPolicies},
		writes:  []string{shelf("3")},
		check: func(t *testing.T, rs []*admission.Result) {
			if rs[0].Allowed || !strings.Contains(rs[0].Message, "may not mutate atomic arrays") {
				t.Errorf("allowed %v, message %q; want the apply configuration refused on an atomic list", rs[0].Allowed, rs[0].Message)
			}
		},
	}, {
		name:    "runaway CEL",
		cluster: []string{runawayVAP},
		writes:  []string{cmWith("c", "default", nil, nil)},
		check: func(t *testing.T, rs []*admission.Result) {
			if rs[0].Allowed || !strings.Contains(rs[0].Message, "cost") {
				t.Errorf("allowed %v, message %q; want the cost limit to deny", rs[0].Allowed, rs[0].Message)
			}
		},
	}}
	cache := admission.NewCache(0)
	run := func(t *testing.T, cluster []string, writes []string, opts admission.Options) []*admission.Result {
		c := newChain(t, opts, cluster...)
		var out []*admission.Result
		for _, w := range writes {
			out = append(out, admit(t, c, admission.Request{Object: object(t, w)}))
		}
		return out
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want := run(t, tc.cluster, tc.writes, admission.Options{})
			tc.check(t, want)
			for _, round := range []string{"compiling", "compiled"} {
				before := cache.Stats()
				got := run(t, tc.cluster, tc.writes, admission.Options{Cache: cache})
				after := cache.Stats()
				if round == "compiled" && (after.Misses != before.Misses || after.Hits == before.Hits) {
					t.Errorf("%s: cache %+v then %+v; want only hits", round, before, after)
				}
				for i := range want {
					if g, w := comparable(t, got[i]), comparable(t, want[i]); g != w {
						t.Errorf("%s, write %d:\n got %s\nwant %s", round, i, g, w)
					}
				}
			}
		})
	}
}

// comparable is a result as JSON, status details included, without what
// differs between any two writes (uid, creation and managedFields times).
func comparable(t *testing.T, r *admission.Result) string {
	t.Helper()
	b, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if obj, ok := m["object"].(map[string]any); ok {
		meta := obj["metadata"].(map[string]any)
		delete(meta, "uid")
		delete(meta, "creationTimestamp")
		if mfs, ok := meta["managedFields"].([]any); ok {
			for _, mf := range mfs {
				delete(mf.(map[string]any), "time")
			}
		}
	}
	m["details"] = r.Details
	return mustJSON(m)
}

// TestCacheConcurrent builds and uses chains sharing one cache at once, as
// truce check's simulations do: compiled policies are shared between
// goroutines like kube-apiserver shares them between requests.
func TestCacheConcurrent(t *testing.T) {
	cluster := []string{paramsVAP, paramsMAP, shelfCRD("map", "integer"), shelfPolicies}
	writes := []string{
		cmWith("big", "default", map[string]string{"a": "1", "b": "2", "c": "3"}, nil),
		shelf("3"),
	}
	admitAll := func(t *testing.T, opts admission.Options) []string {
		c := newChain(t, opts, cluster...)
		var out []string
		for _, w := range writes {
			out = append(out, comparable(t, admit(t, c, admission.Request{Object: object(t, w)})))
		}
		return out
	}
	want := admitAll(t, admission.Options{})
	cache := admission.NewCache(0)
	got := make([][]string, 4)
	done := make(chan int)
	for i := range got {
		go func() {
			defer func() { done <- i }()
			got[i] = admitAll(t, admission.Options{Cache: cache})
		}()
	}
	for range got {
		<-done
	}
	for i := range got {
		for j := range want {
			if j >= len(got[i]) || got[i][j] != want[j] {
				t.Errorf("chain %d, write %d differs from the uncached chain", i, j)
			}
		}
	}
}
