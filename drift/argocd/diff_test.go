package argocd

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

type normalizerFunc func(*unstructured.Unstructured) error

func (f normalizerFunc) Normalize(u *unstructured.Unstructured) error { return f(u) }

func TestDiff(t *testing.T) {
	deployConfig := obj(t, deployConfigYAML)
	deployLive := obj(t, deployLiveYAML)
	mirrored := func(m map[string]any) { container0(m)["image"] = "registry.internal/nginx:1.27" }
	gwConfig := obj(t, gatewayConfigYAML)
	gwLive := obj(t, gatewayLiveYAML)
	secretConfig := obj(t, secretConfigYAML)
	secretLive := obj(t, secretLiveYAML)

	tests := []struct {
		name string
		// orig, when set, is stored in live's last-applied-configuration.
		orig, config, live *unstructured.Unstructured
		opts               Options
		wantModified       bool
		wantFields         []FieldChange
	}{
		{
			name:   "in sync, three-way",
			orig:   deployConfig,
			config: deployConfig,
			live:   deployLive,
		},
		{
			name:   "in sync, two-way",
			config: deployConfig,
			live:   deployLive,
		},
		{
			// A mutation of a field Git sets always shows.
			name:         "image rewritten by admission is drift, three-way",
			orig:         deployConfig,
			config:       deployConfig,
			live:         edit(deployLive, mirrored),
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/spec/template/spec/containers/0/image",
				Desired: "nginx:1.27", Live: "registry.internal/nginx:1.27", DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name:         "image rewritten by admission is drift, two-way",
			config:       deployConfig,
			live:         edit(deployLive, mirrored),
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/spec/template/spec/containers/0/image",
				Desired: "nginx:1.27", Live: "registry.internal/nginx:1.27", DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			// What Git does not mention does not show in the three-way
			// diff.
			name:   "label added by admission is not drift, three-way",
			orig:   deployConfig,
			config: deployConfig,
			live: edit(deployLive, func(m map[string]any) {
				mapAt(m, "metadata", "labels")["policy.example.com/team"] = "shop"
			}),
		},
		{
			name:   "label added by admission is not drift, two-way",
			config: deployConfig,
			live: edit(deployLive, func(m map[string]any) {
				mapAt(m, "metadata", "labels")["policy.example.com/team"] = "shop"
			}),
		},
		{
			name:   "sidecar injected into the pod template is not drift: containers merge by name",
			orig:   deployConfig,
			config: deployConfig,
			live: edit(deployLive, func(m map[string]any) {
				s := mapAt(m, "spec", "template", "spec")
				s["containers"] = append(s["containers"].([]any), map[string]any{
					"name": "proxy", "image": "envoy:1.34", "imagePullPolicy": "IfNotPresent",
					"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "resources": map[string]any{},
				})
			}),
		},
		{
			name:   "label removed from Git but still live is drift, three-way",
			orig:   edit(deployConfig, func(m map[string]any) { mapAt(m, "metadata", "labels")["tier"] = "frontend" }),
			config: deployConfig,
			live: edit(deployLive, func(m map[string]any) {
				mapAt(m, "metadata", "labels")["tier"] = "frontend"
			}),
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/metadata/labels/tier", Live: "frontend", LivePresent: true,
			}},
		},
		{
			name:   "element added to an atomic list Git sets is drift",
			orig:   deployConfig,
			config: deployConfig,
			live: edit(deployLive, func(m map[string]any) {
				container0(m)["args"] = []any{"--port=8080", "--telemetry"}
			}),
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/spec/template/spec/containers/0/args",
				Desired: []any{"--port=8080"}, Live: []any{"--port=8080", "--telemetry"}, DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			// A list compared whole shows an added element.
			name:   "custom resource: element added to a list Git sets is drift",
			orig:   gwConfig,
			config: gwConfig,
			live: edit(gwLive, func(m map[string]any) {
				mapAt(m, "spec")["hosts"] = []any{"shop.example.com", "shop.internal"}
			}),
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/spec/hosts",
				Desired: []any{"shop.example.com"}, Live: []any{"shop.example.com", "shop.internal"}, DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name:   "custom resource: element added to a list is drift, two-way",
			config: gwConfig,
			live: edit(gwLive, func(m map[string]any) {
				mapAt(m, "spec")["hosts"] = []any{"shop.example.com", "shop.internal"}
			}),
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/spec/hosts",
				Desired: []any{"shop.example.com"}, Live: []any{"shop.example.com", "shop.internal"}, DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name:   "custom resource: field Git does not set is not drift",
			orig:   gwConfig,
			config: gwConfig,
			live: edit(gwLive, func(m map[string]any) {
				mapAt(m, "spec", "tls")["minVersion"] = "1.3"
				mapAt(m, "metadata")["labels"] = map[string]any{"injected": "true"}
			}),
		},
		{
			// Live is trimmed to last-applied's fields, list items included.
			name:   "custom resource: field defaulted inside a list item is not drift",
			orig:   gwConfig,
			config: gwConfig,
			live: edit(gwLive, func(m map[string]any) {
				mapAt(m, "spec", "servers", 0)["protocol"] = "HTTPS"
			}),
		},
		{
			name:   "custom resource: value Git sets changed is drift",
			orig:   gwConfig,
			config: gwConfig,
			live: edit(gwLive, func(m map[string]any) {
				mapAt(m, "spec", "tls")["mode"] = "PASSTHROUGH"
			}),
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/spec/tls/mode", Desired: "SIMPLE", Live: "PASSTHROUGH", DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			// Defaults are applied to both sides.
			name:   "strategy defaulted by the API server is not drift, two-way",
			config: deployConfig,
			live:   deployLive,
		},
		{
			name:   "field removed from Git whose live value is the default is not drift",
			orig:   edit(deployConfig, func(m map[string]any) { mapAt(m, "spec")["revisionHistoryLimit"] = int64(10) }),
			config: deployConfig,
			live:   deployLive,
		},
		{
			name:   "field removed from Git whose live value is not the default is drift",
			orig:   edit(deployConfig, func(m map[string]any) { mapAt(m, "spec")["revisionHistoryLimit"] = int64(5) }),
			config: deployConfig,
			live: edit(deployLive, func(m map[string]any) {
				mapAt(m, "spec")["revisionHistoryLimit"] = int64(5)
			}),
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/spec/revisionHistoryLimit", Desired: int64(10), Live: int64(5), DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name:   "replicas changed by an HPA is drift",
			orig:   deployConfig,
			config: deployConfig,
			live: edit(deployLive, func(m map[string]any) {
				mapAt(m, "spec")["replicas"] = int64(5)
			}),
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/spec/replicas", Desired: int64(2), Live: int64(5), DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name:   "a normalizer hides replicas on both sides",
			orig:   deployConfig,
			config: deployConfig,
			live: edit(deployLive, func(m map[string]any) {
				mapAt(m, "spec")["replicas"] = int64(5)
			}),
			opts: Options{Normalizer: normalizerFunc(func(u *unstructured.Unstructured) error {
				unstructured.RemoveNestedField(u.Object, "spec", "replicas")
				return nil
			})},
		},
		{
			name:   "statefulset: fields the API server adds to volumeClaimTemplates are not drift",
			orig:   obj(t, statefulSetConfigYAML),
			config: obj(t, statefulSetConfigYAML),
			live:   obj(t, statefulSetLiveYAML),
		},
		{
			// Secret stringData compared with the stored data.
			name:   "secret: stringData equals the stored data",
			config: secretConfig,
			live:   secretLive,
		},
		{
			name:   "secret: stringData in last-applied and Git equals the stored data",
			orig:   secretConfig,
			config: secretConfig,
			live:   secretLive,
		},
		{
			name:         "secret: changed stringData value is drift in data",
			orig:         secretConfig,
			config:       edit(secretConfig, func(m map[string]any) { mapAt(m, "stringData")["password"] = "n3w" }),
			live:         secretLive,
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/data/password", Desired: "bjN3", Live: "czNjcjN0", DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name:   "secret: null data value equals an empty one",
			config: edit(secretConfig, func(m map[string]any) { mapAt(m, "data")["empty"] = nil }),
			live:   edit(secretLive, func(m map[string]any) { mapAt(m, "data")["empty"] = "" }),
		},
		{
			name:         "aggregated role: rules filled by the controller are drift by default",
			orig:         obj(t, aggregatedRoleConfigYAML),
			config:       obj(t, aggregatedRoleConfigYAML),
			live:         obj(t, aggregatedRoleLiveYAML),
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/rules",
				Live: []any{map[string]any{
					"apiGroups": []any{""}, "resources": []any{"pods"}, "verbs": []any{"get", "list", "watch"},
				}},
				LivePresent: true,
			}},
		},
		{
			name:   "aggregated role: rules ignored with IgnoreAggregatedRoles",
			orig:   obj(t, aggregatedRoleConfigYAML),
			config: obj(t, aggregatedRoleConfigYAML),
			live:   obj(t, aggregatedRoleLiveYAML),
			opts:   Options{IgnoreAggregatedRoles: true},
		},
		{
			name:         "not in the cluster: predicted live is the manifest, modified",
			config:       deployConfig,
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "", Desired: normalized(t, deployConfig).Object, DesiredPresent: true,
			}},
		},
		{
			name: "not in Git: not modified (pruning is decided elsewhere)",
			live: deployLive,
			wantFields: []FieldChange{{
				Pointer: "", Live: normalized(t, deployLive).Object, LivePresent: true,
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			live := tt.live
			if tt.orig != nil {
				live = withLastApplied(t, live, tt.orig)
			}
			var before *unstructured.Unstructured
			if live != nil {
				before = live.DeepCopy()
			}
			res, err := Diff(tt.config, live, tt.opts)
			if err != nil {
				t.Fatalf("Diff: %v", err)
			}
			if live != nil && !cmp.Equal(before.Object, live.Object) {
				t.Errorf("Diff changed its live argument")
			}
			got := Fields(res.PredictedLive, res.Live)
			if res.Modified != tt.wantModified {
				t.Errorf("Modified = %v, want %v; fields: %v", res.Modified, tt.wantModified, got)
			}
			if d := cmp.Diff(tt.wantFields, got); d != "" {
				t.Errorf("Fields mismatch (-want +got):\n%s", d)
			}
			if len(res.Notes) != 0 {
				t.Errorf("unexpected notes %q", res.Notes)
			}
		})
	}
}

