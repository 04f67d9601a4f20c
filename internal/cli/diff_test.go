package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

func runTruce(t testing.TB, args ...string) (string, string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := Execute(context.Background(), args, strings.NewReader(""), &out, &errOut)
	return out.String(), errOut.String(), code
}

func TestDiffExample(t *testing.T) {
	for _, tc := range []struct {
		strategy string
		status   map[string]string
	}{
		{"predicted", map[string]string{"web": "Drifted", "batch": "Rejected"}},
		{"flux", map[string]string{"web": "Missing", "batch": "Rejected"}},
		{"argocd-ssd", map[string]string{"web": "Missing", "batch": "Missing"}},
		{"argocd-legacy", map[string]string{"web": "Missing", "batch": "Missing"}},
	} {
		t.Run(tc.strategy, func(t *testing.T) {
			out, errOut, code := runTruce(t, "diff", "../../examples/image-mirror/app", "../../examples/image-mirror/batch", "-c", "../../examples/image-mirror/cluster",
				"--strategy", tc.strategy, "-o", "json")
			if code != exitFound {
				t.Fatalf("exit %d, want %d; stderr: %s", code, exitFound, errOut)
			}
			var report struct {
				Strategy string
				Objects  []struct {
					Name, Status string
					Fields       []struct{ Pointer, Origin string }
				}
			}
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if report.Strategy != tc.strategy {
				t.Errorf("strategy = %q", report.Strategy)
			}
			if len(report.Objects) != len(tc.status) {
				t.Errorf("%d objects, want %d", len(report.Objects), len(tc.status))
			}
			for _, o := range report.Objects {
				if tc.status[o.Name] != o.Status {
					t.Errorf("%s: status %s, want %s", o.Name, o.Status, tc.status[o.Name])
				}
				if tc.strategy == "predicted" && o.Name == "web" {
					if len(o.Fields) != 1 || o.Fields[0].Pointer != "/spec/template/spec/containers/0/image" ||
						!strings.HasPrefix(o.Fields[0].Origin, "MutatingAdmissionPolicy/image-mirror.example.com") {
						t.Errorf("web fields = %+v", o.Fields)
					}
				}
			}
		})
	}
}

func TestDiffErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"diff", "../../examples/image-mirror/app", "--strategy", "bogus"}, "unknown --strategy"},
		{[]string{"diff", "../../examples/image-mirror/app", "-o", "xml"}, "unknown output format"},
		{[]string{"diff", "does-not-exist"}, "does-not-exist"},
		{[]string{"diff", "../../examples/image-mirror/app", "--color", "sometimes"}, "unknown --color"},
	} {
		_, errOut, code := runTruce(t, tc.args...)
		if code != exitFailure || !strings.Contains(errOut, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit 2 mentioning %q", tc.args, code, errOut, tc.want)
		}
	}
}

func TestDiffNoDriftExitsZero(t *testing.T) {
	// The cluster already holds exactly what Git says.
	out, errOut, code := runTruce(t, "diff", "testdata/diff/insync/app", "-c", "testdata/diff/insync/cluster", "--strategy", "flux")
	if code != exitOK {
		t.Fatalf("exit %d; stdout %s stderr %s", code, out, errOut)
	}
	if !strings.Contains(out, "1 in sync") {
		t.Errorf("summary missing: %s", out)
	}
}

// TestDiffPredictedNewNamespace: the predicted strategy admits the
// repository's Namespace before the Deployment in it, in the order of the
// repository's GitOps tool, whatever the order of the files.
func TestDiffPredictedNewNamespace(t *testing.T) {
	dir := "testdata/diff/new-namespace/"
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"no GitOps settings", []string{dir + "app"}},
		{"namespace file first", []string{dir + "app/namespace.yaml", dir + "app/deployment.yaml"}},
		{"Argo CD", []string{dir + "app", dir + "argocd"}},
		{"Flux", []string{dir + "app", dir + "flux"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"diff"}, tc.args...)
			out, errOut, code := runTruce(t, append(args, "--strategy", "predicted", "-o", "json")...)
			if code != exitOK {
				t.Fatalf("exit %d, want 0; stdout %s stderr %s", code, out, errOut)
			}
			var report struct {
				Objects []struct{ Kind, Status string }
			}
			if err := json.Unmarshal([]byte(out), &report); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			if len(report.Objects) != 2 {
				t.Fatalf("%d objects, want the Deployment and the Namespace: %s", len(report.Objects), out)
			}
			for _, o := range report.Objects {
				if o.Status != "InSync" {
					t.Errorf("%s: %s, want InSync", o.Kind, o.Status)
				}
			}
		})
	}
}

// TestDiffPredictedWords: the predicted diff names its sides by what they
// are (the object the offline chain would store, and Git) and counts in
// English.
func TestDiffPredictedWords(t *testing.T) {
	out, errOut, code := runTruce(t, "diff", "../../examples/image-mirror/app", "-c", "../../examples/image-mirror/cluster", "--strategy", "predicted")
	if code != exitFound {
		t.Fatalf("exit %d, want %d: %s%s", code, exitFound, out, errOut)
	}
	for _, want := range []string{
		"--- stored (predicted)\n", "+++ git\n",
		"-      - image: registry.internal/nginx:1.27\n", "+      - image: nginx:1.27\n",
		"[stored (predicted) value by MutatingAdmissionPolicy/image-mirror.example.com",
		"predicted: 1 object, 0 in sync, 1 drifted,",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
