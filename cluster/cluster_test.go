package cluster

import (
	"encoding/json"
	"testing"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestRefJSON(t *testing.T) {
	for _, tc := range []struct {
		ref  Ref
		want string
	}{
		{Ref{GroupVersionKind: schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, Namespace: "shop", Name: "web"},
			`{"apiVersion":"apps/v1","kind":"Deployment","namespace":"shop","name":"web"}`},
		{Ref{GroupVersionKind: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, Name: "shop"},
			`{"apiVersion":"v1","kind":"Namespace","name":"shop"}`},
	} {
		b, err := json.Marshal(tc.ref)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%v) = %s, %v; want %s", tc.ref, b, err, tc.want)
		}
		var back Ref
		if err := json.Unmarshal(b, &back); err != nil || back != tc.ref {
			t.Errorf("Unmarshal(%s) = %+v, %v", b, back, err)
		}
	}
	var r Ref
	if err := json.Unmarshal([]byte(`{"apiVersion":"a/b/c","kind":"X","name":"x"}`), &r); err == nil {
		t.Error("a bad apiVersion was accepted")
	}
}
