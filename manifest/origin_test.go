package manifest

import (
	"strings"
	"testing"
)

func TestOriginLine(t *testing.T) {
	const file = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app
---
apiVersion: v1
kind: Secret
metadata:
  name: app
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: team
---
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: other
`
	objs, err := Decode("f.yaml", strings.NewReader(file), Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, kind, objName, ns string
		want                    int
	}{
		{name: "exact name and kind", kind: "Secret", objName: "app", want: 6},
		{name: "kind decides between equal names", kind: "ConfigMap", objName: "app", want: 1},
		{name: "namespace decides", kind: "ConfigMap", objName: "app-config", ns: "other", want: 17},
		{name: "renamed by prefix: the longest original name wins", kind: "ConfigMap", objName: "prod-app-config", ns: "team", want: 11},
		{name: "ambiguous", kind: "ConfigMap", objName: "app-config", ns: "elsewhere"},
		{name: "no candidate", kind: "ConfigMap", objName: "unrelated"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := OriginLine(objs, tt.kind, tt.objName, tt.ns); got != tt.want {
				t.Errorf("OriginLine = %d, want %d", got, tt.want)
			}
		})
	}
	if got := OriginLine(objs[:1], "Secret", "renamed", ""); got != 1 {
		t.Errorf("OriginLine of the only object = %d, want 1", got)
	}
}
