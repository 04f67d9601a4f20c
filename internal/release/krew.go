package release

import (
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

// krewPlugin is krew's plugin manifest (krew.googlecontainertools.github.com/v1alpha2).
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string         `json:"version"`
		Homepage         string         `json:"homepage"`
		ShortDescription string         `json:"shortDescription"`
		Description      string         `json:"description"`
		Platforms        []krewPlatform `json:"platforms"`
	} `json:"spec"`
}

type krewPlatform struct {
	Selector struct {
		MatchLabels map[string]string `json:"matchLabels"`
	} `json:"selector"`
	URI    string `json:"uri"`
	SHA256 string `json:"sha256"`
	// Files are what krew copies out of the archive into the plugin's
	// directory; Bin, among them, is what kubectl-truce links to.
	Files []krewFile `json:"files"`
	Bin   string     `json:"bin"`
}

type krewFile struct {
	From string `json:"from"`
	To   string `json:"to"`
}

// krewFiles are installed side by side: truce finds the Kyverno helper
// next to itself (through krew's kubectl-truce symlink too), and krew-index
// wants the licence installed.
var krewFiles = []krewFile{{From: "truce", To: "."}, {From: HelperName, To: "."}, {From: "LICENSE", To: "."}}

// krewArchive is one platform's archive in the manifest.
type krewArchive struct {
	Target
	URI, SHA256 string
}

// writeKrew writes the manifest that makes `kubectl krew install truce`
// (and `kubectl truce check …`) work, for the release's archives.
func writeKrew(out, version, homepage string, archives []krewArchive) error {
	var p krewPlugin
	p.APIVersion = "krew.googlecontainertools.github.com/v1alpha2"
	p.Kind = "Plugin"
	p.Metadata.Name = "truce"
	p.Spec.Version = version
	p.Spec.Homepage = homepage
	p.Spec.ShortDescription = "Tell GitOps drift caused by admission before it happens"
	p.Spec.Description = "truce runs Kubernetes admission offline (MutatingAdmissionPolicies, ValidatingAdmissionPolicies,\n" +
		"webhooks, Kyverno policies) and simulates Argo CD and Flux against it: will they settle or fight?\n" +
		"  kubectl truce check ./deploy -c ./cluster\n"
	for _, a := range archives {
		var pl krewPlatform
		pl.Selector.MatchLabels = map[string]string{"os": a.OS, "arch": a.Arch}
		pl.URI, pl.SHA256, pl.Bin = a.URI, a.SHA256, "truce"
		pl.Files = krewFiles
		p.Spec.Platforms = append(p.Spec.Platforms, pl)
	}
	b, err := yaml.Marshal(p)
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, b, 0o644); err != nil {
		return fmt.Errorf("writing the krew manifest %s: %w", out, err)
	}
	return nil
}
