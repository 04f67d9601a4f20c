package flux

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// mergeYAMLFile deep-merges the YAML file p of src into dest of out, as
// source-watcher's Merge strategy does: every document of each file is
// merged into one map, maps merge recursively, anything else (lists
// included) is replaced, the copied file winning.
func mergeYAMLFile(src *os.Root, p string, out *os.Root, dest string) error {
	overlay, err := loadYAML(src, p)
	if err != nil {
		return fmt.Errorf("merging %s: %w", p, err)
	}
	base, err := loadYAML(out, dest)
	if err != nil {
		return fmt.Errorf("merging into %s: %w", dest, err)
	}
	merged, err := yaml.Marshal(loader.MergeMaps(base, overlay))
	if err != nil {
		return err
	}
	return out.WriteFile(dest, merged, 0o644)
}

func loadYAML(root *os.Root, p string) (map[string]any, error) {
	data, err := root.ReadFile(p)
	if err != nil {
		return nil, err
	}
	out := map[string]any{}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("reading YAML document: %w", err)
		}
		m := map[string]any{}
		if err := yaml.Unmarshal(doc, &m); err != nil {
			return nil, fmt.Errorf("cannot unmarshal YAML document: %w", err)
		}
		out = loader.MergeMaps(out, m)
	}
}
