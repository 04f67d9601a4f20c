package loadgen

import (
	"bytes"
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/manifest"
)

// policyFiles are the policies a load run's truce target serves: ten
// MutatingAdmissionPolicies and ten ValidatingAdmissionPolicies, each in
// its own file with its binding, of the kinds platform teams run with
// policy engines, all matching Pods and workload controllers.
//
//go:embed policies/*.yaml
var policyFiles embed.FS

// Policies writes the 20 policies with their bindings into dir (which
// must exist), one file each: mutating-NN-NAME.yaml and
// validating-NN-NAME.yaml.
//
// The mutating ones are idempotent (a second run changes nothing: match
// conditions guard every JSONPatch, ApplyConfigurations set constants),
// and change Pods' specs on CREATE only, since a Pod's spec is immutable.
// Of the corpus (Requests), they allow every write but three.
func Policies(dir string) error {
	names, err := fs.Glob(policyFiles, "policies/*.yaml")
	if err != nil {
		return fmt.Errorf("listing the policies: %w", err)
	}
	for _, name := range names {
		data, err := policyFiles.ReadFile(name)
		if err != nil {
			return fmt.Errorf("reading %s: %w", name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, path.Base(name)), data, 0o644); err != nil {
			return fmt.Errorf("writing the policies: %w", err)
		}
	}
	return nil
}

// embeddedObjects decodes the files of fsys matching pattern whose names
// start with one of prefixes.
func embeddedObjects(fsys embed.FS, pattern string, prefixes ...string) ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", pattern, err)
	}
	var out []*unstructured.Unstructured
	for _, name := range names {
		base := path.Base(name)
		if !hasAnyPrefix(base, prefixes) {
			continue
		}
		data, err := fsys.ReadFile(name)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", name, err)
		}
		objs, err := manifest.Decode(base, bytes.NewReader(data), manifest.DefaultOptions())
		if err != nil {
			return nil, fmt.Errorf("decoding %s: %w", base, err)
		}
		for _, o := range objs {
			out = append(out, o.Object)
		}
	}
	return out, nil
}

func hasAnyPrefix(s string, prefixes []string) bool {
	for _, p := range prefixes {
		if strings.HasPrefix(s, p) {
			return true
		}
	}
	return false
}
