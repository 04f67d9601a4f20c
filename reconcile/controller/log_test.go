package controller

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/reconcile"
)

// TestLogObjectsOnceByCause: with the API server down, a 250-object pass
// logs each cause once (the pass's errors, grouped by reconcile), not one
// warning per object; the per-object lines stay at debug level.
func TestLogObjectsOnceByCause(t *testing.T) {
	const skipped = "not applied: namespaces and CRDs failed first"
	ref := func(i int) cluster.Ref {
		return cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespace: "shop", Name: fmt.Sprintf("c%d", i)}
	}
	res := &reconcile.Result{Objects: []reconcile.ObjectResult{
		{Ref: ref(-1), Action: reconcile.Failed, Error: "not applied: connection refused"},
	}}
	for i := range 249 {
		res.Objects = append(res.Objects, reconcile.ObjectResult{Ref: ref(i), Action: reconcile.Skipped, Error: skipped})
	}
	res.Objects = append(res.Objects, reconcile.ObjectResult{Ref: ref(1000), Action: reconcile.Configured})
	// What reconcile's pass states for these objects (TestObjectErrorsOncePerCause).
	res.Errors = []string{"ConfigMap/shop/c-1: not applied: connection refused", skipped + " (249 objects, first ConfigMap/shop/c0)"}

	for _, tc := range []struct {
		level            slog.Level
		warnings, debugs int
		wantInWarnings   []string
	}{
		{level: slog.LevelInfo, warnings: 2, wantInWarnings: []string{
			`msg="pass error" error="ConfigMap/shop/c-1: not applied: connection refused"`,
			`msg="pass error" error="` + skipped + ` (249 objects, first ConfigMap/shop/c0)"`,
		}},
		{level: slog.LevelDebug, warnings: 2, debugs: 250},
	} {
		var buf bytes.Buffer
		l := &Loop{clock: realClock{}, log: slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: tc.level}))}
		l.report(context.Background(), res, nil, 0, 0)
		var warns []string
		debugs := 0
		for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
			switch {
			case strings.Contains(line, "level=WARN"):
				warns = append(warns, line)
			case strings.Contains(line, "level=DEBUG"):
				debugs++
			}
		}
		if len(warns) != tc.warnings || debugs != tc.debugs {
			t.Fatalf("level %v: %d warnings (want %d), %d debug lines (want %d):\n%s", tc.level, len(warns), tc.warnings, debugs, tc.debugs, buf.String())
		}
		for _, want := range tc.wantInWarnings {
			if !strings.Contains(strings.Join(warns, "\n"), want) {
				t.Errorf("warnings lack %q:\n%s", want, strings.Join(warns, "\n"))
			}
		}
		if !strings.Contains(buf.String(), "level=INFO msg=object ref=ConfigMap/shop/c1000") {
			t.Errorf("the configured object is not logged:\n%s", buf.String())
		}
	}
}
