package webhook

import (
	"encoding/json"
	"fmt"

	"gomodules.xyz/jsonpatch/v2"
)

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
