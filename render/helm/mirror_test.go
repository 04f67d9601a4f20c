package helm

import (
	"os"
	"path/filepath"
	"testing"
)

// A chart directories deep is mirrored with its siblings at every level
// linked, so relative file:// dependencies resolve.
func TestMirrorChartNested(t *testing.T) {
	for _, rel := range []string{"chart", filepath.Join("a", "chart"), filepath.Join("a", "b", "chart")} {
		t.Run(rel, func(t *testing.T) {
			root := t.TempDir()
			chartDir := filepath.Join(root, rel)
			for _, f := range []string{filepath.Join(chartDir, "Chart.yaml"), filepath.Join(filepath.Dir(chartDir), "lib", "Chart.yaml")} {
				if err := os.MkdirAll(filepath.Dir(f), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(f, []byte("name: x\n"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			work, err := mirrorChart(filepath.Join(t.TempDir(), "repo"), root, chartDir)
			if err != nil {
				t.Fatal(err)
			}
			for _, f := range []string{filepath.Join(work, "Chart.yaml"), filepath.Join(work, "..", "lib", "Chart.yaml")} {
				if _, err := os.Stat(f); err != nil {
					t.Error(err)
				}
			}
		})
	}
}
