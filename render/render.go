// Package render turns the sources GitOps tools read into the objects they
// apply, with the tools' own libraries: Helm charts (render/helm), Jsonnet
// and Argo CD's directory sources (render/jsonnet), Flux's kustomize builds
// and HelmRelease values (render/flux). It sits beside manifest, which reads
// plain files and kustomizations; check, diff, lint and sync all get their
// objects from here, so they see the same rendering.
package render

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/truce-dev/truce/manifest"
)

// KubeVersion is the Kubernetes version charts and generators are told
// they run on: the version whose admission truce reproduces.
const KubeVersion = "v1.37.2"

// Unpredictable is why a source cannot be rendered the way the tool would:
// it needs the network while offline, a chart repository cannot be
// reached, or a generator is one truce does not evaluate. What it would
// produce is unknown, so the unit is judged Unpredictable, never Rejected
// or OutOfSync.
type Unpredictable struct {
	// Subject names what could not be rendered: a chart (repository URL
	// and name), a URL, an ApplicationSet generator.
	Subject string
	Reason  string
}

func (u *Unpredictable) Error() string { return u.Subject + ": " + u.Reason }

// AsUnpredictable returns the Unpredictable in err's chain, if any.
func AsUnpredictable(err error) (*Unpredictable, bool) {
	var u *Unpredictable
	ok := errors.As(err, &u)
	return u, ok
}

// Options direct and bound rendering.
type Options struct {
	// Manifest bounds reading and decoding, rendered output included.
	Manifest manifest.Options
	// CacheDir holds pulled charts; empty is DefaultCacheDir().
	CacheDir string
	// Offline forbids the network: a chart or repository that would be
	// fetched is Unpredictable, naming it.
	Offline bool
	// KubeVersion is what charts see as .Capabilities.KubeVersion; empty
	// is KubeVersion.
	KubeVersion string
	// APIVersions are API versions charts see in .Capabilities.APIVersions
	// beyond Kubernetes' built-in ones (the CRDs of the cluster).
	APIVersions []string
}

// WithDefaults fills the unset fields.
func (o Options) WithDefaults() Options {
	if o.CacheDir == "" {
		o.CacheDir = DefaultCacheDir()
	}
	if o.KubeVersion == "" {
		o.KubeVersion = KubeVersion
	}
	return o
}

// DefaultCacheDir is truce's directory under the user's cache directory,
// or under the temporary directory when there is none.
func DefaultCacheDir() string {
	dir, err := os.UserCacheDir()
	if err != nil {
		dir = os.TempDir()
	}
	return filepath.Join(dir, "truce")
}
