package report

import (
	"bytes"
	"strings"
	"testing"
)

// A loop whose fields are not known names none: no "loop:" or "fields:"
// line with nothing after it.
func TestLoopWithoutFieldsListsNone(t *testing.T) {
	r := &Report{Runs: []Run{{Tool: "flux", Objects: []Object{{
		Object: "Deployment.apps/shop/web", Verdict: "Loop", Reason: "flux writes it back 2 times in 1h0m0s",
		Loop: &Loop{Tool: "kustomize-controller", Other: "the API server's admission chain", OtherKind: "admission"},
	}}}}}
	for _, tt := range []struct {
		name  string
		write func(*bytes.Buffer) error
		bad   []string
	}{
		{"text", func(b *bytes.Buffer) error { return WriteText(b, r, TextOptions{}) }, []string{"loop: \n", "loop:\n"}},
		{"junit", func(b *bytes.Buffer) error { return WriteJUnit(b, r) }, []string{"fields:  \n", "fields:\n"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tt.write(&b); err != nil {
				t.Fatal(err)
			}
			for _, bad := range tt.bad {
				if strings.Contains(b.String(), bad) {
					t.Errorf("%q in\n%s", bad, b.String())
				}
			}
			if !strings.Contains(b.String(), "kustomize-controller") {
				t.Errorf("the writers are missing:\n%s", b.String())
			}
		})
	}
}
