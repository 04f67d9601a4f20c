package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The autoscaler fight of a plain directory (no Application, no
// Kustomization): `truce fix` takes replicas out of Git, keeping the
// comment above it, and the fixed copy checks clean.
func TestFixGivesReplicasToTheAutoscaler(t *testing.T) {
	const deployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: podinfo
spec:
  # the autoscaler's minimum is 2
  replicas: 1
  selector:
    matchLabels: {app: podinfo}
  template:
    metadata:
      labels: {app: podinfo}
    spec:
      containers:
      - name: podinfod
        image: ghcr.io/stefanprodan/podinfo:6.7.0
`
	const hpa = `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: podinfo}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: podinfo}
  minReplicas: 2
  maxReplicas: 4
`
	dir := t.TempDir()
	for name, data := range map[string]string{"deployment.yaml": deployment, "hpa.yaml": hpa} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, errOut, code := runTruce(t, "fix", dir, "--kind", "give-to-controller", "--dry-run")
	if code != exitOK || !strings.Contains(out, "Give the field to its controller") || !strings.Contains(out, "-  replicas: 1") {
		t.Fatalf("fix --dry-run exit %d:\n%s%s", code, out, errOut)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "deployment.yaml")); string(got) != deployment {
		t.Fatalf("--dry-run wrote the file:\n%s", got)
	}
	out, errOut, code = runTruce(t, "fix", dir)
	if code != exitOK {
		t.Fatalf("fix exit %d:\n%s%s", code, out, errOut)
	}
	got, err := os.ReadFile(filepath.Join(dir, "deployment.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.Replace(deployment, "  replicas: 1\n", "", 1); string(got) != want {
		t.Errorf("deployment.yaml after truce fix:\n%s\nwant:\n%s", got, want)
	}
	again, code := checkJSON(t, dir)
	for k, v := range again.verdicts {
		if v != "Synced" {
			t.Errorf("after fix: %s: %s (exit %d)", k, v, code)
		}
	}
}