// normalized is u as Diff prepares it: remarshalled and normalized.
func normalized(t *testing.T, u *unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	r, err := remarshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if err := Normalize(r, Options{}); err != nil {
		t.Fatal(err)
	}
	return r
}

func TestDiffBothNil(t *testing.T) {
	if _, err := Diff(nil, nil, Options{}); err == nil {
		t.Fatal("Diff(nil, nil) succeeded, want an error")
	}
}

func TestDiffNormalizerError(t *testing.T) {
	boom := errors.New("boom")
	_, err := Diff(obj(t, deployConfigYAML), obj(t, deployLiveYAML), Options{
		Normalizer: normalizerFunc(func(*unstructured.Unstructured) error { return boom }),
	})
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want it to wrap %v", err, boom)
	}
}

// Argo CD falls back to the two-way diff when the annotation does not decode.
func TestDiffMalformedLastApplied(t *testing.T) {
	live := edit(obj(t, deployLiveYAML), func(m map[string]any) {
		mapAt(m, "metadata", "annotations")[AnnotationLastAppliedConfig] = "{not json"
		container0(m)["image"] = "registry.internal/nginx:1.27"
	})
	res, err := Diff(obj(t, deployConfigYAML), live, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !res.Modified {
		t.Error("Modified = false, want true")
	}
	if len(res.Notes) != 1 || !strings.Contains(res.Notes[0], "last-applied-configuration") {
		t.Errorf("Notes = %q, want one about the annotation", res.Notes)
	}
}

// The three-way diff of a label Git removed differs from the two-way one: only
// the last-applied-configuration says the label was Git's.
// Inputs are remarshalled first, as Diff does (see TestThreeWayDiffNeedsRemarshal).
func TestThreeWayVersusTwoWay(t *testing.T) {
	config := normalized(t, obj(t, deployConfigYAML))
	orig := edit(config, func(m map[string]any) { mapAt(m, "metadata", "labels")["tier"] = "frontend" })
	live := normalized(t, edit(obj(t, deployLiveYAML), func(m map[string]any) { mapAt(m, "metadata", "labels")["tier"] = "frontend" }))

	three, err := ThreeWayDiff(orig, config, live)
	if err != nil {
		t.Fatal(err)
	}
	two, err := TwoWayDiff(config, live)
	if err != nil {
		t.Fatal(err)
	}
	if !three.Modified || two.Modified {
		t.Errorf("Modified: three-way %v, two-way %v; want true, false; fields %v / %v", three.Modified, two.Modified,
			Fields(three.PredictedLive, three.Live), Fields(two.PredictedLive, two.Live))
	}
}

// Like gitops-engine's, ThreeWayDiff compares its inputs as given: only Diff
// remarshals them, which turns the manifest's cpu: 1000m into the "1" the API
// server stores.
func TestThreeWayDiffNeedsRemarshal(t *testing.T) {
	config, live := obj(t, deployConfigYAML), obj(t, deployLiveYAML)
	raw, err := ThreeWayDiff(config, config, live)
	if err != nil {
		t.Fatal(err)
	}
	want := []FieldChange{{
		Pointer: "/spec/template/spec/containers/0/resources/limits/cpu",
		Desired: "1000m", Live: "1", DesiredPresent: true, LivePresent: true,
	}}
	if d := cmp.Diff(want, Fields(raw.PredictedLive, raw.Live)); d != "" || !raw.Modified {
		t.Errorf("ThreeWayDiff on raw inputs: Modified %v, fields (-want +got):\n%s", raw.Modified, d)
	}
	res, err := Diff(config, live, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Modified {
		t.Errorf("Diff: Modified = true, want false; fields %v", Fields(res.PredictedLive, res.Live))
	}
}

func TestThreeWayDiffNil(t *testing.T) {
	u := obj(t, deployConfigYAML)
	for _, args := range [][3]*unstructured.Unstructured{{nil, u, u}, {u, nil, u}, {u, u, nil}} {
		if _, err := ThreeWayDiff(args[0], args[1], args[2]); err == nil {
			t.Errorf("ThreeWayDiff(%v) succeeded, want an error", args)
		}
	}
}

// Objects without metadata or with odd shapes must not panic.
func TestDiffOddShapes(t *testing.T) {
	for _, tt := range []struct{ name, config, live string }{
		{"no metadata", "apiVersion: v1\nkind: ConfigMap\n", "apiVersion: v1\nkind: ConfigMap\n"},
		{"metadata not a map", "apiVersion: v1\nkind: ConfigMap\nmetadata: 3\n", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"},
		{"no kind", "metadata: {name: a}\n", "metadata: {name: a}\nspec: {x: 1}\n"},
		{"secret with bad base64", "apiVersion: v1\nkind: Secret\ndata: {a: '!!'}\n", "apiVersion: v1\nkind: Secret\ndata: {a: YQ==}\n"},
		{"role with odd aggregationRule", "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\naggregationRule: x\nrules: 1\n", "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			live := obj(t, tt.live)
			live = withLastApplied(t, live, obj(t, tt.config))
			_, _ = Diff(obj(t, tt.config), live, Options{IgnoreAggregatedRoles: true})
		})
	}
}
