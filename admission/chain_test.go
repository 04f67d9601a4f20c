package admission_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/drift/ignore"
)

// ---------------------------------------------------------------------------
// Helpers shared by chain_test.go and webhook_test.go.

// parseYAML splits a multi-document YAML string and decodes every document
// into an unstructured object.
func parseYAML(t testing.TB, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range docs {
		for _, doc := range regexp.MustCompile(`(?m)^---\s*$`).Split(d, -1) {
			if strings.TrimSpace(doc) == "" {
				continue
			}
			m := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
				t.Fatalf("parsing YAML: %v\n%s", err, doc)
			}
			if len(m) == 0 {
				continue
			}
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

// object parses exactly one YAML document.
func object(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	objs := parseYAML(t, doc)
	if len(objs) != 1 {
		t.Fatalf("want one object, got %d", len(objs))
	}
	return objs[0]
}

// newChain builds a chain for the cluster described by the YAML documents;
// it is closed when the test ends.
func newChain(t testing.TB, opts admission.Options, cluster ...string) *admission.Chain {
	t.Helper()
	state, err := admission.NewState(parseYAML(t, cluster...)...)
	if err != nil {
		t.Fatalf("NewState: %v", err)
	}
	c, err := admission.NewChain(context.Background(), state, opts)
	if err != nil {
		t.Fatalf("NewChain: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

func admit(t testing.TB, c *admission.Chain, req admission.Request) *admission.Result {
	t.Helper()
	res, err := c.Admit(context.Background(), req)
	if err != nil {
		t.Fatalf("Admit: %v", err)
	}
	return res
}

// absent marks a field that must not exist in the stored object.
type absentT struct{}

var absent = absentT{}

// want is the expected answer of one write. Zero values are asserted too:
// nil warnings, annotations, changes and unpredictable mean "none".
type want struct {
	op      admission.Operation // default CREATE
	allowed bool
	code    int32
	reason  string
	message string
	// messagePrefix replaces message when the tail of the message cannot be
	// predicted (e.g. a dial error).
	messagePrefix string
	warnings      []string
	audit         map[string]string
	// fields maps JSON pointers into the stored object to their expected
	// value (compared as JSON), or to absent.
	fields map[string]any
	// changes is the exact, ordered change list.
	changes []admission.Change
	// changesIgnoreRounds compares changes as a set of (path, by), for
	// writes whose split between rounds depends on an order upstream leaves
	// unspecified.
	changesIgnoreRounds bool
	unpredictable       []string
	// notes are the result's caveats (none when nil).
	notes []string
	// podSecurityAudit asserts the pod-security.kubernetes.io/ audit
	// annotations too. kube-apiserver records them for every pod (e.g.
	// enforce-policy: "privileged:latest"); the chain does not (see
	// TestServerParityPodSecurityAuditAnnotations), so other tests leave them
	// out of the comparison.
	podSecurityAudit bool
	// extra runs further checks.
	extra func(t *testing.T, r *admission.Result)
}

func check(t *testing.T, got *admission.Result, w want) {
	t.Helper()
	op := w.op
	if op == "" {
		op = admission.Create
	}
	if got.Operation != op {
		t.Errorf("operation = %q, want %q", got.Operation, op)
	}
	if got.Allowed != w.allowed {
		t.Errorf("allowed = %v, want %v (code %d %s: %s)", got.Allowed, w.allowed, got.Code, got.Reason, got.Message)
	}
	if got.Code != w.code {
		t.Errorf("code = %d, want %d", got.Code, w.code)
	}
	if got.Reason != w.reason {
		t.Errorf("reason = %q, want %q", got.Reason, w.reason)
	}
	if w.messagePrefix != "" {
		if !strings.HasPrefix(got.Message, w.messagePrefix) {
			t.Errorf("message = %q\nwant prefix %q", got.Message, w.messagePrefix)
		}
	} else if got.Message != w.message {
		t.Errorf("message = %q\nwant        %q", got.Message, w.message)
	}
	if !equalStrings(got.Warnings, w.warnings) {
		t.Errorf("warnings = %q\nwant       %q", got.Warnings, w.warnings)
	}
	gotAudit := map[string]string{}
	for k, v := range got.AuditAnnotations {
		if !w.podSecurityAudit && strings.HasPrefix(k, "pod-security.kubernetes.io/") {
			continue
		}
		gotAudit[k] = v
	}
	wantAudit := map[string]string{}
	for k, v := range w.audit {
		if !w.podSecurityAudit && strings.HasPrefix(k, "pod-security.kubernetes.io/") {
			continue
		}
		wantAudit[k] = v
	}
	if !reflect.DeepEqual(gotAudit, wantAudit) {
		t.Errorf("audit annotations = %s\nwant                %s", mustJSON(gotAudit), mustJSON(wantAudit))
	}
	if !equalStrings(got.Unpredictable, w.unpredictable) {
		t.Errorf("unpredictable = %q, want %q", got.Unpredictable, w.unpredictable)
	}
	if !equalStrings(got.Notes, w.notes) {
		t.Errorf("notes = %q, want %q", got.Notes, w.notes)
	}
	if w.allowed {
		if got.Object == nil {
			t.Fatalf("allowed without an object")
		}
	} else if got.Object != nil {
		t.Errorf("denied but an object is returned")
	}
	for path, v := range w.fields {
		gv, ok := lookup(got.Object, path)
		if v == absent {
			if ok {
				t.Errorf("field %s = %s, want absent", path, mustJSON(gv))
			}
			continue
		}
		if !ok {
			t.Errorf("field %s absent, want %s", path, mustJSON(v))
			continue
		}
		if re, ok := v.(regexpValue); ok {
			if s, _ := gv.(string); !regexp.MustCompile(string(re)).MatchString(s) {
				t.Errorf("field %s = %s, want match %q", path, mustJSON(gv), string(re))
			}
			continue
		}
		if mustJSON(gv) != mustJSON(v) {
			t.Errorf("field %s = %s\nwant %s", path, mustJSON(gv), mustJSON(v))
		}
	}
	if w.changesIgnoreRounds {
		if !reflect.DeepEqual(changeSet(got.Changes), changeSet(w.changes)) {
			t.Errorf("changes (ignoring rounds) = %v\nwant %v", changeSet(got.Changes), changeSet(w.changes))
		}
	} else if !equalChanges(got.Changes, w.changes) {
		t.Errorf("changes = %s\nwant      %s", mustJSON(got.Changes), mustJSON(w.changes))
	}
	if w.extra != nil {
		w.extra(t, got)
	}
}

func changeSet(cs []admission.Change) map[string]bool {
	out := map[string]bool{}
	for _, c := range cs {
		out[c.Path+" by "+c.By] = true
	}
	return out
}

func equalStrings(a, b []string) bool {
	if len(a) == 0 && len(b) == 0 {
		return true
	}
	return reflect.DeepEqual(a, b)
}

// equalChanges compares path, text and round of got and want; each of got's
// typed steps must read as its text.
func equalChanges(got, want []admission.Change) bool {
	if len(got) != len(want) {
		return false
	}
	for i := range got {
		g, w := got[i], want[i]
		if g.Path != w.Path || g.By != w.By || g.Round != w.Round || g.Step.String() != g.By {
			return false
		}
	}
	return true
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprintf("<%v>", err)
	}
	return string(b)
}

// lookup resolves a JSON pointer (RFC 6901) in a decoded JSON object.
func lookup(obj map[string]any, pointer string) (any, bool) {
	if pointer == "" || pointer == "/" {
		return obj, obj != nil
	}
	toks, err := ignore.ParsePointer(pointer)
	if err != nil {
		return nil, false
	}
	return ignore.ValueAt(obj, toks)
}

// yamlValue decodes a YAML fragment into the JSON form stored objects use.
func yamlValue(t testing.TB, doc string) any {
	t.Helper()
	var v any
	if err := yaml.Unmarshal([]byte(doc), &v); err != nil {
		t.Fatalf("parsing YAML: %v\n%s", err, doc)
	}
	return v
}

// run admits each entry's write against c and checks the answer.
type entry struct {
	name   string
	write  string
	user   string
	groups []string
	want   want
}

func runTable(t *testing.T, c *admission.Chain, entries []entry) {
	t.Helper()
	for _, e := range entries {
		t.Run(e.name, func(t *testing.T) {
			res := admit(t, c, admission.Request{Source: "test:1", Object: object(t, e.write), User: e.user, Groups: e.groups})
			check(t, res, e.want)
		})
	}
}

// mapBy is how a change made by a MutatingAdmissionPolicy is attributed:
// "MutatingAdmissionPolicy/NAME (binding B)", or "one of ..." listing every
// binding that matched (sorted by binding name) when several did, since the
// plugin does not say which one made a change.
func mapBy(policyAndBinding ...string) string {
	var names []string
	for i := 0; i+1 < len(policyAndBinding); i += 2 {
		names = append(names, "MutatingAdmissionPolicy/"+policyAndBinding[i]+" (binding "+policyAndBinding[i+1]+")")
	}
	if len(names) == 1 {
		return names[0]
	}
	return "one of " + strings.Join(names, ", ")
}

// ---------------------------------------------------------------------------
// 1. Defaulting of built-in types.

const teamNamespace = `
apiVersion: v1
kind: Namespace
metadata:
  name: team
`

func TestDefaulting(t *testing.T) {
	c := newChain(t, admission.Options{}, teamNamespace)

	deploymentSpec := yamlValue(t, `
progressDeadlineSeconds: 600
replicas: 1
revisionHistoryLimit: 10
selector:
  matchLabels: {app: web}
strategy:
  type: RollingUpdate
  rollingUpdate: {maxSurge: 25%, maxUnavailable: 25%}
template:
  metadata:
    labels: {app: web}
  spec:
    containers:
    - name: pinned
      image: nginx:1.27
      imagePullPolicy: IfNotPresent
      ports:
      - containerPort: 80
        protocol: TCP
      resources: {}
      terminationMessagePath: /dev/termination-log
      terminationMessagePolicy: File
    - name: latest
      image: nginx:latest
      imagePullPolicy: Always
      resources: {}
      terminationMessagePath: /dev/termination-log
      terminationMessagePolicy: File
    - name: untagged
      image: nginx
      imagePullPolicy: Always
      resources: {}
      terminationMessagePath: /dev/termination-log
      terminationMessagePolicy: File
    - name: explicit
      image: nginx:latest
      imagePullPolicy: Never
      resources: {}
      terminationMessagePath: /dev/termination-log
      terminationMessagePolicy: File
    dnsPolicy: ClusterFirst
    restartPolicy: Always
    schedulerName: default-scheduler
    securityContext: {}
    terminationGracePeriodSeconds: 30
`)

	runTable(t, c, []entry{{
		name: "bare deployment",
		write: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: team
spec:
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: pinned
        image: nginx:1.27
        ports:
        - containerPort: 80
      - name: latest
        image: nginx:latest
      - name: untagged
        image: nginx
      - name: explicit
        image: nginx:latest
        imagePullPolicy: Never
`,
		want: want{
			allowed: true,
			fields: map[string]any{
				"/spec":                       deploymentSpec,
				"/status":                     map[string]any{},
				"/metadata/generation":        1,
				"/metadata/namespace":         "team",
				"/metadata/resourceVersion":   absent,
				"/metadata/labels":            absent,
				"/metadata/creationTimestamp": regexpValue(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$`),
				"/metadata/uid":               regexpValue(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`),
			},
			// Defaulting happens while decoding, before admission: no
			// admission plugin changed anything.
		},
	}, {
		name: "deployment in the default namespace when none is given",
		write: `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: nons
spec:
  replicas: 2
  strategy:
    type: Recreate
  selector:
    matchLabels: {app: nons}
  template:
    metadata:
      labels: {app: nons}
    spec:
      containers:
      - name: app
        image: busybox:1.36
`,
		want: want{
			allowed: true,
			fields: map[string]any{
				"/metadata/namespace": "default",
				"/spec/replicas":      2,
				"/spec/strategy":      map[string]any{"type": "Recreate"},
				"/spec/template/spec/containers/0/imagePullPolicy": "IfNotPresent",
			},
		},
	}, {
		name: "bare pod",
		write: `
apiVersion: v1
kind: Pod
metadata:
  name: p
  namespace: team
spec:
  containers:
  - name: app
    image: nginx:1.27
`,
		want: want{
			allowed: true,
			fields: map[string]any{
				"/spec/dnsPolicy":                             "ClusterFirst",
				"/spec/restartPolicy":                         "Always",
				"/spec/schedulerName":                         "default-scheduler",
				"/spec/securityContext":                       map[string]any{},
				"/spec/terminationGracePeriodSeconds":         30,
				"/spec/enableServiceLinks":                    true,
				"/spec/containers/0/imagePullPolicy":          "IfNotPresent",
				"/spec/containers/0/terminationMessagePath":   "/dev/termination-log",
				"/spec/containers/0/terminationMessagePolicy": "File",
				"/spec/containers/0/resources":                map[string]any{},
				// Admission plugins:
				"/spec/serviceAccountName": "default", // ServiceAccount
				"/spec/serviceAccount":     "default",
				"/spec/priority":           0, // Priority
				"/spec/preemptionPolicy":   "PreemptLowerPriority",
				"/spec/tolerations": yamlValue(t, `
- {key: node.kubernetes.io/not-ready, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
- {key: node.kubernetes.io/unreachable, operator: Exists, effect: NoExecute, tolerationSeconds: 300}
`), // DefaultTolerationSeconds
				// The registry's PrepareForCreate:
				"/status": map[string]any{"phase": "Pending", "qosClass": "BestEffort"},
			},
			extra: checkServiceAccountVolume,
			changes: []admission.Change{
				{Path: "/spec/containers/0/volumeMounts", By: "ServiceAccount"},
				{Path: "/spec/serviceAccount", By: "ServiceAccount"},
				{Path: "/spec/serviceAccountName", By: "ServiceAccount"},
				{Path: "/spec/volumes", By: "ServiceAccount"},
				{Path: "/spec/preemptionPolicy", By: "Priority"},
				{Path: "/spec/priority", By: "Priority"},
				{Path: "/spec/tolerations", By: "DefaultTolerationSeconds"},
			},
		},
	}, {
		name: "configmap is stored as sent",
		write: `
apiVersion: v1
kind: ConfigMap
metadata:
  name: cm
  namespace: team
  labels: {a: b}
data:
  k: v
`,
		want: want{
			allowed: true,
			fields: map[string]any{
				"/data":            map[string]any{"k": "v"},
				"/metadata/labels": map[string]any{"a": "b"},
			},
		},
	}})
}

// regexpValue matches a string field by regular expression in want.fields.
type regexpValue string

// checkServiceAccountVolume checks the projected token volume the
// ServiceAccount plugin adds (its name has a random suffix).
func checkServiceAccountVolume(t *testing.T, r *admission.Result) {
	t.Helper()
	name, _ := lookup(r.Object, "/spec/volumes/0/name")
	s, _ := name.(string)
	if !regexp.MustCompile(`^kube-api-access-[a-z0-9]{5}$`).MatchString(s) {
		t.Errorf("service account volume name = %q", s)
	}
	wantVolume := yamlValue(t, `
name: `+s+`
projected:
  defaultMode: 420
  sources:
  - serviceAccountToken: {expirationSeconds: 3607, path: token}
  - configMap:
      name: kube-root-ca.crt
      items: [{key: ca.crt, path: ca.crt}]
  - downwardAPI:
      items:
      - path: namespace
        fieldRef: {apiVersion: v1, fieldPath: metadata.namespace}
`)
	if got, _ := lookup(r.Object, "/spec/volumes"); mustJSON(got) != mustJSON([]any{wantVolume}) {
		t.Errorf("volumes = %s\nwant %s", mustJSON(got), mustJSON([]any{wantVolume}))
	}
	wantMounts := []any{map[string]any{"name": s, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount", "readOnly": true}}
	if got, _ := lookup(r.Object, "/spec/containers/0/volumeMounts"); mustJSON(got) != mustJSON(wantMounts) {
		t.Errorf("volumeMounts = %s\nwant %s", mustJSON(got), mustJSON(wantMounts))
	}
}

// ---------------------------------------------------------------------------
// 4. Pod Security Admission and 5. NamespaceLifecycle: one cluster; 6.
// authorization: another.

const builtinsCluster = teamNamespace + `
---
apiVersion: v1
kind: Namespace
metadata:
  name: psa-restricted
  labels:
    pod-security.kubernetes.io/enforce: restricted
---
apiVersion: v1
kind: Namespace
metadata:
  name: psa-warn
  labels:
    pod-security.kubernetes.io/warn: baseline
`

const aliceRBAC = `
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: configmap-writer
  namespace: team
rules:
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: alice-writes-configmaps
  namespace: team
subjects:
- apiGroup: rbac.authorization.k8s.io
  kind: User
  name: alice
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: configmap-writer
`

func privilegedPod(name, namespace string) string {
	return `
apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
spec:
  containers:
  - name: app
    image: nginx:1.27
    securityContext:
      privileged: true
`
}

func hostNetworkPod(name, namespace string) string {
	return `
apiVersion: v1
kind: Pod
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
spec:
  hostNetwork: true
  containers:
  - name: app
    image: nginx:1.27
`
}

func hostNetworkDeployment(name, namespace string) string {
	return `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
spec:
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `}
    spec:
      hostNetwork: true
      containers:
      - name: app
        image: nginx:1.27
`
}

const restrictedViolations = `host namespaces (hostNetwork=true), ` +
	`allowPrivilegeEscalation != false (container "app" must set securityContext.allowPrivilegeEscalation=false), ` +
	`unrestricted capabilities (container "app" must set securityContext.capabilities.drop=["ALL"]), ` +
	`runAsNonRoot != true (pod or container "app" must set securityContext.runAsNonRoot=true), ` +
	`seccompProfile (pod or container "app" must set securityContext.seccompProfile.type to "RuntimeDefault" or "Localhost")`

func configMap(name, namespace string) string {
	return `
apiVersion: v1
kind: ConfigMap
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
data:
  k: v
`
}

func TestPodSecurityAndNamespaceLifecycle(t *testing.T) {
	c := newChain(t, admission.Options{}, builtinsCluster)
	runTable(t, c, []entry{{
		name:  "podsecurity enforce restricted rejects a pod",
		write: hostNetworkPod("x", "psa-restricted"),
		want: want{
			code:    403,
			reason:  "Forbidden",
			message: `pods "x" is forbidden: violates PodSecurity "restricted:latest": ` + restrictedViolations,
			audit: map[string]string{
				"pod-security.kubernetes.io/enforce-policy": "restricted:latest",
			},
		},
	}, {
		name:  "podsecurity enforce restricted only warns on a deployment",
		write: hostNetworkDeployment("d", "psa-restricted"),
		want: want{
			allowed:  true,
			warnings: []string{`would violate PodSecurity "restricted:latest": ` + restrictedViolations},
			fields:   map[string]any{"/spec/template/spec/hostNetwork": true},
		},
	}, {
		name:  "podsecurity warn baseline warns on a deployment and allows it",
		write: hostNetworkDeployment("d", "psa-warn"),
		want: want{
			allowed:  true,
			warnings: []string{`would violate PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`},
			fields:   map[string]any{"/spec/template/spec/hostNetwork": true},
		},
	}, {
		name:  "podsecurity warn baseline allows a pod with a warning",
		write: hostNetworkPod("x", "psa-warn"),
		want: want{
			allowed:  true,
			warnings: []string{`would violate PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`},
			fields: map[string]any{
				"/spec/hostNetwork": true,
				"/spec/dnsPolicy":   "ClusterFirst",
			},
			extra: checkServiceAccountVolume,
			changes: []admission.Change{
				{Path: "/spec/containers/0/volumeMounts", By: "ServiceAccount"},
				{Path: "/spec/serviceAccount", By: "ServiceAccount"},
				{Path: "/spec/serviceAccountName", By: "ServiceAccount"},
				{Path: "/spec/volumes", By: "ServiceAccount"},
				{Path: "/spec/preemptionPolicy", By: "Priority"},
				{Path: "/spec/priority", By: "Priority"},
				{Path: "/spec/tolerations", By: "DefaultTolerationSeconds"},
			},
		},
	}, {
		// kube-apiserver's --allow-privileged defaults to false: the pod's
		// validation rejects it before Pod Security (a validating plugin)
		// runs.
		name:  "privileged pod with default flags",
		write: privilegedPod("x", "psa-restricted"),
		want: want{
			code:    422,
			reason:  "Invalid",
			message: `Pod "x" is invalid: spec.containers[0].securityContext.privileged: Forbidden: disallowed by cluster policy`,
		},
	}, {
		name:  "namespacelifecycle rejects a write into a missing namespace",
		write: configMap("cm", "nope"),
		want: want{
			code:    404,
			reason:  "NotFound",
			message: `namespaces "nope" not found`,
		},
	}, {
		name: "a namespace can be created",
		write: `
apiVersion: v1
kind: Namespace
metadata:
  name: fresh
`,
		want: want{
			allowed: true,
			fields: map[string]any{
				"/metadata/labels": map[string]any{"kubernetes.io/metadata.name": "fresh"},
				"/spec":            map[string]any{"finalizers": []any{"kubernetes"}},
				"/status":          map[string]any{"phase": "Active"},
			},
		},
	}})
}

func TestAuthorization(t *testing.T) {
	// Roles and RoleBindings in the cluster: see
	// TestServerParityUnregisteredAPIGroups.
	c := newChain(t, admission.Options{}, teamNamespace)
	runTable(t, c, []entry{{
		name: "rbac forbids what no role grants",
		write: `
apiVersion: v1
kind: Secret
metadata:
  name: s
  namespace: team
stringData:
  k: v
`,
		user: "alice",
		want: want{
			code:    403,
			reason:  "Forbidden",
			message: `secrets is forbidden: User "alice" cannot create resource "secrets" in API group "" in the namespace "team"`,
		},
	}, {
		name:  "rbac is checked before admission",
		write: configMap("cm", "nope"),
		user:  "alice",
		want: want{
			code:    403,
			reason:  "Forbidden",
			message: `configmaps is forbidden: User "alice" cannot create resource "configmaps" in API group "" in the namespace "nope"`,
		},
	}, {
		name:   "a user in system:masters may do anything",
		write:  configMap("cm", "team"),
		user:   "alice",
		groups: []string{"system:masters"},
		want:   want{allowed: true, fields: map[string]any{"/data": map[string]any{"k": "v"}}},
	}, {
		name:  "the cluster admin may do anything",
		write: configMap("cm", "team"),
		want:  want{allowed: true, fields: map[string]any{"/data": map[string]any{"k": "v"}}},
	}})
}

// ---------------------------------------------------------------------------
// 3. ValidatingAdmissionPolicy. Every case has its own namespace, selected
// by the binding through the kubernetes.io/metadata.name label the server
// puts on every namespace.

// vap returns a policy on configmaps and its binding (NAME-binding).
func vap(name, policySpec, bindingSpec string) string {
	return `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: ` + name + `
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
` + indent(policySpec, "  ") + `
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: ` + name + `-binding
spec:
  policyName: ` + name + `
` + indent(bindingSpec, "  ")
}

// inNamespace is a binding's matchResources selecting one namespace.
func inNamespace(ns string) string {
	return `
matchResources:
  namespaceSelector:
    matchLabels:
      kubernetes.io/metadata.name: ` + ns + `
`
}

func namespace(name string, labels ...string) string {
	s := "\n---\napiVersion: v1\nkind: Namespace\nmetadata:\n  name: " + name + "\n"
	if len(labels) > 0 {
		s += "  labels:\n"
		for i := 0; i+1 < len(labels); i += 2 {
			s += "    " + labels[i] + ": " + strconv.Quote(labels[i+1]) + "\n"
		}
	}
	return s
}

func indent(s, prefix string) string {
	lines := strings.Split(strings.Trim(s, "\n"), "\n")
	for i, l := range lines {
		if l != "" {
			lines[i] = prefix + l
		}
	}
	return strings.Join(lines, "\n")
}

const xMustBeOK = `
validations:
- expression: "object.data.x == 'ok'"
  message: "x must be ok"
`

func cmWith(name, namespace string, data map[string]string, labels map[string]string) string {
	s := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name + "\n  namespace: " + namespace + "\n"
	if len(labels) > 0 {
		s += "  labels:\n"
		for _, k := range sortedKeys(labels) {
			s += "    " + k + ": " + strconv.Quote(labels[k]) + "\n"
		}
	}
	if len(data) > 0 {
		s += "data:\n"
		for _, k := range sortedKeys(data) {
			s += "  " + k + ": " + strconv.Quote(data[k]) + "\n"
		}
	}
	return s
}

// withRV sets metadata.resourceVersion: an UPDATE sends the version it
// read (see TestServerParityUpdateResourceVersion for one that does not).
func withRV(doc, rv string) string {
	if !strings.Contains(doc, "\nmetadata:\n") {
		panic("withRV: no metadata in " + doc)
	}
	return strings.Replace(doc, "\nmetadata:\n", "\nmetadata:\n  resourceVersion: \""+rv+"\"\n", 1)
}

func sortedKeys(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func TestValidatingAdmissionPolicy(t *testing.T) {
	cluster := strings.Join([]string{
		namespace("vap-deny"), vap("vap-deny", xMustBeOK, "validationActions: [Deny]"+inNamespace("vap-deny")),
		namespace("vap-msgexpr"), vap("vap-msgexpr", `
validations:
- expression: "object.data.x == 'ok'"
  message: "the static message is not used"
  messageExpression: "'x is ' + object.data.x + ', not ok'"
`, "validationActions: [Deny]"+inNamespace("vap-msgexpr")),
		namespace("vap-reason"), vap("vap-reason", `
validations:
- expression: "object.data.x == 'ok'"
  message: "x must be ok"
  reason: Forbidden
`, "validationActions: [Deny]"+inNamespace("vap-reason")),
		namespace("vap-warn"), vap("vap-warn", xMustBeOK, "validationActions: [Warn]"+inNamespace("vap-warn")),
		namespace("vap-audit"), vap("vap-audit", xMustBeOK, "validationActions: [Audit]"+inNamespace("vap-audit")),
		namespace("vap-warn-audit"), vap("vap-warn-audit", xMustBeOK, "validationActions: [Warn, Audit]"+inNamespace("vap-warn-audit")),
		namespace("vap-annotations"), vap("vap-annotations", `
validations:
- expression: "object.data.x == 'ok'"
  message: "x must be ok"
auditAnnotations:
- key: name
  valueExpression: "'configmap ' + object.metadata.name"
- key: empty
  valueExpression: "''"
`, "validationActions: [Deny]"+inNamespace("vap-annotations")),
		namespace("vap-prod", "env", "prod"), namespace("vap-dev", "env", "dev"),
		vap("vap-nssel", xMustBeOK, `
validationActions: [Deny]
matchResources:
  namespaceSelector:
    matchLabels: {env: prod}
`),
		namespace("vap-objsel"), vap("vap-objsel", xMustBeOK, `
validationActions: [Deny]
matchResources:
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: vap-objsel}
  objectSelector:
    matchLabels: {checked: "true"}
`),
		namespace("vap-exclude"), vap("vap-exclude", xMustBeOK, `
validationActions: [Deny]
matchResources:
  namespaceSelector:
    matchLabels: {kubernetes.io/metadata.name: vap-exclude}
  excludeResourceRules:
  - apiGroups: [""]
    apiVersions: ["v1"]
    operations: ["*"]
    resources: ["configmaps"]
    resourceNames: ["exempt"]
`),
		namespace("vap-update"), withRV(cmWith("existing", "vap-update", map[string]string{"immutable": "a"}, nil), "100"),
		vap("vap-update", `
validations:
- expression: "oldObject == null || object.data.immutable == oldObject.data.immutable"
  message: "immutable may not change"
- expression: "request.operation == 'CREATE' ? oldObject == null : oldObject.metadata.name == object.metadata.name"
  message: "oldObject is the stored object on UPDATE and null on CREATE"
`, "validationActions: [Deny]"+inNamespace("vap-update")),
		namespace("vap-orphan"), `
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: vap-orphan-binding
spec:
  policyName: does-not-exist
  validationActions: [Deny]
`,
		namespace("vap-unbound"), `
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: vap-unbound
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["configmaps"]
  validations:
  - expression: "false"
    message: "never bound"
`,
		namespace("vap-ignore"), vap("vap-ignore", `
failurePolicy: Ignore
validations:
- expression: "object.data.missing == 'x'"
`, "validationActions: [Deny]"+inNamespace("vap-ignore")),
		`
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: vap-nsreq
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      operations: ["CREATE"]
      resources: ["namespaces"]
  validations:
  - expression: "request.namespace == object.metadata.name && namespaceObject == null"
    messageExpression: "'request.namespace is ' + request.namespace"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: vap-nsreq-binding
spec:
  policyName: vap-nsreq
  validationActions: [Deny]
  matchResources:
    objectSelector:
      matchLabels: {vap-nsreq: "true"}
`,
		namespace("vap-fail"), vap("vap-fail", `
failurePolicy: Fail
validations:
- expression: "object.data.missing == 'x'"
`, "validationActions: [Deny]"+inNamespace("vap-fail")),
	}, "\n---\n")
	c := newChain(t, admission.Options{}, cluster)

	bad := map[string]string{"x": "bad"}
	ok := map[string]string{"x": "ok"}
	deniedBy := func(policy, msg string) string {
		return `configmaps "c" is forbidden: ValidatingAdmissionPolicy '` + policy + `' with binding '` + policy + `-binding' denied request: ` + msg
	}
	runTable(t, c, []entry{{
		name:  "deny with message",
		write: cmWith("c", "vap-deny", bad, nil),
		want:  want{code: 422, reason: "Invalid", message: deniedBy("vap-deny", "x must be ok")},
	}, {
		name:  "deny passes",
		write: cmWith("c", "vap-deny", ok, nil),
		want:  want{allowed: true, fields: map[string]any{"/data": map[string]any{"x": "ok"}}},
	}, {
		name:  "deny with messageExpression",
		write: cmWith("c", "vap-msgexpr", bad, nil),
		want:  want{code: 422, reason: "Invalid", message: deniedBy("vap-msgexpr", "x is bad, not ok")},
	}, {
		name:  "deny with reason Forbidden",
		write: cmWith("c", "vap-reason", bad, nil),
		want:  want{code: 403, reason: "Forbidden", message: deniedBy("vap-reason", "x must be ok")},
	}, {
		name:  "warn",
		write: cmWith("c", "vap-warn", bad, nil),
		want: want{
			allowed:  true,
			warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'vap-warn' with binding 'vap-warn-binding': x must be ok"},
		},
	}, {
		name:  "warn passes",
		write: cmWith("c", "vap-warn", ok, nil),
		want:  want{allowed: true},
	}, {
		name:  "audit",
		write: cmWith("c", "vap-audit", bad, nil),
		want: want{
			allowed: true,
			audit: map[string]string{
				"validation.policy.admission.k8s.io/validation_failure": `[{"message":"x must be ok","policy":"vap-audit","binding":"vap-audit-binding","expressionIndex":0,"validationActions":["Audit"]}]`,
			},
		},
	}, {
		name:  "warn and audit",
		write: cmWith("c", "vap-warn-audit", bad, nil),
		want: want{
			allowed:  true,
			warnings: []string{"Validation failed for ValidatingAdmissionPolicy 'vap-warn-audit' with binding 'vap-warn-audit-binding': x must be ok"},
			audit: map[string]string{
				"validation.policy.admission.k8s.io/validation_failure": `[{"message":"x must be ok","policy":"vap-warn-audit","binding":"vap-warn-audit-binding","expressionIndex":0,"validationActions":["Warn","Audit"]}]`,
			},
		},
	}, {
		name:  "auditAnnotations on an admitted write",
		write: cmWith("c", "vap-annotations", ok, nil),
		want: want{
			allowed: true,
			// An empty value is not published.
			audit: map[string]string{"vap-annotations/name": "configmap c"},
		},
	}, {
		name:  "auditAnnotations on a denied write",
		write: cmWith("c", "vap-annotations", bad, nil),
		want: want{
			code: 422, reason: "Invalid", message: deniedBy("vap-annotations", "x must be ok"),
			audit: map[string]string{"vap-annotations/name": "configmap c"},
		},
	}, {
		name:  "namespaceSelector matches",
		write: cmWith("c", "vap-prod", bad, nil),
		want:  want{code: 422, reason: "Invalid", message: deniedBy("vap-nssel", "x must be ok")},
	}, {
		name:  "namespaceSelector does not match",
		write: cmWith("c", "vap-dev", bad, nil),
		want:  want{allowed: true},
	}, {
		name:  "objectSelector matches",
		write: cmWith("c", "vap-objsel", bad, map[string]string{"checked": "true"}),
		want:  want{code: 422, reason: "Invalid", message: deniedBy("vap-objsel", "x must be ok")},
	}, {
		name:  "objectSelector does not match",
		write: cmWith("c", "vap-objsel", bad, map[string]string{"checked": "false"}),
		want:  want{allowed: true, fields: map[string]any{"/metadata/labels": map[string]any{"checked": "false"}}},
	}, {
		name:  "excludeResourceRules excludes",
		write: cmWith("exempt", "vap-exclude", bad, nil),
		want:  want{allowed: true},
	}, {
		name:  "excludeResourceRules does not exclude",
		write: cmWith("c", "vap-exclude", bad, nil),
		want:  want{code: 422, reason: "Invalid", message: deniedBy("vap-exclude", "x must be ok")},
	}, {
		name:  "update compares with oldObject",
		write: withRV(cmWith("existing", "vap-update", map[string]string{"immutable": "b"}, nil), "100"),
		want: want{
			op: admission.Update, code: 422, reason: "Invalid",
			message: `configmaps "existing" is forbidden: ValidatingAdmissionPolicy 'vap-update' with binding 'vap-update-binding' denied request: immutable may not change`,
		},
	}, {
		name:  "update keeping the field",
		write: withRV(cmWith("existing", "vap-update", map[string]string{"immutable": "a", "other": "new"}, nil), "100"),
		want: want{
			op: admission.Update, allowed: true,
			fields: map[string]any{
				"/data":                     map[string]any{"immutable": "a", "other": "new"},
				"/metadata/resourceVersion": "100",
			},
		},
	}, {
		name:  "create has no oldObject",
		write: cmWith("c", "vap-update", map[string]string{"immutable": "b"}, nil),
		want:  want{allowed: true},
	}, {
		name:  "binding to a missing policy has no effect",
		write: cmWith("c", "vap-orphan", bad, nil),
		want:  want{allowed: true},
	}, {
		name:  "policy without binding has no effect",
		write: cmWith("c", "vap-unbound", bad, nil),
		want:  want{allowed: true},
	}, {
		// The create handler uses a new namespace's own name as the
		// request namespace (endpoints/handlers/create.go); the policy
		// plugins then give it no namespaceObject.
		name:  "request.namespace of a namespace create",
		write: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: fresh\n  labels: {vap-nsreq: \"true\"}\n",
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"kubernetes.io/metadata.name": "fresh", "vap-nsreq": "true"}},
		},
	}, {
		name:  "runtime error with failurePolicy Ignore",
		write: cmWith("c", "vap-ignore", ok, nil),
		want:  want{allowed: true},
	}, {
		name:  "runtime error with failurePolicy Fail",
		write: cmWith("c", "vap-fail", ok, nil),
		want: want{
			code: 422, reason: "Invalid",
			message: deniedBy("vap-fail", "expression 'object.data.missing == 'x'' resulted in error: no such key: missing"),
		},
	}})
}

// ---------------------------------------------------------------------------
// 2. MutatingAdmissionPolicy. Every case has its own namespace.

// mapPolicy returns a MutatingAdmissionPolicy on configmaps or deployments
// and its binding NAME-binding limited to namespace ns (unless the binding
// spec is given in full).
func mapPolicy(name, resource, policySpec, bindingSpec string) string {
	group := ""
	if resource == "deployments" {
		group = "apps"
	}
	return `
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata:
  name: ` + name + `
spec:
  matchConstraints:
    resourceRules:
    - apiGroups: ["` + group + `"]
      apiVersions: ["v1"]
      operations: ["CREATE", "UPDATE"]
      resources: ["` + resource + `"]
` + indent(policySpec, "  ") + `
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: ` + name + `-binding
spec:
  policyName: ` + name + `
` + indent(bindingSpec, "  ")
}

const setMutatedLabel = `
failurePolicy: Fail
reinvocationPolicy: Never
mutations:
- patchType: ApplyConfiguration
  applyConfiguration:
    expression: >
      Object{metadata: Object.metadata{labels: {"mutated": "yes"}}}
`

func deployment(name, namespace string, replicas int, containers ...string) string {
	s := `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: ` + name + `
  namespace: ` + namespace + `
spec:
  replicas: ` + strconv.Itoa(replicas) + `
  selector:
    matchLabels: {app: ` + name + `}
  template:
    metadata:
      labels: {app: ` + name + `}
    spec:
      containers:
`
	for i := 0; i+1 < len(containers); i += 2 {
		s += "      - name: " + containers[i] + "\n        image: " + containers[i+1] + "\n"
	}
	return s
}

// defaultedContainer is a container as the server stores it.
func defaultedContainer(name, image, pullPolicy string) map[string]any {
	return map[string]any{
		"name": name, "image": image, "imagePullPolicy": pullPolicy, "resources": map[string]any{},
		"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
	}
}

const readerPolicy = `
mutations:
- patchType: ApplyConfiguration
  applyConfiguration:
    expression: >
      Object{metadata: Object.metadata{labels: {
        "seen": ("stage" in object.metadata.labels) ? object.metadata.labels["stage"] : "none"
      }}}
- patchType: ApplyConfiguration
  applyConfiguration:
    expression: >
      Object{metadata: Object.metadata{labels: {
        "runs": (("runs" in object.metadata.labels) ? object.metadata.labels["runs"] : "") + "x"
      }}}
`

const writerPolicy = `
reinvocationPolicy: Never
mutations:
- patchType: ApplyConfiguration
  applyConfiguration:
    expression: >
      Object{metadata: Object.metadata{labels: {"stage": "written"}}}
`

func TestMutatingAdmissionPolicy(t *testing.T) {
	cluster := strings.Join([]string{
		namespace("map-label"), mapPolicy("map-label", "configmaps", setMutatedLabel, inNamespace("map-label")),
		namespace("map-merge"), mapPolicy("map-merge", "deployments", `
failurePolicy: Fail
reinvocationPolicy: Never
mutations:
- patchType: ApplyConfiguration
  applyConfiguration:
    expression: >
      Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
        containers: [Object.spec.template.spec.containers{name: "b", image: "registry.internal/busybox:1.36"}]
      }}}}
`, inNamespace("map-merge")),
		namespace("map-jsonpatch"), mapPolicy("map-jsonpatch", "deployments", `
failurePolicy: Fail
reinvocationPolicy: Never
mutations:
- patchType: JSONPatch
  jsonPatch:
    expression: >
      [JSONPatch{
        op: "replace",
        path: "/spec/template/spec/containers/0/image",
        value: "registry.internal/" + object.spec.template.spec.containers[0].image
      }]
`, inNamespace("map-jsonpatch")),
		namespace("map-jsontest"), mapPolicy("map-jsontest", "deployments", `
failurePolicy: Fail
reinvocationPolicy: Never
mutations:
- patchType: JSONPatch
  jsonPatch:
    expression: >
      [
        JSONPatch{op: "test", path: "/spec/replicas", value: 5},
        JSONPatch{op: "replace", path: "/spec/template/spec/containers/0/image", value: "patched:1"}
      ]
`, inNamespace("map-jsontest")),
		namespace("map-params"), namespace("map-params-deny"), namespace("map-params-allow"),
		cmWith("map-params-config", "map-params", map[string]string{"team": "blue"}, nil),
		mapPolicy("map-params", "configmaps", `
failurePolicy: Fail
reinvocationPolicy: Never
paramKind:
  apiVersion: v1
  kind: ConfigMap
matchConditions:
- name: not-the-param
  expression: "object.metadata.name != 'map-params-config'"
mutations:
- patchType: ApplyConfiguration
  applyConfiguration:
    expression: >
      Object{metadata: Object.metadata{labels: {"team": params.data.team}}}
`, `
paramRef:
  name: map-params-config
  parameterNotFoundAction: Deny
`+inNamespace("map-params")), `
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: map-params-deny
spec:
  policyName: map-params
  paramRef:
    name: map-params-config
    parameterNotFoundAction: Deny
` + indent(inNamespace("map-params-deny"), "  ") + `
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata:
  name: map-params-allow
spec:
  policyName: map-params
  paramRef:
    name: map-params-config
    parameterNotFoundAction: Allow
` + indent(inNamespace("map-params-allow"), "  "),
		namespace("map-vars"), mapPolicy("map-vars", "configmaps", `
failurePolicy: Fail
reinvocationPolicy: Never
variables:
- name: prefix
  expression: "'v-'"
- name: full
  expression: "variables.prefix + object.metadata.name"
mutations:
- patchType: ApplyConfiguration
  applyConfiguration:
    expression: >
      Object{metadata: Object.metadata{labels: {"copy": variables.full}}}
`, inNamespace("map-vars")),
		namespace("map-mc-fail"), mapPolicy("map-mc-fail", "configmaps", `
failurePolicy: Fail
reinvocationPolicy: Never
matchConditions:
- name: opted-in
  expression: "object.metadata.labels['opt-in'] == 'true'"
`+strings.SplitN(setMutatedLabel, "reinvocationPolicy: Never\n", 2)[1], inNamespace("map-mc-fail")),
		namespace("map-mc-ignore"), mapPolicy("map-mc-ignore", "configmaps", `
failurePolicy: Ignore
reinvocationPolicy: Never
matchConditions:
- name: opted-in
  expression: "object.metadata.labels['opt-in'] == 'true'"
`+strings.SplitN(setMutatedLabel, "reinvocationPolicy: Never\n", 2)[1], inNamespace("map-mc-ignore")),
		namespace("map-reinvoke-ifneeded"),
		mapPolicy("map-reinvoke-ifneeded-reader", "configmaps", "reinvocationPolicy: IfNeeded\n"+readerPolicy, inNamespace("map-reinvoke-ifneeded")),
		mapPolicy("map-reinvoke-ifneeded-writer", "configmaps", writerPolicy, inNamespace("map-reinvoke-ifneeded")),
		namespace("map-reinvoke-never"),
		mapPolicy("map-reinvoke-never-reader", "configmaps", "reinvocationPolicy: Never\n"+readerPolicy, inNamespace("map-reinvoke-never")),
		mapPolicy("map-reinvoke-never-writer", "configmaps", writerPolicy, inNamespace("map-reinvoke-never")),
	}, "\n---\n")
	c := newChain(t, admission.Options{}, cluster)

	app := map[string]string{"app": "x"}
	runTable(t, c, []entry{{
		name:  "applyconfiguration sets a label",
		write: cmWith("c", "map-label", nil, app),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x", "mutated": "yes"}},
			changes: []admission.Change{{Path: "/metadata/labels/mutated", By: mapBy("map-label", "map-label-binding")}},
		},
	}, {
		name:  "applyconfiguration adds the labels map",
		write: cmWith("c", "map-label", nil, nil),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"mutated": "yes"}},
			changes: []admission.Change{{Path: "/metadata/labels", By: mapBy("map-label", "map-label-binding")}},
		},
	}, {
		name:  "applyconfiguration merges containers by name",
		write: deployment("d", "map-merge", 1, "a", "nginx:1.27", "b", "busybox:1.36"),
		want: want{
			allowed: true,
			fields: map[string]any{"/spec/template/spec/containers": []any{
				defaultedContainer("a", "nginx:1.27", "IfNotPresent"),
				defaultedContainer("b", "registry.internal/busybox:1.36", "IfNotPresent"),
			}},
			changes: []admission.Change{{Path: "/spec/template/spec/containers/1/image", By: mapBy("map-merge", "map-merge-binding")}},
		},
	}, {
		name:  "jsonpatch replaces an image",
		write: deployment("d", "map-jsonpatch", 1, "a", "nginx:1.27", "b", "busybox:1.36"),
		want: want{
			allowed: true,
			fields: map[string]any{
				"/spec/template/spec/containers/0/image": "registry.internal/nginx:1.27",
				"/spec/template/spec/containers/1/image": "busybox:1.36",
			},
			changes: []admission.Change{{Path: "/spec/template/spec/containers/0/image", By: mapBy("map-jsonpatch", "map-jsonpatch-binding")}},
		},
	}, {
		// A failed "test" operation leaves the object unchanged and is not
		// an error (patch/json_patch.go: jsonpatch.ErrTestFailed).
		name:  "jsonpatch with a failing test op leaves the object unchanged",
		write: deployment("d", "map-jsontest", 1, "a", "nginx:1.27"),
		want: want{
			allowed: true,
			fields:  map[string]any{"/spec/template/spec/containers/0/image": "nginx:1.27"},
		},
	}, {
		name:  "jsonpatch with a passing test op",
		write: deployment("d", "map-jsontest", 5, "a", "nginx:1.27"),
		want: want{
			allowed: true,
			fields:  map[string]any{"/spec/template/spec/containers/0/image": "patched:1"},
			changes: []admission.Change{{Path: "/spec/template/spec/containers/0/image", By: mapBy("map-jsontest", "map-jsontest-binding")}},
		},
	}, {
		name:  "params by name",
		write: cmWith("c", "map-params", nil, app),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x", "team": "blue"}},
			changes: []admission.Change{{Path: "/metadata/labels/team", By: mapBy("map-params", "map-params-binding")}},
		},
	}, {
		name:  "param not found with parameterNotFoundAction Deny",
		write: cmWith("c", "map-params-deny", nil, app),
		want: want{
			code: 403, reason: "Forbidden",
			message: "policy 'map-params' with binding 'map-params-deny' denied request: failed to configure binding: no params found for policy binding with `Deny` parameterNotFoundAction",
		},
	}, {
		name:  "param not found with parameterNotFoundAction Allow",
		write: cmWith("c", "map-params-allow", nil, app),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x"}},
		},
	}, {
		name:  "variables",
		write: cmWith("c", "map-vars", nil, app),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x", "copy": "v-c"}},
			changes: []admission.Change{{Path: "/metadata/labels/copy", By: mapBy("map-vars", "map-vars-binding")}},
		},
	}, {
		name:  "matchConditions true",
		write: cmWith("c", "map-mc-fail", nil, map[string]string{"opt-in": "true"}),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"opt-in": "true", "mutated": "yes"}},
			changes: []admission.Change{{Path: "/metadata/labels/mutated", By: mapBy("map-mc-fail", "map-mc-fail-binding")}},
		},
	}, {
		name:  "matchConditions false",
		write: cmWith("c", "map-mc-fail", nil, map[string]string{"opt-in": "false"}),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"opt-in": "false"}},
		},
	}, {
		// A match condition error is a configuration error of the
		// binding: Forbidden (403) with reason Invalid
		// (mutating/dispatcher.go addConfigError, generic
		// policy_dispatcher.go), without the resource prefix.
		name:  "matchConditions error with failurePolicy Fail",
		write: cmWith("c", "map-mc-fail", nil, app),
		want: want{
			code: 403, reason: "Invalid",
			message: "policy 'map-mc-fail' with binding 'map-mc-fail-binding' denied request: expression 'object.metadata.labels['opt-in'] == 'true'' resulted in error: no such key: opt-in",
		},
	}, {
		name:  "matchConditions error with failurePolicy Ignore",
		write: cmWith("c", "map-mc-ignore", nil, app),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"app": "x"}},
		},
	}, {
		name:  "matchConditions true with failurePolicy Ignore",
		write: cmWith("c", "map-mc-ignore", nil, map[string]string{"opt-in": "true"}),
		want: want{
			allowed: true,
			fields:  map[string]any{"/metadata/labels": map[string]any{"opt-in": "true", "mutated": "yes"}},
			changes: []admission.Change{{Path: "/metadata/labels/mutated", By: mapBy("map-mc-ignore", "map-mc-ignore-binding")}},
		},
	}, {
		// The reader (IfNeeded) runs again after the writer changed the
		// object, and then sees the writer's label; "runs" gets an x per
		// run. kube-apiserver runs the
		// policies in an unspecified order (calculatePolicyData iterates a
		// map), so whether the reader first ran before or after the writer
		// varies; either way it runs twice and ends up seeing "written".
		name:  "reinvocationPolicy IfNeeded",
		write: cmWith("c", "map-reinvoke-ifneeded", nil, app),
		want: want{
			allowed: true,
			fields: map[string]any{"/metadata/labels": map[string]any{
				"app": "x", "stage": "written", "seen": "written", "runs": "xx",
			}},
			changesIgnoreRounds: true,
			changes: []admission.Change{
				{Path: "/metadata/labels/runs", By: mapBy("map-reinvoke-ifneeded-reader", "map-reinvoke-ifneeded-reader-binding", "map-reinvoke-ifneeded-writer", "map-reinvoke-ifneeded-writer-binding")},
				{Path: "/metadata/labels/seen", By: mapBy("map-reinvoke-ifneeded-reader", "map-reinvoke-ifneeded-reader-binding", "map-reinvoke-ifneeded-writer", "map-reinvoke-ifneeded-writer-binding")},
				{Path: "/metadata/labels/stage", By: mapBy("map-reinvoke-ifneeded-reader", "map-reinvoke-ifneeded-reader-binding", "map-reinvoke-ifneeded-writer", "map-reinvoke-ifneeded-writer-binding")},
			},
		},
	}, {
		// The reader (Never) runs once. What it saw ("seen") depends on
		// the unspecified order of the two policies, so only its run count
		// is asserted.
		name:  "reinvocationPolicy Never",
		write: cmWith("c", "map-reinvoke-never", nil, app),
		want: want{
			allowed: true,
			fields: map[string]any{
				"/metadata/labels/app":   "x",
				"/metadata/labels/stage": "written",
				"/metadata/labels/runs":  "x",
			},
			changesIgnoreRounds: true,
			changes: []admission.Change{
				{Path: "/metadata/labels/runs", By: mapBy("map-reinvoke-never-reader", "map-reinvoke-never-reader-binding", "map-reinvoke-never-writer", "map-reinvoke-never-writer-binding")},
				{Path: "/metadata/labels/seen", By: mapBy("map-reinvoke-never-reader", "map-reinvoke-never-reader-binding", "map-reinvoke-never-writer", "map-reinvoke-never-writer-binding")},
				{Path: "/metadata/labels/stage", By: mapBy("map-reinvoke-never-reader", "map-reinvoke-never-reader-binding", "map-reinvoke-never-writer", "map-reinvoke-never-writer-binding")},
			},
		},
	}})
}

