package admission_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
)

// capabilitiesChild names the steps a child process of
// TestAllowPrivileged takes: "true", "false" or "unset" set (or leave)
// --allow-privileged before a privileged Pod is admitted, then any further
// comma-separated value is set again.
const capabilitiesChild = "TRUCE_TEST_ALLOW_PRIVILEGED"

// TestAllowPrivileged runs each case in a process of its own: Kubernetes
// keeps --allow-privileged process-wide, set once.
func TestAllowPrivileged(t *testing.T) {
	if steps, ok := os.LookupEnv(capabilitiesChild); ok {
		allowPrivilegedChild(t, strings.Split(steps, ","))
		return
	}
	tests := []struct {
		steps string
		want  []string
	}{
		// kube-apiserver's default: validation refuses the container.
		{"unset", []string{"code 422: Pod \"x\" is invalid: spec.containers[0].securityContext.privileged: Forbidden: disallowed by cluster policy"}},
		{"false", []string{"code 422: Pod \"x\" is invalid: spec.containers[0].securityContext.privileged: Forbidden: disallowed by cluster policy"}},
		// What kubeadm, kind and managed clusters run.
		{"true", []string{"allowed"}},
		{"true,true", []string{"allowed", "set true: ok"}},
		{"true,false", []string{"allowed", "set false: --allow-privileged=false: this process already admits with --allow-privileged=true"}},
		// A chain that admitted with the default fixed the setting.
		{"unset,true", []string{"code 422", "set true: --allow-privileged=true: this process already admits with --allow-privileged=false"}},
	}
	for _, tt := range tests {
		t.Run(tt.steps, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run", "^TestAllowPrivileged$", "-test.v")
			cmd.Env = append(os.Environ(), capabilitiesChild+"="+tt.steps)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(out), "RESULT "+w) {
					t.Errorf("child output does not contain %q:\n%s", "RESULT "+w, out)
				}
			}
		})
	}
}

func allowPrivilegedChild(t *testing.T, steps []string) {
	say := func(format string, args ...any) { fmt.Printf("RESULT "+format+"\n", args...) }
	if steps[0] != "unset" {
		if err := admission.SetAllowPrivileged(steps[0] == "true"); err != nil {
			t.Fatal(err)
		}
	}
	c := newChain(t, admission.Options{}, builtinsCluster)
	res := admit(t, c, admission.Request{Source: "test:1", Object: object(t, privilegedPod("x", "team"))})
	if res.Allowed {
		say("allowed")
	} else {
		say("code %d: %s", res.Code, res.Message)
	}
	for _, s := range steps[1:] {
		if err := admission.SetAllowPrivileged(s == "true"); err != nil {
			say("set %s: %v", s, err)
		} else {
			say("set %s: ok", s)
		}
	}
}
