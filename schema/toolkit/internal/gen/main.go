// Command gen copies the CustomResourceDefinitions of Argo CD and Flux from
// their pinned Go modules or Git tags into schema/toolkit/crds, gzipped,
// together with each source's licence, and writes the Go index and package
// doc that describe them.
//
// Modules come from the Go module proxy through `go mod download -json`,
// which verifies them against the checksum database. Git tags, for the
// controllers whose modules the proxy does not serve, are cloned into
// memory (depth 1) and must lead to the pinned commit. The environment
// variable TRUCE_GEN_GIT_MIRRORS (see parseMirrors) reads local copies of
// the repositories instead, for machines without network access. Run gen
// with `go generate ./schema/toolkit` (or `make generate`) after changing
// pins.
package main

import (
	"fmt"
	"os"
)

// pin is one source the CRDs are copied from: a Go module (Path, Version)
// or a Git repository at a tag (Git, Tag, Commit).
type pin struct {
	// Name is the Go identifier of the module@version (or URL@tag) constant.
	Name    string
	Path    string
	Version string
	// Git is the URL of a repository the CRDs are read from, at Tag, when
	// the module proxy does not serve its module. Commit is the commit the
	// tag must lead to: Git tags, unlike module versions, can move, and a
	// local mirror could be any copy.
	Git, Tag, Commit string
	// Dir is the directory under crds/ the files are written to.
	Dir string
	// Glob selects the CRD files inside the module or repository
	// (path.Match syntax).
	Glob string
	// Note explains, in the package doc, a version other than the one the
	// tool's release installs.
	Note string
}

// ModulePath is what toolkit.Module.Path records: the module path or the
// repository URL.
func (p pin) ModulePath() string {
	if p.Git != "" {
		return p.Git
	}
	return p.Path
}

// ModuleVersion is what toolkit.Module.Version records: the module version
// or the tag.
func (p pin) ModuleVersion() string {
	if p.Git != "" {
		return p.Tag
	}
	return p.Version
}

func (p pin) String() string { return p.ModulePath() + "@" + p.ModuleVersion() }

// check reports a pin that is neither a module nor a Git tag, or both.
func (p pin) check() error {
	isModule := p.Path != "" || p.Version != ""
	isGit := p.Git != "" || p.Tag != "" || p.Commit != ""
	switch {
	case p.Name == "" || p.Dir == "" || p.Glob == "":
		return fmt.Errorf("pin %s: Name, Dir and Glob are required", p)
	case isModule && isGit:
		return fmt.Errorf("pin %s: both a module and a Git repository", p)
	case isModule && (p.Path == "" || p.Version == ""):
		return fmt.Errorf("pin %s: a module needs Path and Version", p)
	case isGit && (p.Git == "" || p.Tag == "" || len(p.Commit) != 40):
		return fmt.Errorf("pin %s: a Git pin needs Git, Tag and the full 40-digit Commit", p)
	case !isModule && !isGit:
		return fmt.Errorf("pin %s: neither a module nor a Git repository", p.Name)
	}
	return nil
}

// missing is a module whose CRDs truce should embed but cannot obtain.
type missing struct {
	Path, Version, Kinds, Reason string
}

// pins is the one place module versions are chosen. Flux controllers are
// those Flux v2.9.5 installs (manifests/bases/*/kustomization.yaml of
// github.com/fluxcd/flux2/v2@v2.9.5) where the module proxy serves that
// version, otherwise a version it serves. source-watcher and
// image-automation-controller are not served at all, so they are Git tags:
// the newest the copies of the repositories gen was last run against had.
func pins() []pin {
	const fluxCRDs = "config/crd/bases/*.yaml"
	return []pin{
		{Name: "ArgoCD", Path: "github.com/argoproj/argo-cd/v3", Version: "v3.6.1", Dir: "argo-cd", Glob: "manifests/crds/*-crd.yaml"},
		{Name: "FluxSourceController", Path: "github.com/fluxcd/source-controller", Version: "v1.9.5", Dir: "source-controller", Glob: fluxCRDs},
		{Name: "FluxKustomizeController", Path: "github.com/fluxcd/kustomize-controller", Version: "v1.9.5", Dir: "kustomize-controller", Glob: fluxCRDs},
		{Name: "FluxHelmController", Path: "github.com/fluxcd/helm-controller", Version: "v1.6.4", Dir: "helm-controller", Glob: fluxCRDs},
		{Name: "FluxNotificationController", Path: "github.com/fluxcd/notification-controller", Version: "v1.6.0", Dir: "notification-controller", Glob: fluxCRDs,
			Note: "Flux v2.9.5 installs v1.9.4, which the module proxy does not serve"},
		{Name: "FluxImageReflectorController", Path: "github.com/fluxcd/image-reflector-controller", Version: "v1.1.1", Dir: "image-reflector-controller", Glob: fluxCRDs,
			Note: "Flux v2.9.5 installs v1.2.5, which the module proxy does not serve"},
		{Name: "FluxSourceWatcher", Git: "https://github.com/fluxcd/source-watcher", Tag: "v2.2.1", Commit: "824a8bdc6d2799877e590dd81ca0db4929958380",
			Dir: "source-watcher", Glob: fluxCRDs, Note: "Flux v2.9.5 installs v2.2.4, newer than any tag in the copy of the repository gen read"},
		{Name: "FluxImageAutomationController", Git: "https://github.com/fluxcd/image-automation-controller", Tag: "v1.2.1", Commit: "aec086297d39dc23ece874cad38efcff0b9ac0f5",
			Dir: "image-automation-controller", Glob: fluxCRDs, Note: "Flux v2.9.5 installs v1.2.5, newer than any tag in the copy of the repository gen read"},
	}
}

// missingModules are listed in the package doc so that nobody mistakes
// their kinds' absence for an oversight. None is missing now; the list
// stays for the next module neither the proxy nor a Git tag provides.
func missingModules() []missing {
	return nil
}

func main() {
	mirrors, err := parseMirrors(os.Getenv(mirrorsEnv))
	if err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
	if err := run(".", mirrors); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
