package reconcile

import (
	"os"
	"testing"

	"github.com/truce-dev/truce/render/isolate"
)

// TestMain makes the test binary a template worker when re-executed as
// one, so that Helm charts and Jsonnet render in a worker as in truce.
func TestMain(m *testing.M) {
	isolate.Main()
	os.Exit(m.Run())
}
