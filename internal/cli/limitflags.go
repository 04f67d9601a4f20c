package cli

import (
	"fmt"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/truce-dev/truce/manifest"
)

// limitFlags bound what a command reads of manifests, as manifest.Options
// does; every command that reads manifests has them.
type limitFlags struct {
	maxDocuments  int
	maxFileBytes  byteSize
	maxTotalBytes byteSize
}

const (
	flagMaxDocuments  = "--max-documents"
	flagMaxFileBytes  = "--max-file-bytes"
	flagMaxTotalBytes = "--max-total-bytes"
)

func (l *limitFlags) register(f *pflag.FlagSet) {
	l.maxFileBytes = byteSize(manifest.DefaultMaxFileBytes)
	l.maxTotalBytes = byteSize(manifest.DefaultMaxTotalBytes)
	f.IntVar(&l.maxDocuments, flagMaxDocuments[2:], manifest.DefaultMaxDocuments, "the most documents (objects and List items) read at once: the repository's, or the cluster's files")
	f.Var(&l.maxFileBytes, flagMaxFileBytes[2:], "the largest file or rendered output read, in bytes or with a unit (16Mi, 1G)")
	f.Var(&l.maxTotalBytes, flagMaxTotalBytes[2:], "the most bytes read at once over all files, in bytes or with a unit (256Mi, 2Gi)")
}

// options are the manifest.Options the flags say, whose errors name the
// flags; the flags were validated when parsed, but for the number of
// documents.
func (l *limitFlags) options() (manifest.Options, error) {
	if l == nil {
		return manifest.DefaultOptions(), nil
	}
	if l.maxDocuments <= 0 {
		return manifest.Options{}, fmt.Errorf("%s %d: must be positive", flagMaxDocuments, l.maxDocuments)
	}
	o := manifest.DefaultOptions()
	o.MaxDocuments = l.maxDocuments
	o.MaxFileBytes = int64(l.maxFileBytes)
	o.MaxTotalBytes = int64(l.maxTotalBytes)
	o.LimitNames = manifest.LimitNames{FileBytes: flagMaxFileBytes, TotalBytes: flagMaxTotalBytes, Documents: flagMaxDocuments}
	return o, nil
}

// byteSize is a flag of bytes: a plain number or a Kubernetes quantity
// (64Mi, 1G), as in a container's memory limit.
type byteSize int64

func (b *byteSize) String() string {
	return resource.NewQuantity(int64(*b), resource.BinarySI).String()
}

func (b *byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("not a number of bytes such as 67108864 or 64Mi: %w", err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return fmt.Errorf("%s: must be a positive whole number of bytes", s)
	}
	*b = byteSize(n)
	return nil
}

func (b *byteSize) Type() string { return "bytes" }
