package check

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

// fakeBackground is a policy engine whose background controllers are
// one writer per object of kind Policy it is given.
type fakeBackground struct {
	got []string
	err error
}

func (f *fakeBackground) Name() string                           { return "fake" }
func (f *fakeBackground) Configures(gk k8sschema.GroupKind) bool { return gk.Kind == "Policy" }
func (f *fakeBackground) Install(context.Context, []*unstructured.Unstructured) (*admission.Installation, error) {
	return &admission.Installation{}, nil
}

func (f *fakeBackground) Background(_ context.Context, objs []*unstructured.Unstructured) (simulate.Background, error) {
	for _, o := range objs {
		f.got = append(f.got, o.GetKind()+"/"+o.GetName())
	}
	return fakeSet{objs: objs}, f.err
}

type fakeSet struct{ objs []*unstructured.Unstructured }

func (s fakeSet) Writers() []simulate.Writer {
	var out []simulate.Writer
	for _, o := range s.objs {
		if o.GetKind() == "Policy" {
			out = append(out, fakeWriter(o.GetName()))
		}
	}
	return out
}

func (s fakeSet) Unpredictable() []string { return []string{"rule x reads a service"} }

type fakeWriter string

func (w fakeWriter) Name() string                               { return string(w) }
func (w fakeWriter) Describe() string                           { return string(w) }
func (w fakeWriter) Watches(cluster.Ref) bool                   { return false }
func (w fakeWriter) Delay() time.Duration                       { return time.Second }
func (w fakeWriter) Act(context.Context, cluster.Cluster) error { return nil }

// The writers an engine derives from its policies join the run's writers;
// the engine sees the base (the policies moved there) and the manifests;
// what it cannot predict becomes a finding; its errors stop the check.
func TestBackgroundWriters(t *testing.T) {
	const in = `apiVersion: example.com/v1
kind: Policy
metadata: {name: gen}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: shop}
`
	tests := []struct {
		name    string
		err     error
		writers string
		wantErr string
	}{
		{name: "derived", writers: "gen"},
		{name: "engine fails", err: errors.New("boom"), wantErr: "fake: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := splitYAML(t, in)
			eng := &fakeBackground{err: tt.err}
			engines := []admission.PolicyEngine{eng}
			if err := r.engineConfiguration(context.Background(), engines); err != nil {
				t.Fatal(err)
			}
			err := r.backgroundWriters(context.Background(), engines)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(eng.got, " "); got != "Policy/gen ConfigMap/c" {
				t.Errorf("the engine saw %s", got)
			}
			ws, err := r.Writers()
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, w := range ws {
				names = append(names, w.Name())
			}
			if got := strings.Join(names, " "); got != tt.writers {
				t.Errorf("writers %q, want %q", got, tt.writers)
			}
			if len(r.Findings) != 1 || r.Findings[0].Message != "Unpredictable: rule x reads a service" {
				t.Errorf("findings %+v", r.Findings)
			}
		})
	}
}

// refusingBackground is fakeBackground whose own webhook refuses the
// Policies named in refuse.
type refusingBackground struct {
	fakeBackground
	refuse map[string]bool
	err    error
}

func (f *refusingBackground) Refusals(_ context.Context, _, objs []*unstructured.Unstructured) (map[int]string, error) {
	out := map[int]string{}
	for i, o := range objs {
		if f.refuse[o.GetName()] {
			out[i] = "invalid"
		}
	}
	return out, f.err
}

// A policy the engine's own webhook refuses is not installed before the
// sync: it stays a manifest (the sync is refused it) and no background
// controller runs it; the others move to the base.
func TestEngineRefusals(t *testing.T) {
	const in = `apiVersion: example.com/v1
kind: Policy
metadata: {name: good}
---
apiVersion: example.com/v1
kind: Policy
metadata: {name: bad}
---
apiVersion: v1
kind: ConfigMap
metadata: {name: c, namespace: shop}
`
	tests := []struct {
		name              string
		refuse            []string
		err               error
		desired, base, bg string
		wantErr           string
	}{
		{name: "none refused", desired: "ConfigMap/c", base: "Policy/good Policy/bad", bg: "Policy/good Policy/bad ConfigMap/c"},
		{name: "one refused", refuse: []string{"bad"}, desired: "Policy/bad ConfigMap/c", base: "Policy/good", bg: "Policy/good ConfigMap/c"},
		{name: "engine fails", err: errors.New("boom"), wantErr: "fake: boom"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := splitYAML(t, in)
			eng := &refusingBackground{refuse: map[string]bool{}, err: tt.err}
			for _, n := range tt.refuse {
				eng.refuse[n] = true
			}
			engines := []admission.PolicyEngine{eng}
			err := r.engineConfiguration(context.Background(), engines)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("error %v, want %s", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var desired, base []string
			for _, d := range r.Desired {
				desired = append(desired, d.Object.GetKind()+"/"+d.Object.GetName())
			}
			for _, b := range r.Base {
				base = append(base, b.Object.GetKind()+"/"+b.Object.GetName())
			}
			if got := strings.Join(desired, " "); got != tt.desired {
				t.Errorf("desired %q, want %q", got, tt.desired)
			}
			if got := strings.Join(base, " "); got != tt.base {
				t.Errorf("base %q, want %q", got, tt.base)
			}
			if err := r.backgroundWriters(context.Background(), engines); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(eng.got, " "); got != tt.bg {
				t.Errorf("the background controllers saw %q, want %q", got, tt.bg)
			}
		})
	}
}

// splitYAML is the repository of one file holding in, taken apart.
func splitYAML(t *testing.T, in string) *Repository {
	t.Helper()
	objs, err := manifest.Decode("repo.yaml", strings.NewReader(in), manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	r, err := Split(Input{Repository: objs})
	if err != nil {
		t.Fatal(err)
	}
	return r
}
