package helm

import (
	"os"
	"testing"

	"github.com/truce-dev/truce/render/isolate"
)

// TestMain makes the test binary a template worker when re-executed as
// one, so that the tests render through the worker as truce does.
func TestMain(m *testing.M) {
	isolate.Main()
	os.Exit(m.Run())
}
