package helm

import (
	"context"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"helm.sh/helm/v4/pkg/chart/v2/loader"
)

// FuzzArgoValuesInline: Argo CD hands spec.source.helm.values to helm as a
// values file, so Merge must give exactly what Helm's values loader gives
// for the same text, never panic, and never name its temporary file.
func FuzzArgoValuesInline(f *testing.F) {
	for _, seed := range []string{
		"", "a: 1\n", "a: [1, 2]\nb: {c: d}\n", "---\na: 1\n---\nb: 2\n", "a: &x 1\nb: *x\n",
		"- list\n", "null", "a: b: c", "\t", "a: 1", "y: n\n", "{a: 1}", "a: !!binary aGk=\n",
		"?\n", "a:\n  - b\n  -\n", "# comment only\n", strings.Repeat("a: 1\n", 3),
	} {
		f.Add(seed)
	}
	dir := f.TempDir()
	if err := os.WriteFile(dir+"/Chart.yaml", []byte("apiVersion: v2\nname: f\nversion: 0.1.0\n"), 0o644); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, values string) {
		got, err := ArgoValues{Values: values}.Merge(context.Background(), dir, nil)
		want, wantErr := loader.LoadValues(strings.NewReader(values))
		if values == "" {
			want, wantErr = map[string]any{}, nil
		}
		if (err != nil) != (wantErr != nil) {
			t.Fatalf("Merge error %v, Helm's loader error %v", err, wantErr)
		}
		if err != nil {
			if strings.Contains(err.Error(), "truce-argocd-values") {
				t.Fatalf("error names the temporary file: %v", err)
			}
			return
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("Merge differs from Helm's loader (-helm +merge):\n%s", diff)
		}
	})
}
