package release

import (
	"debug/buildinfo"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"time"
)

// SPDX 2.3 JSON, the fields a Go binary's build information can fill.
type spdxDocument struct {
	SPDXVersion       string             `json:"spdxVersion"`
	DataLicense       string             `json:"dataLicense"`
	SPDXID            string             `json:"SPDXID"`
	Name              string             `json:"name"`
	DocumentNamespace string             `json:"documentNamespace"`
	CreationInfo      spdxCreationInfo   `json:"creationInfo"`
	Packages          []spdxPackage      `json:"packages"`
	Relationships     []spdxRelationship `json:"relationships"`
}

type spdxCreationInfo struct {
	Created  string   `json:"created"`
	Creators []string `json:"creators"`
}

type spdxPackage struct {
	Name             string            `json:"name"`
	SPDXID           string            `json:"SPDXID"`
	VersionInfo      string            `json:"versionInfo,omitempty"`
	DownloadLocation string            `json:"downloadLocation"`
	FilesAnalyzed    bool              `json:"filesAnalyzed"`
	LicenseConcluded string            `json:"licenseConcluded"`
	LicenseDeclared  string            `json:"licenseDeclared"`
	CopyrightText    string            `json:"copyrightText"`
	Checksums        []spdxChecksum    `json:"checksums,omitempty"`
	ExternalRefs     []spdxExternalRef `json:"externalRefs,omitempty"`
	PrimaryPurpose   string            `json:"primaryPackagePurpose,omitempty"`
}

type spdxChecksum struct {
	Algorithm string `json:"algorithm"`
	Value     string `json:"checksumValue"`
}

type spdxExternalRef struct {
	Category string `json:"referenceCategory"`
	Type     string `json:"referenceType"`
	Locator  string `json:"referenceLocator"`
}

type spdxRelationship struct {
	Element string `json:"spdxElementId"`
	Type    string `json:"relationshipType"`
	Related string `json:"relatedSpdxElement"`
}

const noAssertion = "NOASSERTION"

var spdxIDUnsafe = regexp.MustCompile(`[^a-zA-Z0-9.-]+`)

// SBOMInfo is what the binary's build information does not say.
type SBOMInfo struct {
	// Name is the binary's (truce, truce-kyverno): it names the document
	// and its root package; empty is truce.
	Name string
	// Version is the release's (the binary records "(devel)").
	Version string
	// License is truce's SPDX expression, Source its repository URL.
	License, Source string
	Created         time.Time
}

// SBOM writes an SPDX 2.3 JSON document for the Go binary at binary to out:
// the binary (with its sha256), the Go standard library and every module
// linked in, as its build information records them. The modules' licences
// are not asserted.
func SBOM(binary, out string, info SBOMInfo) error {
	bi, err := buildinfo.ReadFile(binary)
	if err != nil {
		return fmt.Errorf("reading the build information of %s: %w", binary, err)
	}
	sum, err := sha256File(binary)
	if err != nil {
		return err
	}
	created, license, source := info.Created, info.License, info.Source
	if created.IsZero() {
		created = time.Now()
	}
	main := bi.Main
	mainVersion := info.Version
	if mainVersion == "" {
		mainVersion = main.Version
	}
	name := info.Name
	if name == "" {
		name = "truce"
	}
	rootID := "SPDXRef-Package-" + spdxIDUnsafe.ReplaceAllString(name, "-")
	doc := spdxDocument{
		SPDXVersion:       "SPDX-2.3",
		DataLicense:       "CC0-1.0",
		SPDXID:            "SPDXRef-DOCUMENT",
		Name:              fmt.Sprintf("%s-%s", name, mainVersion),
		DocumentNamespace: fmt.Sprintf("%s/spdx/%s-%s-%s", source, name, mainVersion, sum[:16]),
		CreationInfo: spdxCreationInfo{
			Created:  created.UTC().Format(time.RFC3339),
			Creators: []string{"Organization: truce", "Tool: truce-release"},
		},
		Packages: []spdxPackage{{
			Name: main.Path, SPDXID: rootID, VersionInfo: mainVersion,
			DownloadLocation: source, LicenseConcluded: license, LicenseDeclared: license, CopyrightText: noAssertion,
			Checksums:      []spdxChecksum{{Algorithm: "SHA256", Value: sum}},
			ExternalRefs:   []spdxExternalRef{purl(main.Path, mainVersion)},
			PrimaryPurpose: "APPLICATION",
		}},
		Relationships: []spdxRelationship{{Element: "SPDXRef-DOCUMENT", Type: "DESCRIBES", Related: rootID}},
	}
	add := func(path, version string) {
		id := "SPDXRef-Package-" + spdxIDUnsafe.ReplaceAllString(path+"-"+version, "-")
		doc.Packages = append(doc.Packages, spdxPackage{
			Name: path, SPDXID: id, VersionInfo: version,
			DownloadLocation: noAssertion, LicenseConcluded: noAssertion, LicenseDeclared: noAssertion, CopyrightText: noAssertion,
			ExternalRefs:   []spdxExternalRef{purl(path, version)},
			PrimaryPurpose: "LIBRARY",
		})
		doc.Relationships = append(doc.Relationships, spdxRelationship{Element: rootID, Type: "DEPENDS_ON", Related: id})
	}
	add("stdlib", bi.GoVersion)
	for _, d := range bi.Deps {
		add(depVersion(d, mainVersion))
	}
	b, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := os.WriteFile(out, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("writing the SBOM %s: %w", out, err)
	}
	return nil
}

// depVersion is the module and version a dependency was built from: its
// replacement's, or, for a module of this repository replaced by its
// directory (the Kyverno helper's protocol; the build records the
// directory at "(devel)"), its own path at the release's version, since it
// is built from the same source as truce.
func depVersion(d *debug.Module, mainVersion string) (string, string) {
	switch {
	case d.Replace == nil:
		return d.Path, d.Version
	case isDir(d.Replace.Path):
		return d.Path, mainVersion
	}
	return d.Replace.Path, d.Replace.Version
}

// isDir tells a replacement by a directory from one by a module, as go.mod
// does: a directory's path is absolute or starts with ./ or ../.
func isDir(replacement string) bool {
	return filepath.IsAbs(replacement) || strings.HasPrefix(replacement, "./") || strings.HasPrefix(replacement, "../")
}

// purl is the package URL of a Go module (or of the standard library).
func purl(path, version string) spdxExternalRef {
	return spdxExternalRef{Category: "PACKAGE-MANAGER", Type: "purl", Locator: fmt.Sprintf("pkg:golang/%s@%s", path, version)}
}
