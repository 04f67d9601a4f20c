package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// crdInfo is what the generated index records about one CRD.
type crdInfo struct {
	Group, Kind, Storage string
	Served               []string
}

// inspect decodes every document of a CRD file and checks it is an
// apiextensions.k8s.io/v1 CustomResourceDefinition with one storage version.
func inspect(data []byte) ([]crdInfo, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []crdInfo
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("splitting YAML documents: %w", err)
		}
		js, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("decoding CRD: %w", err)
		}
		if t := bytes.TrimSpace(js); len(t) == 0 || bytes.Equal(t, []byte("null")) {
			continue
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := json.Unmarshal(js, &crd); err != nil {
			return nil, fmt.Errorf("decoding CRD: %w", err)
		}
		if crd.APIVersion != "apiextensions.k8s.io/v1" || crd.Kind != "CustomResourceDefinition" {
			return nil, fmt.Errorf("document is %s %s, not an apiextensions.k8s.io/v1 CustomResourceDefinition", crd.APIVersion, crd.Kind)
		}
		info := crdInfo{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}
		for _, v := range crd.Spec.Versions {
			if v.Storage {
				if info.Storage != "" {
					return nil, fmt.Errorf("%s: two storage versions %s and %s", crd.Name, info.Storage, v.Name)
				}
				info.Storage = v.Name
			}
			if v.Served {
				info.Served = append(info.Served, v.Name)
			}
		}
		if info.Storage == "" {
			return nil, fmt.Errorf("%s: no storage version", crd.Name)
		}
		out = append(out, info)
	}
	if len(out) == 0 {
		return nil, errors.New("no CustomResourceDefinition in file")
	}
	return out, nil
}
