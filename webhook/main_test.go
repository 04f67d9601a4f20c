package webhook

import (
	"io"
	"os"
	"testing"

	"k8s.io/klog/v2"
)

func TestMain(m *testing.M) {
	// The upstream admission plugins log their progress
	// through klog, which would land in the middle of benchmark result
	// lines and break tools that read them.
	klog.LogToStderr(false)
	klog.SetOutput(io.Discard)
	os.Exit(m.Run())
}