// ---------------------------------------------------------------------------
// Known differences from kube-apiserver 1.37.2. Each test asserts what the
// server answers.

// A MutatingAdmissionPolicy's ApplyConfiguration result is unstructured; the
// plugin converts it to the typed version (ObjectConvertor.ConvertToVersion,
// the scheme for built-ins) and defaults it (mutating/dispatcher.go
// dispatchOne), so a container the policy adds gets imagePullPolicy,
// terminationMessagePolicy, ... like one the client sent.
func TestServerParityMAPApplyConfigurationDefaulting(t *testing.T) {
	c := newChain(t, admission.Options{}, namespace("map-addcontainer"), mapPolicy("map-addcontainer", "deployments", `
failurePolicy: Fail
reinvocationPolicy: Never
mutations:
- patchType: ApplyConfiguration
  applyConfiguration:
    expression: >
      Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{
        containers: [Object.spec.template.spec.containers{name: "sidecar", image: "envoy:v1.30"}]
      }}}}
`, inNamespace("map-addcontainer")))
	runTable(t, c, []entry{{
		name:  "applyconfiguration appends a container, which is defaulted",
		write: deployment("d", "map-addcontainer", 1, "a", "nginx:1.27"),
		want: want{
			allowed: true,
			fields: map[string]any{"/spec/template/spec/containers": []any{
				defaultedContainer("a", "nginx:1.27", "IfNotPresent"),
				defaultedContainer("sidecar", "envoy:v1.30", "IfNotPresent"),
			}},
			changes: []admission.Change{{Path: "/spec/template/spec/containers", By: mapBy("map-addcontainer", "map-addcontainer-binding")}},
		},
	}})
}

