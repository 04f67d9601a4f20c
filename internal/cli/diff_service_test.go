package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A Service exported from a cluster whose service range is wider than the
// default keeps its address and node port; a write asking for that port is
// refused as already allocated (issue 21 item 6).
func TestDiffLiveServiceOutsideDefaultRange(t *testing.T) {
	dir := t.TempDir()
	live := `{"apiVersion":"v1","kind":"Service","metadata":{"name":"web","namespace":"default","resourceVersion":"123"},
 "spec":{"type":"NodePort","clusterIP":"10.96.12.7","clusterIPs":["10.96.12.7"],"selector":{"app":"web"},
 "ports":[{"port":80,"targetPort":8080,"protocol":"TCP","nodePort":31080}]}}`
	git := `apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  type: NodePort
  selector: {app: web}
  ports: [{port: 80, targetPort: 8080}]
---
apiVersion: v1
kind: Service
metadata: {name: api, namespace: default}
spec:
  type: NodePort
  selector: {app: api}
  ports: [{port: 80, nodePort: 31080}]
`
	for name, data := range map[string]string{"live.json": live, "git.yaml": git} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runTruce(t, "diff", filepath.Join(dir, "git.yaml"), "-c", filepath.Join(dir, "live.json"))
	if code != exitFound {
		t.Fatalf("exit %d, want %d; stderr: %s", code, exitFound, errOut)
	}
	for _, want := range []string{
		"Service/default/api (rejected)",
		"spec.ports[0].nodePort: Invalid value: 31080: provided port is already allocated",
		"1 in sync",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}
