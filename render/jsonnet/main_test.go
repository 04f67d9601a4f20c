package jsonnet

import (
	"os"
	"testing"

	"github.com/truce-dev/truce/render/isolate"
)

// TestMain makes the test binary an evaluation worker when re-executed as
// one, so that the tests evaluate through the worker as truce does.
func TestMain(m *testing.M) {
	isolate.Main()
	os.Exit(m.Run())
}