// Pod Security records its decision for every pod (and audit violations for
// pod controllers) as pod-security.kubernetes.io/ audit annotations
// (plugin/pkg/admission/security/podsecurity: audit.AddAuditAnnotations on
// the request context, not Attributes.AddAnnotation).
func TestServerParityPodSecurityAuditAnnotations(t *testing.T) {
	c := newChain(t, admission.Options{}, builtinsCluster, namespace("psa-audit", "pod-security.kubernetes.io/audit", "baseline"))
	runTable(t, c, []entry{{
		name:  "pod in a namespace without labels",
		write: hostNetworkPod("x", "team"),
		want: want{
			allowed: true, podSecurityAudit: true,
			audit:  map[string]string{"pod-security.kubernetes.io/enforce-policy": "privileged:latest"},
			fields: map[string]any{"/spec/hostNetwork": true},
			extra:  checkServiceAccountVolume,
			changes: []admission.Change{
				{Path: "/spec/containers/0/volumeMounts", By: "ServiceAccount"},
				{Path: "/spec/serviceAccount", By: "ServiceAccount"},
				{Path: "/spec/serviceAccountName", By: "ServiceAccount"},
				{Path: "/spec/volumes", By: "ServiceAccount"},
				{Path: "/spec/preemptionPolicy", By: "Priority"},
				{Path: "/spec/priority", By: "Priority"},
				{Path: "/spec/tolerations", By: "DefaultTolerationSeconds"},
			},
		},
	}, {
		name:  "pod rejected by enforce",
		write: hostNetworkPod("x", "psa-restricted"),
		want: want{
			code: 403, reason: "Forbidden", podSecurityAudit: true,
			message: `pods "x" is forbidden: violates PodSecurity "restricted:latest": ` + restrictedViolations,
			audit:   map[string]string{"pod-security.kubernetes.io/enforce-policy": "restricted:latest"},
		},
	}, {
		name:  "pod violating the audit level",
		write: hostNetworkPod("x", "psa-audit"),
		want: want{
			allowed: true, podSecurityAudit: true,
			audit: map[string]string{
				"pod-security.kubernetes.io/enforce-policy":   "privileged:latest",
				"pod-security.kubernetes.io/audit-violations": `would violate PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`,
			},
			fields: map[string]any{"/spec/hostNetwork": true},
			extra:  checkServiceAccountVolume,
			changes: []admission.Change{
				{Path: "/spec/containers/0/volumeMounts", By: "ServiceAccount"},
				{Path: "/spec/serviceAccount", By: "ServiceAccount"},
				{Path: "/spec/serviceAccountName", By: "ServiceAccount"},
				{Path: "/spec/volumes", By: "ServiceAccount"},
				{Path: "/spec/preemptionPolicy", By: "Priority"},
				{Path: "/spec/priority", By: "Priority"},
				{Path: "/spec/tolerations", By: "DefaultTolerationSeconds"},
			},
		},
	}, {
		name:  "deployment violating the audit level",
		write: hostNetworkDeployment("d", "psa-audit"),
		want: want{
			allowed: true, podSecurityAudit: true,
			audit: map[string]string{
				"pod-security.kubernetes.io/audit-violations": `would violate PodSecurity "baseline:latest": host namespaces (hostNetwork=true)`,
			},
			fields: map[string]any{"/spec/template/spec/hostNetwork": true},
		},
	}})
}

