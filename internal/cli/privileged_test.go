package cli

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// privilegedChild makes a child process of TestAllowPrivilegedFlag run
// truce with the arguments in this variable (separated by U+001F): Kubernetes
// keeps --allow-privileged process-wide, so each value needs a process.
const privilegedChild = "TRUCE_TEST_PRIVILEGED_ARGS"

const privilegedDaemonSet = `apiVersion: apps/v1
kind: DaemonSet
metadata: {name: cni-node, namespace: kube-system}
spec:
  selector: {matchLabels: {app: cni-node}}
  template:
    metadata: {labels: {app: cni-node}}
    spec:
      hostNetwork: true
      containers:
      - name: agent
        image: registry.example/cni-agent:1.0
        securityContext: {privileged: true}
`

func TestAllowPrivilegedFlag(t *testing.T) {
	if args, ok := os.LookupEnv(privilegedChild); ok {
		var out, errOut bytes.Buffer
		code := Execute(context.Background(), strings.Split(args, "\x1f"), strings.NewReader(""), &out, &errOut)
		fmt.Printf("EXIT %d\n%s%s", code, out.String(), errOut.String())
		return
	}
	path := filepath.Join(t.TempDir(), "cni.yaml")
	if err := os.WriteFile(path, []byte(privilegedDaemonSet), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"the default: as kubeadm, kind and managed clusters", []string{"admit", "-f", path},
			[]string{"EXIT 0", "CREATE DaemonSet kube-system/cni-node: admitted"}},
		{"kube-apiserver's own default", []string{"admit", "-f", path, "--allow-privileged=false"},
			[]string{"EXIT 1", `DENIED (422 Invalid): DaemonSet.apps "cni-node" is invalid: spec.template.spec.containers[0].securityContext.privileged: Forbidden: disallowed by cluster policy`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestAllowPrivilegedFlag$")
			cmd.Env = append(os.Environ(), privilegedChild+"="+strings.Join(tt.args, "\x1f"))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), w) {
					t.Errorf("output does not contain %q:\n%s", w, out)
				}
			}
		})
	}
}
