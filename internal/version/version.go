// Package version says which truce this is and whose behaviour it
// reproduces: the Kubernetes, Argo CD, Flux, Helm and kustomize releases
// whose code (or CRDs) it was built with.
package version

import (
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/truce-dev/truce/schema/toolkit"
)

// Set at link time by the Makefile and the release tool:
//
//	-ldflags "-X github.com/truce-dev/truce/internal/version.version=v0.2.0
//	          -X github.com/truce-dev/truce/internal/version.commit=<sha>"
//
// They are variables only because -X needs them to be; nothing assigns them.
var (
	version string
	commit  string
)

// Info describes one build of truce.
type Info struct {
	Version   string `json:"version"`
	Commit    string `json:"commit,omitempty"`
	GoVersion string `json:"goVersion"`
	Platform  string `json:"platform"`
	// Reproduces lists what truce behaves like, in the order users read it.
	Reproduces []Component `json:"reproduces"`
}

// Component is one tool whose behaviour truce reproduces and the version
// of its code or CRDs that is built in.
type Component struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// Source is the Go module (or Git repository) the version is read from.
	Source string `json:"source"`
}

// Get describes the running binary.
func Get() Info {
	bi, _ := debug.ReadBuildInfo()
	return fromBuild(bi, version, commit)
}

// fromBuild fills Info from the build information and the values set with
// -X; a value left unset falls back to what the Go toolchain recorded.
func fromBuild(bi *debug.BuildInfo, ver, rev string) Info {
	info := Info{
		Version:   ver,
		Commit:    rev,
		GoVersion: runtime.Version(),
		Platform:  runtime.GOOS + "/" + runtime.GOARCH,
	}
	deps := map[string]string{}
	if bi != nil {
		info.GoVersion = bi.GoVersion
		if info.Version == "" && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
			// go install github.com/truce-dev/truce/cmd/truce@v0.2.0
			info.Version = bi.Main.Version
		}
		if info.Commit == "" {
			// go build in a Git work tree (without -buildvcs=false).
			var modified bool
			for _, s := range bi.Settings {
				switch s.Key {
				case "vcs.revision":
					info.Commit = s.Value
				case "vcs.modified":
					modified = s.Value == "true"
				}
			}
			if modified && info.Commit != "" {
				info.Commit += "-dirty"
			}
		}
		for _, d := range bi.Deps {
			if d.Replace != nil {
				d = d.Replace
			}
			deps[d.Path] = d.Version
		}
	}
	if info.Version == "" {
		info.Version = "devel"
	}
	info.Reproduces = components(deps)
	return info
}

// components names the reproduced tools. Kubernetes, Helm and kustomize are
// libraries truce links, so their versions come from the build; Argo CD and
// the Flux controllers are reproduced from their CRDs and documented
// behaviour, so their versions are the ones schema/toolkit embeds.
func components(deps map[string]string) []Component {
	var out []Component
	dep := func(name, path string, conv func(string) string) {
		if v, ok := deps[path]; ok {
			if conv != nil {
				v = conv(v)
			}
			out = append(out, Component{Name: name, Version: v, Source: path})
		}
	}
	if _, ok := deps["k8s.io/kubernetes"]; ok {
		dep("Kubernetes", "k8s.io/kubernetes", nil)
	} else {
		dep("Kubernetes", "k8s.io/apiserver", kubeRelease)
	}
	for _, m := range toolkit.Versions() {
		name := ""
		switch {
		case strings.HasSuffix(m.Path, "/argo-cd/v3"):
			name = "Argo CD"
		case strings.HasSuffix(m.Path, "/kustomize-controller"):
			name = "Flux kustomize-controller"
		case strings.HasSuffix(m.Path, "/helm-controller"):
			name = "Flux helm-controller"
		case strings.HasSuffix(m.Path, "/source-controller"):
			name = "Flux source-controller"
		default:
			continue
		}
		out = append(out, Component{Name: name, Version: m.Version, Source: m.Path})
	}
	dep("Flux kustomize library", "github.com/fluxcd/pkg/kustomize", nil)
	dep("Helm", "helm.sh/helm/v4", nil)
	dep("kustomize", "sigs.k8s.io/kustomize/api", nil)
	return out
}

// kubeRelease turns a staging module version (v0.37.2) into the Kubernetes
// release it is cut from (v1.37.2).
func kubeRelease(v string) string {
	if rest, ok := strings.CutPrefix(v, "v0."); ok {
		return "v1." + rest
	}
	return v
}
