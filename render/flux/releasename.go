package flux

import (
	"crypto/sha256"
	"fmt"
)

// maxReleaseName is Helm's limit on release names.
const maxReleaseName = 53

// ReleaseName is helm-controller's release name for a HelmRelease named
// name: releaseName when set, else [targetNamespace-]name; past 53
// characters it is cut to 40 and suffixed with "-" and the first 12 hex
// digits of the SHA-256 of the full name (helm-controller's
// release.ShortenName).
func ReleaseName(name, releaseName, targetNamespace string) string {
	n := name
	switch {
	case releaseName != "":
		n = releaseName
	case targetNamespace != "":
		n = targetNamespace + "-" + name
	}
	if len(n) <= maxReleaseName {
		return n
	}
	const hashLen = 12
	sum := fmt.Sprintf("%x", sha256.Sum256([]byte(n)))
	return n[:maxReleaseName-hashLen-1] + "-" + sum[:hashLen]
}
