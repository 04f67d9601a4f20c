//go:build e2e

package simulate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/internal/cli"
	"github.com/truce-dev/truce/report"
	sim "github.com/truce-dev/truce/simulate"
)

// truce check --kubeconfig reads the admission configuration and
// namespaces from the real server, simulates offline, finds the loop of the
// server's own MutatingAdmissionPolicy, and writes nothing to the server.
func TestCheckWithKubeconfig(t *testing.T) {
	t.Parallel()
	s := server(t)
	ctx := t.Context()
	ns := fmt.Sprintf("sim%d-kubeconfig", runs.Add(1))
	if err := s.Apply(ctx, parseAll(t, namespaceDoc(ns, ns)+"---\n"+mirrorDocs(ns))...); err != nil {
		t.Fatal(err)
	}
	lc, err := live.New(s.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	waitForMirror(ctx, t, lc, nil, ns)

	dir := t.TempDir()
	app := `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: shop, namespace: argocd}
spec:
  project: default
  destination: {server: https://kubernetes.default.svc, namespace: ` + ns + `}
  syncPolicy:
    automated: {selfHeal: true}
`
	for name, data := range map[string]string{"application.yaml": app, "web.yaml": deployment(ns, "web", "nginx:1.27")} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	if err := s.WriteKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	var out, errOut bytes.Buffer
	code := cli.Execute(ctx, []string{"check", dir, "--kubeconfig", kubeconfig, "--format", "json",
		"--disable-admission-plugins", strings.Join(apiserver.DefaultDisabledAdmissionPlugins, ",")},
		strings.NewReader(""), &out, &errOut)
	if code != 1 {
		t.Fatalf("exit %d, want 1 (a loop): %s%s", code, errOut.String(), out.String())
	}
	var r report.Report
	if err := json.Unmarshal(out.Bytes(), &r); err != nil {
		t.Fatalf("%v: %s", err, out.String())
	}
	if len(r.Runs) != 1 || len(r.Runs[0].Objects) != 1 {
		t.Fatalf("report %+v", r)
	}
	o := r.Runs[0].Objects[0]
	if o.Verdict != sim.Loop || o.Loop == nil || o.Loop.Other != fmt.Sprintf("MutatingAdmissionPolicy/mirror-%[1]s (binding mirror-%[1]s)", ns) {
		t.Fatalf("%s: %s %+v (%s)", o.Object, o.Verdict, o.Loop, o.Reason)
	}
	if o.Fix == nil || o.Fix.Kind != "git-value" || !o.Fix.Verified {
		t.Errorf("fix %+v", o.Fix)
	}
	// Read only: the Deployment the simulation created is not on the server.
	web := parse(t, deployment(ns, "web", "nginx:1.27"))
	if _, err := lc.Get(ctx, cluster.RefOf(web)); !apierrors.IsNotFound(err) {
		t.Errorf("the check wrote to the cluster: Get web = %v", err)
	}
}
