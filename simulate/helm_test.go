package simulate

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/gitops"
)

// editOnce is a person's kubectl edit: one update, a while after the
// object first appears.
type editOnce struct {
	*FieldWriter
	done bool
}

func (e *editOnce) Watches(ref cluster.Ref) bool { return !e.done && e.FieldWriter.Watches(ref) }

func (e *editOnce) Act(ctx context.Context, c cluster.Cluster) error {
	e.done = true
	return e.FieldWriter.Act(ctx, c)
}

func kubectlEdit() Writer {
	return &editOnce{FieldWriter: &FieldWriter{Type: "kubectl edit", Manager: "kubectl-edit",
		Target: Selector{Group: "apps", Kind: "Deployment", Namespace: "shop", Name: "web"},
		Set:    map[string]any{"/spec/template/spec/containers/0/image": "nginx:1.28-debug"}, After: time.Minute}}
}

const (
	helmImage   = "/spec/template/spec/containers/0/image"
	helmReplica = "/spec/replicas"
)

// helm-controller's drift detection modes against an HPA, an image mirror
// in admission and a one-off kubectl edit: what stays, what is reported,
// what is written back.
func TestHelmReleaseDriftDetection(t *testing.T) {
	type want struct {
		verdict Verdict
		writes  int
		// field is the live value of the field the writer sets at the end.
		field any
		// drifted lists the fields the final comparison shows as drift.
		drifted []string
	}
	cases := []struct {
		name     string
		cluster  string
		writers  func() []Writer
		pointer  string
		disabled want
		warn     want
		enabled  want
	}{
		{
			name: "an HPA changes replicas", cluster: shop, pointer: helmReplica,
			writers:  func() []Writer { return []Writer{testHPA()} },
			disabled: want{verdict: Synced, writes: 2, field: int64(5)},
			warn:     want{verdict: OutOfSync, writes: 2, field: int64(5), drifted: []string{helmReplica}},
			// Install, then every 10 minutes helm-controller patches 2
			// back and the HPA sets 5, 15s later: 6 times in the hour
			// (the window ends on helm-controller's patch).
			enabled: want{verdict: Loop, writes: 13, field: int64(2)},
		},
		{
			name: "an admission policy mirrors the image", cluster: shop + "---\n" + mirrorPolicy, pointer: helmImage,
			writers:  func() []Writer { return nil },
			disabled: want{verdict: Synced, writes: 1, field: "registry.internal/nginx:1.27"},
			warn:     want{verdict: Synced, writes: 1, field: "registry.internal/nginx:1.27"},
			enabled:  want{verdict: Synced, writes: 1, field: "registry.internal/nginx:1.27"},
		},
		{
			name: "someone edits the image once", cluster: shop, pointer: helmImage,
			writers:  func() []Writer { return []Writer{kubectlEdit()} },
			disabled: want{verdict: Synced, writes: 2, field: "nginx:1.28-debug"},
			warn:     want{verdict: OutOfSync, writes: 2, field: "nginx:1.28-debug", drifted: []string{helmImage}},
			enabled:  want{verdict: Synced, writes: 3, field: "nginx:1.27"},
		},
	}
	for _, tc := range cases {
		for _, mode := range []gitops.HelmDriftMode{gitops.HelmDriftDisabled, gitops.HelmDriftWarn, gitops.HelmDriftEnabled} {
			w := map[gitops.HelmDriftMode]want{gitops.HelmDriftDisabled: tc.disabled, gitops.HelmDriftWarn: tc.warn, gitops.HelmDriftEnabled: tc.enabled}[mode]
			t.Run(tc.name+"/"+string(mode), func(t *testing.T) {
				c := newCluster(t, tc.cluster)
				d := desiredOf(t, web)
				tool := &HelmRelease{HelmRelease: "web", Namespace: "shop", Mode: mode, Desired: d}
				res, err := Run(context.Background(), c, tool, tc.writers(), d, Options{})
				if err != nil {
					t.Fatal(err)
				}
				o := res.Objects[0]
				if o.Verdict != w.verdict || o.Writes != w.writes {
					for _, wr := range res.Writes {
						t.Logf("%s %s %s %v %s", wr.At, wr.Writer, wr.Verb, wr.Fields, wr.Error)
					}
					t.Fatalf("%s with %d writes (%s), want %s with %d", o.Verdict, o.Writes, o.Reason, w.verdict, w.writes)
				}
				t.Logf("%s: %s; %s", o.Verdict, o.Reason, res.Settings)
				live, err := c.Get(context.Background(), o.Ref)
				if err != nil {
					t.Fatal(err)
				}
				if got, _ := valueAt(live.Object, tc.pointer); got != w.field {
					t.Errorf("%s is %v at the end, want %v", tc.pointer, got, w.field)
				}
				var drifted []string
				for _, f := range o.Drift.Fields {
					if f.IgnoredBy == "" {
						drifted = append(drifted, f.Pointer)
					}
				}
				if !slices.Equal(drifted, w.drifted) {
					t.Errorf("drifted fields %v, want %v", drifted, w.drifted)
				}
				for _, wr := range res.Writes {
					if wr.ByTool && wr.Writer != drift.HelmFieldManager {
						t.Errorf("the tool wrote as %q", wr.Writer)
					}
					if wr.ByTool && wr.At > 0 && mode != gitops.HelmDriftEnabled {
						t.Errorf("helm-controller wrote at %s with drift detection %s", wr.At, mode)
					}
				}
				if w.verdict == Loop && (o.Loop.Period != 10*time.Minute || o.Loop.Other != "kube-controller-manager" || !slices.Contains(o.Loop.Fields, tc.pointer)) {
					t.Errorf("loop %+v, want one with kube-controller-manager every 10m", *o.Loop)
				}
			})
		}
	}
}

