package flux

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"

	"sigs.k8s.io/kustomize/api/konfig"
	kustypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/manifest"
)

// guardFS is what kustomize reads the source through: Flux's secure
// file system (confined to the root), with every file bounded by the size
// limits and every kustomization checked for remote references before
// kustomize can act on them. kustomize-controller would clone remote bases
// and fetch URLs; truce renders offline and refuses them instead.
type guardFS struct {
	filesys.FileSystem
	lim     limits
	aliases int // MaxAliasNodes
	left    int64
	// display maps a path under the root to what users see.
	display func(string) string
	// refusal is the first read refused on purpose: the real reason for a
	// failed build, whatever kustomize made of it.
	refusal error
}

func (g *guardFS) refuse(err error) error {
	if g.refusal == nil {
		g.refusal = err
	}
	return err
}

func (g *guardFS) ReadFile(p string) ([]byte, error) {
	if err := g.admit(p); err != nil {
		return nil, err
	}
	data, err := g.FileSystem.ReadFile(p)
	if err != nil {
		return nil, err
	}
	if err := g.check(p, data); err != nil {
		return nil, g.refuse(err)
	}
	return data, nil
}

func (g *guardFS) Open(p string) (filesys.File, error) {
	if err := g.admit(p); err != nil {
		return nil, err
	}
	return g.FileSystem.Open(p)
}

// admit checks a file's size against the limits before it is read.
func (g *guardFS) admit(p string) error {
	info, err := os.Stat(p)
	if err != nil || !info.Mode().IsRegular() {
		return nil // the secure file system reports it
	}
	if info.Size() > g.lim.maxFile {
		return g.refuse(fmt.Errorf("%s is %s, larger than the %s limit (MaxFileBytes): %w",
			g.display(p), formatBytes(info.Size()), formatBytes(g.lim.maxFile), manifest.ErrTooLarge))
	}
	if g.left -= info.Size(); g.left < 0 {
		return g.refuse(fmt.Errorf("kustomize read more than the %s limit (MaxTotalBytes) at %s: %w",
			formatBytes(g.lim.maxTotal), g.display(p), manifest.ErrTooLarge))
	}
	return nil
}

func (g *guardFS) check(p string, data []byte) error {
	if err := checkAliases(g.display(p), data, g.aliases); err != nil {
		return err
	}
	if slices.Contains(konfig.RecognizedKustomizationFileNames(), filepath.Base(p)) {
		return checkKustomization(g.display(p), filepath.Dir(p), data)
	}
	return checkPluginConfig(g.display(p), data)
}

// checkKustomization refuses a kustomization that refers to a remote base,
// component or file. dir is the kustomization's directory: kustomize
// prefers a local path when one exists.
func checkKustomization(name, dir string, data []byte) error {
	var k kustypes.Kustomization
	if err := yaml.Unmarshal(data, &k); err != nil {
		return nil // kustomize reports it
	}
	k.FixKustomization() // folds the deprecated bases into resources
	local := func(value string) bool {
		_, err := os.Stat(filepath.Join(dir, value))
		return err == nil
	}
	if field, value := manifest.RemoteReference(&k, local); value != "" {
		return fmt.Errorf("%s: %s entry %q is remote: truce builds Flux Kustomizations offline and does not fetch "+
			"remote bases or files; vendor it into the repository: %w", name, field, value, errRemote)
	}
	return nil
}

// errRemote classifies refusals of remote references.
var errRemote = errors.New("remote reference")

// checkPluginConfig refuses builtin generator and transformer
// configurations that would make kustomize fetch a URL.
func checkPluginConfig(name string, data []byte) error {
	if !bytes.Contains(data, []byte("builtin")) {
		return nil
	}
	for _, doc := range bytes.Split(data, []byte("\n---")) {
		var m map[string]any
		if yaml.Unmarshal(doc, &m) != nil || m["apiVersion"] != "builtin" {
			continue
		}
		if bad := manifest.PluginRemoteReference(m); bad != "" {
			return fmt.Errorf("%s: %v refers to %q, which is remote: truce builds Flux Kustomizations offline: %w",
				name, m["kind"], bad, errRemote)
		}
	}
	return nil
}

// prescan bounds what Flux's generator reads when it scans dir for
// manifests: it reads every .yaml and .yml file under dir, outside
// guardFS, and parses them with kustomize.
func prescan(dir string, lim limits, aliases int, display func(string) string) error {
	left := lim.maxTotal
	return filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if ext := filepath.Ext(p); ext != ".yaml" && ext != ".yml" {
			return nil
		}
		info, err := os.Stat(p)
		if err != nil || !info.Mode().IsRegular() {
			return nil // the generator reports it
		}
		if info.Size() > lim.maxFile {
			return fmt.Errorf("%s is %s, larger than the %s limit (MaxFileBytes): %w",
				display(p), formatBytes(info.Size()), formatBytes(lim.maxFile), manifest.ErrTooLarge)
		}
		if left -= info.Size(); left < 0 {
			return fmt.Errorf("the manifests under %s exceed the %s limit (MaxTotalBytes): %w",
				display(dir), formatBytes(lim.maxTotal), manifest.ErrTooLarge)
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return nil // the generator reports it
		}
		return checkAliases(display(p), data, aliases)
	})
}