// POST /api/v1/namespaces has no namespace in its URL, so the server's
// authorization filter checks a Namespace create at the cluster scope
// (endpoints/request/requestinfo.go). (Admission then uses the new
// namespace's name as the request namespace, endpoints/handlers/create.go,
// which the chain does too: see "request.namespace of a namespace create" in
// TestValidatingAdmissionPolicy.)
func TestServerParityNamespaceCreateAuthorization(t *testing.T) {
	c := newChain(t, admission.Options{})
	runTable(t, c, []entry{{
		name:  "namespace create by a user who may not",
		write: "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: alices\n",
		user:  "alice",
		want: want{
			code: 403, reason: "Forbidden",
			message: `namespaces is forbidden: User "alice" cannot create resource "namespaces" in API group "" at the cluster scope`,
		},
	}})
}

// An UPDATE without metadata.resourceVersion is unconditional for resources
// whose strategy allows it (configmaps, deployments, ...): the registry store
// takes the stored object's resourceVersion (registry/generic/registry/
// store.go, doUnconditionalUpdate). A stale resourceVersion is a conflict.
func TestServerParityUpdateResourceVersion(t *testing.T) {
	c := newChain(t, admission.Options{},
		withRV(cmWith("existing", "default", map[string]string{"k": "old"}, nil), "100"),
		withRV(deployment("existing", "default", 1, "app", "nginx:1.27"), "100"))
	runTable(t, c, []entry{{
		name:  "configmap update without resourceVersion",
		write: cmWith("existing", "default", map[string]string{"k": "new"}, nil),
		want: want{
			op: admission.Update, allowed: true,
			fields: map[string]any{"/data": map[string]any{"k": "new"}, "/metadata/resourceVersion": "100"},
		},
	}, {
		name:  "deployment update without resourceVersion",
		write: deployment("existing", "default", 3, "app", "nginx:1.27"),
		want: want{
			op: admission.Update, allowed: true,
			fields: map[string]any{"/spec/replicas": 3, "/metadata/resourceVersion": "100"},
		},
	}, {
		name:  "configmap update with a stale resourceVersion",
		write: withRV(cmWith("existing", "default", map[string]string{"k": "new"}, nil), "99"),
		want: want{
			op: admission.Update, code: 409, reason: "Conflict",
			message: `Operation cannot be fulfilled on configmaps "existing": the object has been modified; please apply your changes to the latest version and try again`,
		},
	}})
}

