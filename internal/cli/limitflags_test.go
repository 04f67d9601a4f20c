package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/truce-dev/truce/internal/certs"
)

// limitRepo writes n ConfigMaps, one file each, and returns the directory.
func limitRepo(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	for i := range n {
		cm := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm-%d\n  namespace: default\ndata:\n  key: %s\n", i, strings.Repeat("v", 200))
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("cm-%d.yaml", i)), []byte(cm), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// A repository just over a limit set by flag is refused, naming the flag;
// raising the limit reads it (issue 21 item 5).
func TestLimitFlags(t *testing.T) {
	repo := limitRepo(t, 3)    // 3 documents of about 290 bytes
	cluster := limitRepo(t, 3) // the same, as the cluster's objects
	policy := `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints: {resourceRules: [{apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [configmaps]}]}
  validations: [{expression: "true"}]
`
	policies := t.TempDir()
	for i := range 3 {
		p := strings.Replace(policy, "name: p}", fmt.Sprintf("name: p%d}", i), 1)
		if err := os.WriteFile(filepath.Join(policies, fmt.Sprintf("p%d.yaml", i)), []byte(p), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ca, err := certs.NewCA("test", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(caFile, ca.PEM, 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		flag string // the flag the refusal names
	}{
		{"check", []string{"check", repo}, "--max-documents"},
		{"check -c", []string{"check", limitRepo(t, 1), "-c", cluster}, "--max-documents"},
		{"diff", []string{"diff", repo}, "--max-documents"},
		{"diff -c", []string{"diff", limitRepo(t, 1), "-c", cluster}, "--max-documents"},
		{"fix", []string{"fix", repo, "--dry-run"}, "--max-documents"},
		{"lint", []string{"lint", repo}, "--max-documents"},
		{"admit", []string{"admit", "-f", repo}, "--max-documents"},
		{"webhook config", []string{"webhook", "config", "--policies", policies, "--url", "https://example.com/", "--ca-bundle", caFile}, "--max-documents"},
		{"file bytes", []string{"diff", repo}, "--max-file-bytes"},
		{"total bytes", []string{"diff", repo}, "--max-total-bytes"},
	}
	over := map[string]string{"--max-documents": "2", "--max-file-bytes": "200", "--max-total-bytes": "700"}
	raised := map[string]string{"--max-documents": "3", "--max-file-bytes": "1Ki", "--max-total-bytes": "1Ki"}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, errOut, code := runTruce(t, append(tt.args, tt.flag, over[tt.flag])...)
			if code != exitFailure || !strings.Contains(errOut, "raise it with "+tt.flag) {
				t.Errorf("%s %s: exit %d, stderr %q; want a refusal naming %s", tt.flag, over[tt.flag], code, errOut, tt.flag)
			}
			_, errOut, code = runTruce(t, append(tt.args, tt.flag, raised[tt.flag])...)
			if code == exitFailure || strings.Contains(errOut, "raise it with") {
				t.Errorf("%s %s: exit %d, stderr %q; want the repository read", tt.flag, raised[tt.flag], code, errOut)
			}
		})
	}
}

func TestLimitFlagValues(t *testing.T) {
	repo := limitRepo(t, 1)
	tests := []struct {
		args    []string
		wantErr string // empty: accepted
	}{
		{[]string{"--max-file-bytes", "64Mi"}, ""},
		{[]string{"--max-total-bytes", "1G"}, ""},
		{[]string{"--max-total-bytes", "1048576"}, ""},
		{[]string{"--max-documents", "0"}, "--max-documents 0: must be positive"},
		{[]string{"--max-documents", "-5"}, "--max-documents -5: must be positive"},
		{[]string{"--max-file-bytes", "0"}, "must be a positive whole number of bytes"},
		{[]string{"--max-file-bytes", "-1Mi"}, "must be a positive whole number of bytes"},
		{[]string{"--max-file-bytes", "lots"}, "not a number of bytes"},
	}
	for _, tt := range tests {
		t.Run(strings.Join(tt.args, " "), func(t *testing.T) {
			_, errOut, code := runTruce(t, append([]string{"diff", repo}, tt.args...)...)
			if tt.wantErr == "" {
				if code == exitFailure {
					t.Errorf("exit %d: %s", code, errOut)
				}
				return
			}
			if code != exitFailure || !strings.Contains(errOut, tt.wantErr) {
				t.Errorf("exit %d, stderr %q; want %q", code, errOut, tt.wantErr)
			}
		})
	}
	var b byteSize
	if err := b.Set("64Mi"); err != nil || b != 64<<20 {
		t.Errorf("64Mi = %d, %v", b, err)
	}
}
