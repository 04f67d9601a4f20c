package lint

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/engine/gatekeeper"
	"github.com/truce-dev/truce/manifest"
)

// TestGatekeeperMutators: the three rules on the repository's mutators,
// run by Gatekeeper's mutation system on the repository's objects and on
// probes of the kinds the mutators apply to.
func TestGatekeeperMutators(t *testing.T) {
	assign := func(name, kind, location, value string) string {
		group := ""
		if kind == "Deployment" {
			group = "apps"
		}
		return `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: ` + name + `}
spec:
  applyTo: [{groups: ["` + group + `"], kinds: [` + kind + `], versions: [v1]}]
  location: "` + location + `"
  parameters: {assign: {value: ` + value + `}}
`
	}
	const web = `apiVersion: apps/v1
kind: Deployment
metadata: {name: web, namespace: shop}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: nginx}]
`
	tests := []struct {
		name string
		docs []string
		// want are "rule: message" substrings (several joined by "|"),
		// one per finding, in order.
		want []string
	}{
		{"no mutators", []string{web}, nil},
		{"a path through a list fails on the repository's Deployment", []string{assign("wrong", "Deployment", "spec.template.spec.containers.image", "x"), web},
			[]string{"gatekeeper-mutation-fails: Gatekeeper's mutation of Deployment shop/web (testdata.yaml:9) fails: mutation … for mutator Assign.mutations.gatekeeper.sh /wrong failed|mismatch between path entry (type: object)"}},
		{"a path through a string fails on a probe", []string{assign("wrong", "Pod", "spec.containers[name: *].name.first", "x")},
			[]string{"gatekeeper-mutation-fails: Gatekeeper's mutation of a probe Pod in namespace default fails"}},
		{"conflicting schemas, named both ways", []string{assign("a", "Pod", "spec.containers[name: *].image", "x"), assign("b", "Pod", "spec.containers.image", "y")},
			[]string{"gatekeeper-mutators-conflict: the schema implied by location spec.containers[name: *].image conflicts with Assign b (location spec.containers.image",
				"gatekeeper-mutators-conflict: the schema implied by location spec.containers.image conflicts with Assign a"}},
		{"the earlier mutator in Gatekeeper's order loses", []string{assign("z", "Deployment", "spec.replicas", "2"), assign("a", "Deployment", "spec.replicas", "3"), web},
			[]string{"gatekeeper-mutators-compete: Assign a sets /spec/replicas of Deployment shop/web (testdata.yaml:17) to 3, and Assign z (testdata.yaml:1), applied after it, sets it to 2"}},
		{"the same value twice is no fight", []string{assign("z", "Deployment", "spec.replicas", "2"), assign("a", "Deployment", "spec.replicas", "2")}, nil},
		{"kind orders before name: AssignImage after Assign", []string{assign("z", "Pod", "spec.containers[name: *].image", "nginx:1"), `apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: a}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: *].image"
  parameters: {assignTag: ":2"}
`}, []string{"gatekeeper-mutators-compete: Assign z sets /spec/containers/0/image of a probe Pod in namespace default to \"nginx:1\", and AssignImage a"}},
		{"a mutator Gatekeeper cannot build is left to its API", []string{assign("bad", "Pod", "metadata.labels.x", "y")}, nil},
		// The value a provider would give is unknown, not a failure.
		{"external data is no failure", []string{`apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: digest}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: "spec.template.spec.containers[name: *].image"
  parameters: {assign: {externalData: {provider: tag-to-digest, dataSource: ValueAtLocation}}}
`, web}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "testdata.yaml")
			if err := os.WriteFile(path, []byte(strings.Join(tt.docs, "---\n")), 0o644); err != nil {
				t.Fatal(err)
			}
			objs, err := manifest.LoadPaths(context.Background(), []string{path}, manifest.DefaultOptions())
			if err != nil {
				t.Fatal(err)
			}
			fs, err := Run(context.Background(), &Input{Objects: objs}, testOptions())
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range fs {
				if strings.HasPrefix(f.Rule, "gatekeeper-") {
					got = append(got, f.Rule+": "+strings.ReplaceAll(f.Message, filepath.Dir(path)+"/", ""))
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("findings:\n%s\nwant %d", strings.Join(got, "\n"), len(tt.want))
			}
			for i, w := range tt.want {
				for _, part := range strings.Split(w, "|") {
					if !strings.Contains(got[i], part) {
						t.Errorf("finding %d = %q, want it to contain %q", i, got[i], part)
					}
				}
			}
		})
	}
}

// notConverging answers Gatekeeper's ErrNotConverging for the whole
// mutation, as no known set of real mutators does, and runs each mutator
// alone for real.
type notConverging struct{ gatekeeperRunner }

func (n notConverging) Mutate(context.Context, *unstructured.Unstructured, *corev1.Namespace) (*unstructured.Unstructured, error) {
	return nil, fmt.Errorf("mutating with Gatekeeper: %w: mutation … not converging", gatekeeper.ErrNotConverging)
}

// TestGatekeeperNotConverging: the finding names the mutators that change
// the object, on the first of them.
func TestGatekeeperNotConverging(t *testing.T) {
	path := filepath.Join(t.TempDir(), "testdata.yaml")
	docs := `apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: a}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: spec.dnsPolicy
  parameters: {assign: {value: Default}}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: b}
spec:
  location: metadata.labels.b
  parameters: {assign: {value: "1"}}
---
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: c}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: spec.dnsPolicy
  parameters:
    pathTests: [{subPath: spec.dnsPolicy, condition: MustExist}]
    assign: {value: Default}
`
	if err := os.WriteFile(path, []byte(docs), 0o644); err != nil {
		t.Fatal(err)
	}
	objs, err := manifest.LoadPaths(context.Background(), []string{path}, manifest.DefaultOptions())
	if err != nil {
		t.Fatal(err)
	}
	g, err := gatekeeperSetup(&Input{Objects: objs})
	if err != nil {
		t.Fatal(err)
	}
	g.run = notConverging{g.run}
	fs := g.failures(context.Background())
	if len(fs) != 1 {
		t.Fatalf("findings %+v, want 1", fs)
	}
	msg := strings.ReplaceAll(fs[0].Message, filepath.Dir(path)+"/", "")
	// a and b change the probe Pod; c's pathTest keeps it off, the probe
	// having no dnsPolicy.
	want := "Gatekeeper's mutators do not converge on a probe Pod in namespace default: Assign a (testdata.yaml:1), AssignMetadata b (testdata.yaml:9) keep changing it"
	if msg != want || !strings.HasSuffix(fs[0].Source, "testdata.yaml:1") {
		t.Errorf("finding at %s: %q, want at line 1: %q", fs[0].Source, msg, want)
	}
}