// ---------------------------------------------------------------------------
// UPDATE: the registry strategy merges the stored object.

func TestUpdate(t *testing.T) {
	c := newChain(t, admission.Options{}, `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: default
  resourceVersion: "100"
  generation: 1
  uid: 0b5e5f7c-0000-4000-8000-000000000001
  creationTimestamp: "2026-01-01T00:00:00Z"
spec:
  replicas: 1
  selector: {matchLabels: {app: d}}
  template:
    metadata: {labels: {app: d}}
    spec:
      containers: [{name: a, image: nginx:1.27}]
status:
  replicas: 1
  observedGeneration: 1
`)
	write := func(meta, replicas string) string {
		return `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: d
  namespace: default
  resourceVersion: "100"
` + meta + `
spec:
  replicas: ` + replicas + `
  selector: {matchLabels: {app: d}}
  template:
    metadata: {labels: {app: d}}
    spec:
      containers: [{name: a, image: nginx:1.27}]
`
	}
	stored := map[string]any{
		"/metadata/uid":               "0b5e5f7c-0000-4000-8000-000000000001",
		"/metadata/creationTimestamp": "2026-01-01T00:00:00Z",
		"/metadata/resourceVersion":   "100",
		"/status":                     map[string]any{"replicas": 1, "observedGeneration": 1},
	}
	with := func(extra map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range stored {
			out[k] = v
		}
		for k, v := range extra {
			out[k] = v
		}
		return out
	}
	runTable(t, c, []entry{{
		name:  "a spec change bumps the generation; status is kept",
		write: write("", "3"),
		want: want{op: admission.Update, allowed: true, fields: with(map[string]any{
			"/metadata/generation": 2, "/spec/replicas": 3,
		})},
	}, {
		name:  "a label change keeps the generation",
		write: write("  labels: {tier: web}", "1"),
		want: want{op: admission.Update, allowed: true, fields: with(map[string]any{
			"/metadata/generation": 1, "/metadata/labels": map[string]any{"tier": "web"},
		})},
	}, {
		name:  "an annotation change bumps the generation",
		write: write("  annotations: {note: changed}", "1"),
		want: want{op: admission.Update, allowed: true, fields: with(map[string]any{
			"/metadata/generation": 2, "/metadata/annotations": map[string]any{"note": "changed"},
		})},
	}})
}