// spec.driftDetection.ignore hides the HPA's replicas: no drift to report
// or correct, and the report still names the rule.
func TestHelmReleaseIgnoreRules(t *testing.T) {
	for _, mode := range []gitops.HelmDriftMode{gitops.HelmDriftWarn, gitops.HelmDriftEnabled} {
		t.Run(string(mode), func(t *testing.T) {
			c := newCluster(t, shop)
			d := desiredOf(t, web)
			rule := fluxRule(helmReplica, "Deployment")
			tool := &HelmRelease{HelmRelease: "web", Namespace: "shop", Mode: mode, Rules: []drift.FluxRule{rule}, Desired: d}
			res, err := Run(context.Background(), c, tool, []Writer{testHPA()}, d, Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := res.Objects[0]
			if o.Verdict != Synced || o.Writes != 2 {
				t.Fatalf("%s with %d writes (%s), want Synced with 2", o.Verdict, o.Writes, o.Reason)
			}
			if len(o.Drift.Fields) != 1 || o.Drift.Fields[0].Pointer != helmReplica || o.Drift.Fields[0].IgnoredBy != rule.Name {
				t.Errorf("fields %+v, want %s ignored by %q", o.Drift.Fields, helmReplica, rule.Name)
			}
		})
	}
}

// An object annotated helm.toolkit.fluxcd.io/driftDetection: disabled is
// left out of detection even when it is enabled.
func TestHelmReleaseExclusionAnnotation(t *testing.T) {
	c := newCluster(t, shop)
	d := desiredOf(t, web)
	d[0].Object.SetAnnotations(map[string]string{drift.HelmDriftDetectionKey: drift.HelmDriftDetectionDisabled})
	tool := &HelmRelease{HelmRelease: "web", Namespace: "shop", Mode: gitops.HelmDriftEnabled, Desired: d}
	res, err := Run(context.Background(), c, tool, []Writer{testHPA()}, d, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if o := res.Objects[0]; o.Verdict != Synced || o.Writes != 2 || o.Drift.Status != drift.Excluded {
		t.Fatalf("%s with %d writes, drift %s (%s), want Synced with 2, Excluded", o.Verdict, o.Writes, o.Drift.Status, o.Reason)
	}
}

// A refused install is Rejected, and helm-controller stops there whatever
// the mode.
func TestHelmReleaseInstallRejected(t *testing.T) {
	const deny = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: no-latest}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["deployments"]}
  validations:
  - expression: 'object.spec.replicas < 2'
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: no-latest}
spec: {policyName: no-latest, validationActions: [Deny]}
`
	for _, mode := range []gitops.HelmDriftMode{gitops.HelmDriftDisabled, gitops.HelmDriftEnabled} {
		t.Run(string(mode), func(t *testing.T) {
			c := newCluster(t, shop+"---\n"+deny)
			d := desiredOf(t, web)
			tool := &HelmRelease{HelmRelease: "web", Namespace: "shop", Mode: mode, Desired: d}
			res, err := Run(context.Background(), c, tool, nil, d, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if o := res.Objects[0]; o.Verdict != Rejected || len(res.Rounds) != 1 {
				t.Fatalf("%s (%s) after %d rounds, want Rejected after the install", o.Verdict, o.Reason, len(res.Rounds))
			}
		})
	}
}

func TestHelmReleaseSettings(t *testing.T) {
	tests := []struct {
		tool *HelmRelease
		want string
	}{
		{&HelmRelease{}, "helm-controller, drift detection disabled, every 10m0s"},
		{&HelmRelease{Mode: gitops.HelmDriftWarn, Interval: 5 * time.Minute, Rules: []drift.FluxRule{{}}}, "helm-controller, drift detection warn, every 5m0s, 1 ignore rule(s)"},
		{&HelmRelease{Mode: gitops.HelmDriftEnabled, ClientSideInstall: true}, "helm-controller, drift detection enabled, every 10m0s, client-side install"},
	}
	for _, tt := range tests {
		if got := tt.tool.Settings(); got != tt.want {
			t.Errorf("%q, want %q", got, tt.want)
		}
	}
}

// deleteOnce deletes its target once, a while after it first appears.
type deleteOnce struct {
	target cluster.Ref
	done   bool
}

func (d *deleteOnce) Name() string                 { return "kubectl-delete" }
func (d *deleteOnce) Describe() string             { return "kubectl delete " + d.target.String() }
func (d *deleteOnce) Watches(ref cluster.Ref) bool { return !d.done && ref == d.target }
func (d *deleteOnce) Delay() time.Duration         { return time.Minute }
func (d *deleteOnce) Act(ctx context.Context, c cluster.Cluster) error {
	d.done = true
	return c.Delete(ctx, d.target, cluster.DeleteOptions{})
}

// A deleted object stays deleted without drift detection, is reported
// missing with warn, and created again with enabled.
func TestHelmReleaseDeletedObject(t *testing.T) {
	tests := []struct {
		mode    gitops.HelmDriftMode
		verdict Verdict
		exists  bool
		writes  int
		reason  string
	}{
		{gitops.HelmDriftDisabled, Synced, false, 2, "does not compare"},
		{gitops.HelmDriftWarn, OutOfSync, false, 2, "deleted after flux created it"},
		{gitops.HelmDriftEnabled, Synced, true, 3, "in sync"},
	}
	for _, tt := range tests {
		t.Run(string(tt.mode), func(t *testing.T) {
			c := newCluster(t, shop)
			d := desiredOf(t, web)
			ref := refOf(t, "apps/v1", "Deployment", "shop", "web")
			tool := &HelmRelease{HelmRelease: "web", Namespace: "shop", Mode: tt.mode, Desired: d}
			res, err := Run(context.Background(), c, tool, []Writer{&deleteOnce{target: ref}}, d, Options{})
			if err != nil {
				t.Fatal(err)
			}
			o := res.Objects[0]
			if o.Verdict != tt.verdict || o.Writes != tt.writes || !strings.Contains(o.Reason, tt.reason) {
				t.Fatalf("%s with %d writes (%s), want %s with %d (%s)", o.Verdict, o.Writes, o.Reason, tt.verdict, tt.writes, tt.reason)
			}
			_, err = c.Get(context.Background(), ref)
			if exists := err == nil; exists != tt.exists {
				t.Errorf("exists at the end: %v, want %v (%v)", exists, tt.exists, err)
			}
		})
	}
}

// With more rounds than are simulated write by write, the loop's writes
// are extrapolated to what the whole window holds.
func TestHelmReleaseExtrapolation(t *testing.T) {
	count := func(max int) int {
		d := desiredOf(t, web)
		tool := &HelmRelease{HelmRelease: "web", Namespace: "shop", Mode: gitops.HelmDriftEnabled, Interval: 2 * time.Minute, Desired: d}
		res, err := Run(context.Background(), newCluster(t, shop), tool, []Writer{testHPA()}, d, Options{MaxRounds: max})
		if err != nil {
			t.Fatal(err)
		}
		if res.Objects[0].Verdict != Loop {
			t.Fatalf("%s (%s), want Loop", res.Objects[0].Verdict, res.Objects[0].Reason)
		}
		return res.Objects[0].Writes
	}
	if predicted, full := count(0), count(1000); predicted != full {
		t.Errorf("predicted %d writes, the whole window holds %d", predicted, full)
	}
}
