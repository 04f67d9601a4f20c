// Command gen copies the CustomResourceDefinitions of Argo CD and Flux from
// their pinned Go modules into schema/toolkit/crds, gzipped, together with
// each module's licence, and writes the Go index and package doc that
// describe them.
//
// The modules come from the Go module proxy through `go mod download -json`,
// which verifies them against the checksum database. Run it with
// `go generate ./schema/toolkit` (or `make generate`) after changing pins.
package main

import (
	"fmt"
	"os"
)

// pin is one module the CRDs are copied from.
type pin struct {
	// Name is the Go identifier of the module@version constant.
	Name    string
	Path    string
	Version string
	// Dir is the directory under crds/ the files are written to.
	Dir string
	// Glob selects the CRD files inside the module (path.Match syntax).
	Glob string
	// Note explains, in the package doc, a version other than the one the
	// tool's release installs.
	Note string
}

// missing is a module whose CRDs truce should embed but cannot obtain.
type missing struct {
	Path, Version, Kinds, Reason string
}

// pins is the one place module versions are chosen. Flux controllers are
// those Flux v2.9.5 installs (manifests/bases/*/kustomization.yaml of
// github.com/fluxcd/flux2/v2@v2.9.5) where the module proxy serves that
// version, otherwise a version it serves.
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
	}
}

// missingModules are listed in the package doc so that nobody mistakes
// their kinds' absence for an oversight.
func missingModules() []missing {
	const reason = "the module proxy does not serve it"
	return []missing{
		{Path: "github.com/fluxcd/image-automation-controller", Version: "v1.2.5", Kinds: "ImageUpdateAutomation (image.toolkit.fluxcd.io)", Reason: reason},
		{Path: "github.com/fluxcd/source-watcher/v2", Version: "v2.2.4", Kinds: "ArtifactGenerator (source.extensions.fluxcd.io)", Reason: reason},
	}
}

func main() {
	if err := run("."); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}
