package admission_test

import (
	"context"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/truce-dev/truce/admission"
)

// TestProbe dumps results for exploration; removed before delivery.
func TestProbe(t *testing.T) {
	if os.Getenv("PROBE") == "" {
		t.Skip()
	}
	cluster := os.Getenv("PROBE_CLUSTER")
	write := os.Getenv("PROBE_WRITE")
	user := os.Getenv("PROBE_USER")
	cb, _ := os.ReadFile(cluster)
	wb, _ := os.ReadFile(write)
	start := time.Now()
	c := newChain(t, admission.Options{}, string(cb))
	t.Logf("NewChain %v", time.Since(start))
	for _, o := range parseYAML(t, string(wb)) {
		start = time.Now()
		r, err := c.Admit(context.Background(), admission.Request{Object: o, User: user})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := json.MarshalIndent(r, "", "  ")
		t.Logf("Admit %v\n%s", time.Since(start), b)
	}
	_ = strings.TrimSpace
}

func init() {
	dir := os.Getenv("ORACLE_DUMP")
	if dir == "" {
		return
	}
	onCase = func(t *testing.T, cluster []string, write, user string) {
		name := strings.ReplaceAll(t.Name(), "/", "__")
		area, cs, _ := strings.Cut(name, "__")
		d := dir + "/" + area + "/" + cs
		os.MkdirAll(d, 0o755)
		os.WriteFile(d+"/cluster.yaml", []byte(strings.Join(cluster, "\n---\n")), 0o644)
		os.WriteFile(d+"/write.yaml", []byte(write), 0o644)
		spec := "compareAuditAnnotations: true\n"
		if user != "" {
			spec += "user: " + user + "\n"
		}
		os.WriteFile(d+"/case.yaml", []byte(spec), 0o644)
	}
}