// ---------------------------------------------------------------------------
// Whole stored objects against what kube-apiserver 1.37.2 stored for the
// same writes (testdata/server/README.md), with the server's set of
// admission plugins (ServiceAccount disabled).

func TestStoredObjectsMatchServer(t *testing.T) {
	read := func(path string) string {
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	examples := filepath.Join("..", "examples", "image-mirror")
	clusterFiles, _ := filepath.Glob(filepath.Join(examples, "cluster", "*.yaml"))
	var exampleCluster []string
	for _, f := range clusterFiles {
		exampleCluster = append(exampleCluster, read(f))
	}
	opts := admission.Options{DisablePlugins: []string{"ServiceAccount"}}
	team := newChain(t, opts, teamNamespace)
	example := newChain(t, opts, exampleCluster...)
	for _, tc := range []struct {
		name   string
		chain  *admission.Chain
		write  string
		golden string
	}{
		{"deployment", team, read("testdata/server/deployment.write.yaml"), "testdata/server/deployment.json"},
		{"pod", team, read("testdata/server/pod.write.yaml"), "testdata/server/pod.json"},
		{"image-mirror web", example, read(filepath.Join(examples, "app", "web.yaml")), "testdata/server/image-mirror-web.json"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := admit(t, tc.chain, admission.Request{Object: object(t, tc.write)})
			if !res.Allowed {
				t.Fatalf("denied: %d %s: %s", res.Code, res.Reason, res.Message)
			}
			var want map[string]any
			if err := json.Unmarshal([]byte(read(tc.golden)), &want); err != nil {
				t.Fatal(err)
			}
			got := map[string]any{}
			if err := json.Unmarshal([]byte(mustJSON(res.Object)), &got); err != nil {
				t.Fatal(err)
			}
			md, _ := got["metadata"].(map[string]any)
			for _, k := range []string{"uid", "creationTimestamp", "managedFields"} {
				delete(md, k)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("stored object differs from the server's\ngot  %s\nwant %s", mustJSON(got), mustJSON(want))
			}
		})
	}
}

