package webhook

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"

	// The library kube-apiserver applies webhook patches with.
	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// FuzzDecodeReview: any body either decodes into a review with a uid, an
// operation and the objects the operation needs, or is refused with a
// reviewError (HTTP 400); it never panics.
func FuzzDecodeReview(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"apps","version":"v1","kind":"Deployment"},"resource":{"group":"apps","version":"v1","resource":"deployments"},"operation":"CREATE","object":{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"x"}}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"DELETE","oldObject":{"kind":"Pod"}}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"version":"v1","kind":"Pod"},"operation":"UPDATE","object":null}}`))
	f.Add([]byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview"}`))
	f.Add([]byte(`[]`))
	f.Add([]byte(`{"request":{"userInfo":{"extra":{"a":["b"]}},"dryRun":true}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		review, req, err := decodeReview(body)
		if err != nil {
			if _, ok := err.(*reviewError); !ok {
				t.Fatalf("error %T is not a reviewError: %v", err, err)
			}
			return
		}
		if review.Request == nil || review.Request.UID == "" || req.Kind.Kind == "" || req.Kind.Version == "" {
			t.Fatalf("accepted a review without uid or kind: %s", body)
		}
		switch req.Operation {
		case "CREATE", "CONNECT":
			if len(req.Object) == 0 {
				t.Fatalf("accepted %s without object", req.Operation)
			}
		case "UPDATE":
			if len(req.Object) == 0 || len(req.OldObject) == 0 {
				t.Fatalf("accepted UPDATE without object or oldObject")
			}
		case "DELETE":
		default:
			t.Fatalf("accepted operation %q", req.Operation)
		}
	})
}

// FuzzBuildPatch: for any two JSON objects the patch, applied to the
// first, gives the second; equal objects give no patch.
func FuzzBuildPatch(f *testing.F) {
	f.Add([]byte(`{"a":1,"b":[1,2,3]}`), []byte(`{"a":2,"b":[1,3],"c":{"d":"e"}}`))
	f.Add([]byte(`{"metadata":{"labels":{"a/b":"x","c~d":"y"}}}`), []byte(`{"metadata":{"labels":{"a/b":"z"}}}`))
	f.Add([]byte(`{"spec":{"containers":[{"name":"a","image":"x"}]}}`), []byte(`{"spec":{"containers":[{"name":"a","image":"r/x"},{"name":"p","image":"e"}]}}`))
	f.Add([]byte(`{"x":null}`), []byte(`{"x":{}}`))
	f.Add([]byte(`{}`), []byte(`{}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		var va, vb map[string]any
		if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil || va == nil || vb == nil {
			return
		}
		patch, err := buildPatch(a, b)
		if err != nil {
			t.Fatalf("buildPatch(%s, %s): %v", a, b, err)
		}
		if reflect.DeepEqual(va, vb) {
			if patch != nil {
				t.Fatalf("equal objects, patch %s", patch)
			}
			return
		}
		if patch == nil {
			t.Fatalf("no patch between %s and %s", a, b)
		}
		p, err := jsonpatch.DecodePatch(patch)
		if err != nil {
			t.Fatalf("patch %s does not decode: %v", patch, err)
		}
		out, err := p.Apply(a)
		if err != nil {
			t.Fatalf("patch %s does not apply to %s: %v", patch, a, err)
		}
		var got map[string]any
		if err := json.Unmarshal(out, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, vb) {
			t.Fatalf("patch %s on %s gives %s, want %s", patch, a, out, bytes.TrimSpace(b))
		}
	})
}
