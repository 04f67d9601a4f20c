package webhook

import (
	"encoding/json"
	"fmt"

	"gomodules.xyz/jsonpatch/v2"
	// The library kube-apiserver applies webhook patches with.
	applier "gopkg.in/evanphx/json-patch.v4"
)

// admissionPatch returns the JSONPatch of admission's changes to the
// object the server sent: the changes from base to mutated (both through
// truce's decoding and encoding) are applied to the original bytes, and the
// patch is taken from the original to that. Fields truce's scheme does not
// know (a newer server's, an alpha field) and defaults the server did not
// set are left as the server sent them. When the changes do not apply to
// the original (its shape differs from base where a policy wrote), the
// patch goes from the original to the mutated object.
func admissionPatch(original, base, mutated []byte) ([]byte, error) {
	if base != nil {
		ops, err := jsonpatch.CreatePatch(base, mutated)
		if err != nil {
			return nil, fmt.Errorf("building the JSONPatch: %w", err)
		}
		if len(ops) == 0 {
			return nil, nil
		}
		raw, err := json.Marshal(ops)
		if err != nil {
			return nil, fmt.Errorf("encoding the JSONPatch: %w", err)
		}
		if p, err := applier.DecodePatch(raw); err == nil {
			if final, err := p.Apply(original); err == nil {
				mutated = final
			}
		}
	}
	return buildPatch(original, mutated)
}

// buildPatch returns the JSONPatch (RFC 6902) that turns the object the
// server sent into the mutated one, or nil when they are equal. It is
// computed against the exact bytes the server sent, so that applying it
// reproduces the mutated object whatever the server's encoding.
func buildPatch(original, mutated []byte) ([]byte, error) {
	ops, err := jsonpatch.CreatePatch(original, mutated)
	if err != nil {
		return nil, fmt.Errorf("building the JSONPatch: %w", err)
	}
	if len(ops) == 0 {
		return nil, nil
	}
	out, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encoding the JSONPatch: %w", err)
	}
	return out, nil
}
