//go:build e2e

package differential

import (
	"context"
	"flag"
	"os"
	"strconv"
	"testing"
	"time"
)

var (
	flagSeed = flag.Uint64("seed", envUint("TRUCE_E2E_SEED", 1),
		"seed of the generated cases (env TRUCE_E2E_SEED)")
	flagGenerated = flag.Int("generated", int(envUint("TRUCE_E2E_GENERATED", 30)),
		"number of generated cases (env TRUCE_E2E_GENERATED)")
)

func envUint(key string, def uint64) uint64 {
	if v := os.Getenv(key); v != "" {
		if n, err := strconv.ParseUint(v, 10, 64); err == nil {
			return n
		}
	}
	return def
}

// TestGenerated runs generated cases (see Generate) through the same
// comparison as the corpus. A failing case is printed as files, ready to be
// added under e2e/testdata/cases/, with the seed to rerun it.
func TestGenerated(t *testing.T) {
	seed, n := *flagSeed, *flagGenerated
	t.Logf("generated cases: seed %d, %d cases (TRUCE_E2E_SEED, TRUCE_E2E_GENERATED)", seed, n)
	truceBin := truceBinary(t)
	ctx := context.Background()
	dir := t.TempDir()
	var outcomes []outcome
	t.Cleanup(func() { summarize(t, outcomes) })
	for i := 0; i < n; i++ {
		gc := Generate(seed, i)
		start := time.Now()
		ran := false
		ok := t.Run(gc.Name, func(t *testing.T) {
			ran = true
			d, err := gc.WriteTo(dir)
			if err != nil {
				t.Fatal(err)
			}
			c, err := LoadCase(d)
			if err != nil {
				t.Fatalf("%v\n%s", err, gc)
			}
			c.Area = GeneratedArea
			defer func() {
				if t.Failed() {
					t.Logf("generated case %d of seed %d differs; rerun it with\n"+
						"  TRUCE_E2E_SEED=%d go test -tags e2e -count=1 -v ./e2e/differential -run 'TestGenerated/%s$'\n"+
						"and add it to the corpus as these files:\n%s", i, seed, seed, gc.Name, gc)
				}
			}()
			runCase(ctx, t, c, truceBin)
		})
		if !ran {
			continue
		}
		status := "pass"
		if !ok {
			status = "fail"
		}
		outcomes = append(outcomes, outcome{GeneratedArea, gc.Name, status, time.Since(start)})
	}
}