// ---------------------------------------------------------------------------
// 8. The example of examples/image-mirror.

func TestExampleImageMirror(t *testing.T) {
	read := func(pattern string) []string {
		files, err := filepath.Glob(filepath.Join("..", "examples", "image-mirror", pattern))
		if err != nil || len(files) == 0 {
			t.Fatalf("no files for %s: %v", pattern, err)
		}
		var out []string
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			out = append(out, string(b))
		}
		return out
	}
	c := newChain(t, admission.Options{}, read("cluster/*.yaml")...)
	app := map[string]string{
		"web":   read("app/web.yaml")[0],
		"batch": read("batch/batch.yaml")[0],
	}
	runTable(t, c, []entry{{
		name:  "web stores the mirrored image",
		write: app["web"],
		want: want{
			allowed: true,
			fields: map[string]any{
				"/spec/replicas": 3,
				"/spec/template/spec/containers": []any{map[string]any{
					"name": "nginx", "image": "registry.internal/nginx:1.27", "imagePullPolicy": "IfNotPresent",
					"ports":     []any{map[string]any{"containerPort": 80, "protocol": "TCP"}},
					"resources": map[string]any{}, "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
				}},
			},
			changes: []admission.Change{{
				Path: "/spec/template/spec/containers/0/image",
				By:   mapBy("image-mirror.example.com", "image-mirror-binding.example.com"),
			}},
		},
	}, {
		name:  "batch is denied by the replica limit",
		write: app["batch"],
		want: want{
			code: 422, reason: "Invalid",
			message: `deployments.apps "batch" is forbidden: ValidatingAdmissionPolicy 'replica-limit.example.com' with binding 'replica-limit-binding.example.com' denied request: at most 5 replicas in a test environment`,
		},
	}})
}

