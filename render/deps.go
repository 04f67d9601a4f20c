package render

// The renderers' libraries, pinned in go.mod before their packages land so
// that parallel work shares one module graph. Removed once imported.
import (
	_ "github.com/fluxcd/pkg/kustomize"
	_ "github.com/google/go-jsonnet"
	_ "helm.sh/helm/v4/pkg/action"
	_ "helm.sh/helm/v4/pkg/cmd"
	_ "helm.sh/helm/v4/pkg/downloader"
	_ "helm.sh/helm/v4/pkg/registry"
)
