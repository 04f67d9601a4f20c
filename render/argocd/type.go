package argocd

import (
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"
)

// Type is the type of an Application source, as Argo CD names it.
type Type string

// The source types of Argo CD.
const (
	TypeDirectory Type = "Directory"
	TypeHelm      Type = "Helm"
	TypeKustomize Type = "Kustomize"
	// TypePlugin is a source rendered by a config management plugin
	// sidecar. What a plugin generates cannot be predicted, so callers
	// judge such sources Unpredictable.
	TypePlugin Type = "Plugin"
)

// kustomizationNames are the file names Argo CD and kustomize recognise.
var kustomizationNames = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// SourceType detects the type of the source in dir the way the
// repo-server does when the Application sets none (discovery.AppType):
// every file directly in dir whose name ends in "Chart.yaml" makes it Helm
// and every kustomization file makes it Kustomize, the last such file in
// lexical order winning (so a directory with both Chart.yaml and
// kustomization.yaml is Kustomize); anything else is a Directory.
//
// It never returns TypePlugin: Argo CD first asks every installed plugin
// sidecar whether it claims the directory, which depends on the Argo CD
// installation, not on the repository. Callers that know plugins with
// discovery rules are installed must treat the result as uncertain.
func SourceType(dir string) (Type, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", fmt.Errorf("detecting the Argo CD source type of %s: %w", dir, err)
	}
	return TypeOf(entries), nil
}

// TypeOf is SourceType for the entries of a directory read elsewhere,
// such as a Git tree (truce sync reads a commit without checking it out).
func TypeOf(entries []fs.DirEntry) Type {
	t := TypeDirectory
	for _, e := range entries { // sorted by name, as filepath.Walk does
		if e.IsDir() {
			continue
		}
		if strings.HasSuffix(e.Name(), "Chart.yaml") {
			t = TypeHelm
		}
		if slices.Contains(kustomizationNames, e.Name()) {
			t = TypeKustomize
		}
	}
	return t
}

// ExplicitType returns the type an Application sets explicitly, given the
// types whose fields (spec.source.kustomize, helm, directory, plugin) are
// present: none is "" (detect it with SourceType), one is that type, more
// than one is the error Argo CD reports.
func ExplicitType(set ...Type) (Type, error) {
	switch len(set) {
	case 0:
		return "", nil
	case 1:
		return set[0], nil
	}
	names := make([]string, len(set))
	for i, t := range set {
		names[i] = string(t)
	}
	return "", fmt.Errorf("multiple application sources defined: %s", strings.Join(names, ","))
}
