package check

import (
	"io"
	"os"
	"testing"

	"k8s.io/klog/v2"

	"github.com/truce-dev/truce/render/isolate"
)

func TestMain(m *testing.M) {
	// Re-executed as a template worker, the binary serves jobs instead.
	isolate.Main()
	// The upstream admission plugins log each chain they build through
	// klog: thousands of lines around a failure, and in the middle of
	// benchmark result lines.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}
