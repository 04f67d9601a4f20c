package flux

import (
	"fmt"

	"github.com/truce-dev/truce/manifest"
)

// limits are the manifest.Options byte limits with manifest's defaults
// filled in, for the reads and output this package bounds itself.
type limits struct {
	maxFile  int64
	maxTotal int64
}

func limitsOf(o manifest.Options) limits {
	l := limits{maxFile: o.MaxFileBytes, maxTotal: o.MaxTotalBytes}
	if l.maxFile <= 0 {
		l.maxFile = manifest.DefaultMaxFileBytes
	}
	if l.maxTotal <= 0 {
		l.maxTotal = manifest.DefaultMaxTotalBytes
	}
	return l
}

// formatBytes renders n for messages, e.g. "16 MiB".
func formatBytes(n int64) string {
	const unit = 1024
	switch {
	case n >= unit*unit && n%(unit*unit) == 0:
		return fmt.Sprintf("%d MiB", n/(unit*unit))
	case n >= unit && n%unit == 0:
		return fmt.Sprintf("%d KiB", n/unit)
	}
	return fmt.Sprintf("%d bytes", n)
}
