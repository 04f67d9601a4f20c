package argocd

import (
	"bytes"
	"errors"
	"io"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kubeyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// argoSkips reports whether Argo CD ignores a YAML file it cannot use
// (getObjsFromYAMLOrJSON): its decoder fails before producing any object
// and the file does not contain all of apiVersion:, kind: and metadata:,
// so it is taken for an unrelated YAML file (a values file, a CI config).
// The decoding is Argo CD's own, so that the same files are skipped; it
// expands aliases, so callers run it only on input package manifest has
// found free of alias bombs.
func argoSkips(data []byte) bool {
	d := kubeyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for n := 0; ; {
		u := &unstructured.Unstructured{}
		if err := d.Decode(&u); err != nil {
			if errors.Is(err, io.EOF) || n > 0 {
				return false // Argo CD uses the objects, or reports the error
			}
			return !(bytes.Contains(data, []byte("apiVersion:")) &&
				bytes.Contains(data, []byte("kind:")) &&
				bytes.Contains(data, []byte("metadata:")))
		}
		if u != nil {
			n++
		}
	}
}