// The server decodes every built-in API group. The chain decodes with the
// legacy scheme, into which only some groups are installed (core, apps,
// batch, admissionregistration, ...): a Role, NetworkPolicy or
// PodDisruptionBudget in the cluster state makes NewChain fail ("no kind
// \"Role\" is registered for version \"rbac.authorization.k8s.io/v1\""),
// and a write of one is refused with 400 BadRequest.
func TestServerParityUnregisteredAPIGroups(t *testing.T) {
	t.Run("roles in the cluster state", func(t *testing.T) {
		c := newChain(t, admission.Options{}, teamNamespace, aliceRBAC)
		runTable(t, c, []entry{{
			name:  "rbac allows what a role grants",
			write: configMap("cm", "team"),
			user:  "alice",
			want:  want{allowed: true, fields: map[string]any{"/data": map[string]any{"k": "v"}}},
		}, {
			name: "rbac forbids what no role grants",
			write: `
apiVersion: v1
kind: Secret
metadata:
  name: s
  namespace: team
stringData:
  k: v
`,
			user: "alice",
			want: want{
				code:    403,
				reason:  "Forbidden",
				message: `secrets is forbidden: User "alice" cannot create resource "secrets" in API group "" in the namespace "team"`,
			},
		}})
	})
	t.Run("writes", func(t *testing.T) {
		c := newChain(t, admission.Options{}, teamNamespace)
		runTable(t, c, []entry{{
			name: "role",
			write: `
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: r, namespace: team}
rules: [{apiGroups: [""], resources: [configmaps], verbs: [create]}]
`,
			want: want{allowed: true, fields: map[string]any{
				"/rules": []any{map[string]any{"apiGroups": []any{""}, "resources": []any{"configmaps"}, "verbs": []any{"create"}}},
			}},
		}, {
			name: "networkpolicy",
			write: `
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: np, namespace: team}
spec: {podSelector: {}}
`,
			want: want{allowed: true, fields: map[string]any{
				"/spec":                map[string]any{"podSelector": map[string]any{}, "policyTypes": []any{"Ingress"}},
				"/metadata/generation": 1,
			}},
		}, {
			name: "poddisruptionbudget",
			write: `
apiVersion: policy/v1
kind: PodDisruptionBudget
metadata: {name: pdb, namespace: team}
spec: {minAvailable: 1, selector: {matchLabels: {app: x}}}
`,
			want: want{allowed: true, fields: map[string]any{
				"/spec":                map[string]any{"minAvailable": 1, "selector": map[string]any{"matchLabels": map[string]any{"app": "x"}}},
				"/status":              map[string]any{"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0},
				"/metadata/generation": 1,
			}},
		}})
	})
}

// fieldValidation=Strict rejects unknown fields with the decoder's error
// wrapped by the create/update handler (endpoints/handlers/rest.go
// transformDecodeError): "KIND in version \"V\" cannot be handled as a
// KIND: strict decoding error: ...". The chain returns the bare decoder
// error.
func TestServerParityStrictDecodingMessage(t *testing.T) {
	c := newChain(t, admission.Options{FieldValidation: "Strict"}, teamNamespace)
	runTable(t, c, []entry{{
		name:  "unknown top-level field",
		write: configMap("cm", "team") + "foo: bar\n",
		want: want{
			code: 400, reason: "BadRequest",
			message: `ConfigMap in version "v1" cannot be handled as a ConfigMap: strict decoding error: unknown field "foo"`,
		},
	}, {
		name:  "unknown nested field",
		write: strings.Replace(deployment("d", "team", 1, "a", "nginx:1.27"), "  replicas: 1\n", "  replicas: 1\n  bogus: 1\n", 1),
		want: want{
			code: 400, reason: "BadRequest",
			message: `Deployment in version "v1" cannot be handled as a Deployment: strict decoding error: unknown field "spec.bogus"`,
		},
	}})
}

func TestFieldValidation(t *testing.T) {
	warn := newChain(t, admission.Options{FieldValidation: "Warn"}, teamNamespace)
	ignore := newChain(t, admission.Options{FieldValidation: "Ignore"}, teamNamespace)
	write := strings.Replace(deployment("d", "team", 1, "a", "nginx:1.27"), "  replicas: 1\n", "  replicas: 1\n  bogus: 1\n", 1)
	t.Run("Warn", func(t *testing.T) {
		runTable(t, warn, []entry{{
			name:  "unknown field is a warning and dropped",
			write: write,
			want: want{
				allowed: true, warnings: []string{`unknown field "spec.bogus"`},
				fields: map[string]any{"/spec/bogus": absent, "/spec/replicas": 1},
			},
		}})
	})
	t.Run("Ignore", func(t *testing.T) {
		runTable(t, ignore, []entry{{
			name:  "unknown field is dropped silently",
			write: write,
			want: want{
				allowed: true,
				fields:  map[string]any{"/spec/bogus": absent, "/spec/replicas": 1},
			},
		}})
	})
}
