package simulate

import (
	"io"
	"os"
	"testing"

	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// The upstream admission plugins log each chain they build through
	// klog: thousands of lines around a failure, and in the middle of
	// benchmark result lines.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}
