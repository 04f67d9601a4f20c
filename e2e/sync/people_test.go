//go:build e2e

package sync

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/reconcile"
	"github.com/truce-dev/truce/reconcile/gitsync"
)

// personEdit is one way a person changes a Deployment's replicas: a kubectl
// command line and, when kubectl is not installed, the same write by the
// client with the field manager kubectl writes as.
type personEdit struct {
	name  string
	args  []string // after "kubectl ... -n NS"
	stdin string
	env   []string
	// manager and operation are what the Deployment's managedFields name;
	// a manager ending in "*" is a prefix (kubectl's user agent).
	manager, operation string
	client             func(e *env, replicas int64) error
}

// replicasManifest is the Deployment web with replicas n, whole (as a
// person's file for kubectl apply) or only the field (server-side apply).
func replicasManifest(n string, whole bool) string {
	if whole {
		return strings.Replace(webWithImage(webImage), "replicas: 3", "replicas: "+n, 1)
	}
	return "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web, namespace: NS}\nspec: {replicas: " + n + "}\n"
}

var personEdits = []personEdit{
	{name: "kubectl scale", args: []string{"scale", "deployment/web", "--replicas=4"}, manager: "kubectl*", operation: "Update scale",
		client: func(e *env, n int64) error {
			deployments := e.srv.Clientset().AppsV1().Deployments(e.ns)
			scale, err := deployments.GetScale(e.ctx, "web", metav1.GetOptions{})
			if err != nil {
				return err
			}
			scale.Spec.Replicas = int32(n)
			_, err = deployments.UpdateScale(e.ctx, "web", scale, metav1.UpdateOptions{FieldManager: "kubectl"})
			return err
		}},
	{name: "kubectl edit", args: []string{"edit", "deployment/web"}, manager: "kubectl-edit", operation: "Update",
		// kubectl edit runs the editor through sh -c with the file appended.
		env: []string{`KUBE_EDITOR=sed -i -E '/^spec:/,/^status:/ s/^  replicas: [0-9]+$/  replicas: 5/'`},
		client: func(e *env, n int64) error {
			web := e.get(deploymentGVK, e.ns, "web")
			if err := unstructured.SetNestedField(web.Object, n, "spec", "replicas"); err != nil {
				return err
			}
			_, err := e.live.Update(e.ctx, web, cluster.WriteOptions{FieldManager: "kubectl-edit"})
			return err
		}},
	{name: "kubectl patch", args: []string{"patch", "deployment/web", "--type=merge", `--patch={"spec":{"replicas":6}}`}, manager: "kubectl-patch", operation: "Update",
		client: func(e *env, n int64) error {
			_, err := e.srv.Clientset().AppsV1().Deployments(e.ns).Patch(e.ctx, "web", types.MergePatchType,
				[]byte(`{"spec":{"replicas":`+itoa(n)+`}}`), metav1.PatchOptions{FieldManager: "kubectl-patch"})
			return err
		}},
	{name: "kubectl apply", args: []string{"apply", "-f", "-"}, stdin: replicasManifest("7", true), manager: "kubectl-client-side-apply", operation: "Update",
		client: func(e *env, n int64) error {
			_, err := e.srv.Clientset().AppsV1().Deployments(e.ns).Patch(e.ctx, "web", types.StrategicMergePatchType,
				[]byte(`{"spec":{"replicas":`+itoa(n)+`}}`), metav1.PatchOptions{FieldManager: "kubectl-client-side-apply"})
			return err
		}},
	{name: "kubectl apply --server-side", args: []string{"apply", "--server-side", "--force-conflicts", "-f", "-"}, stdin: replicasManifest("8", false),
		manager: "kubectl*", operation: "Apply",
		client: func(e *env, n int64) error {
			obj := e.decode(replicasManifest(itoa(n), false))[0].Object
			_, err := e.live.Apply(e.ctx, obj, cluster.ApplyOptions{FieldManager: "kubectl", Force: true})
			return err
		}},
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// kubectl runs the kubectl on PATH against the case's server in its
// namespace; ok is false when kubectl is not installed.
func (e *env) kubectl(stdin string, environ []string, args ...string) (out string, ok bool) {
	e.t.Helper()
	bin, err := exec.LookPath("kubectl")
	if err != nil {
		return "", false
	}
	dir := e.t.TempDir()
	kubeconfig := filepath.Join(dir, "kubeconfig")
	must(e.t, e.srv.WriteKubeconfig(kubeconfig))
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"--kubeconfig", kubeconfig, "--cache-dir", filepath.Join(dir, "cache"), "-n", e.ns}, args...)...)
	cmd.Stdin = strings.NewReader(strings.ReplaceAll(stdin, "NS", e.ns))
	cmd.Env = append(os.Environ(), environ...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			e.t.Fatalf("kubectl %s: %v\n%s%s", strings.Join(args, " "), err, stdout.String(), stderr.String())
		}
		e.t.Fatalf("kubectl %s: %v", strings.Join(args, " "), err)
	}
	return stdout.String(), true
}

// TestPeopleAreRevertedNeverContested: a person edits the replicas of a
// Deployment truce applied five times, with five kubectl commands (scale,
// edit, patch, apply, apply --server-side) run against the server, or,
// without kubectl, the same writes with kubectl's field managers. Every
// pass writes Git's value back and none contests the field, although the
// loop breaker's threshold is 3; each edit is an Event "edited outside
// Git" naming the manager and the field, the metric and the GitSync's
// count (kubectl get gitsync's REVERTED column) add up to 5. Then a
// controller (another field manager) changes the same field: its third
// change is contested and names it.
func TestPeopleAreRevertedNeverContested(t *testing.T) {
	t.Parallel()
	e := newEnv(t, "people", true)
	installGitSyncCRD(e, e.ns)
	opts := e.options()
	reg := prometheus.NewRegistry()
	metrics, err := reconcile.NewMetrics(reg)
	must(t, err)
	store, err := gitsync.NewStoreForConfig(e.srv.RESTConfig(), e.ns, "sync",
		gitsync.SpecFor(manifest.GitSource{URL: "https://example.com/fleet.git"}, opts, time.Minute, nil))
	must(t, err)
	recorder := &reconcile.ClusterRecorder{Cluster: e.live, Namespace: e.ns, Component: "truce-sync",
		OnError: func(err error) { t.Errorf("recording an event: %v", err) }}
	src := &reconcile.StaticSource{Revision: "main@sha1:1", Objects: e.decode(webWithImage(webImage))}
	r, err := reconcile.New(e.live, src, store, opts, reconcile.WithRecorder(recorder), reconcile.WithMetrics(metrics))
	must(t, err)
	if res := e.pass(r); !res.Synced() || res.Count(reconcile.Created) != 1 {
		t.Fatalf("first pass: %s", describe(res))
	}
	if opts.Loop.Threshold >= len(personEdits) {
		t.Fatalf("the case needs more edits (%d) than the loop breaker's threshold (%d)", len(personEdits), opts.Loop.Threshold)
	}

	replicas := func() int64 {
		n, _, _ := unstructured.NestedInt64(e.get(deploymentGVK, e.ns, "web").Object, "spec", "replicas")
		return n
	}
	for i, edit := range personEdits {
		want := int64(4 + i)
		if _, ok := e.kubectl(edit.stdin, edit.env, edit.args...); !ok {
			t.Logf("%s: kubectl not installed, the client writes as %s", edit.name, edit.manager)
			must(t, edit.client(e, want))
		}
		web := e.get(deploymentGVK, e.ns, "web")
		if n := replicas(); n != want {
			t.Fatalf("%s: replicas %d, want %d", edit.name, n, want)
		}
		res := e.pass(r)
		o := object(res, "Deployment", "web")
		if o == nil || o.Action != reconcile.Configured || res.Writes != 1 || len(res.Contested) != 0 || len(res.Errors) != 0 {
			t.Fatalf("%s (edit %d): want web written back and nothing contested: %s\nmanagedFields before the pass:\n  %s",
				edit.name, i+1, describe(res), managers(web))
		}
		if len(o.Reverted) != 1 {
			t.Fatalf("%s: reverted %+v, want /spec/replicas", edit.name, o.Reverted)
		}
		got := o.Reverted[0]
		if got.Pointer != "/spec/replicas" || !managerIs(got.Writer.Manager, edit.manager) || got.Writer.Operation != edit.operation ||
			got.Git != int64(3) || got.Live != want {
			t.Errorf("%s: reverted %+v, want /spec/replicas by %s (%s), Git 3, live %d", edit.name, got, edit.manager, edit.operation, want)
		}
		t.Logf("%s: written back, edited by %s", edit.name, got.Writer)
		if n := replicas(); n != 3 {
			t.Fatalf("%s: replicas %d after the pass, want Git's 3", edit.name, n)
		}
		if web := e.get(deploymentGVK, e.ns, "web"); !owns(web, "/spec/replicas", reconcile.DefaultFieldManager, "Apply") {
			t.Errorf("%s: truce does not own the replicas it wrote back:\n  %s", edit.name, managers(web))
		}
	}

	// The Events, the metric and the GitSync count every edit.
	evs, err := e.srv.Clientset().CoreV1().Events(e.ns).List(e.ctx, metav1.ListOptions{})
	must(t, err)
	var messages []string
	for _, ev := range evs.Items {
		if ev.Reason == reconcile.ReasonEditedOutsideGit && ev.InvolvedObject.Kind == "Deployment" && ev.InvolvedObject.Name == "web" {
			messages = append(messages, ev.Message)
		}
	}
	if len(messages) != len(personEdits) {
		t.Fatalf("%d %s Events on web, want %d: %q", len(messages), reconcile.ReasonEditedOutsideGit, len(personEdits), messages)
	}
	for _, m := range messages {
		if !strings.HasPrefix(m, "/spec/replicas was edited outside Git by field manager kubectl") || !strings.Contains(m, "truce reverted it to Git's value 3") {
			t.Errorf("Event message %q", m)
		}
	}
	if got := counterSum(t, reg, "truce_sync_manual_edits_reverted_total"); got != float64(len(personEdits)) {
		t.Errorf("truce_sync_manual_edits_reverted_total = %v, want %d", got, len(personEdits))
	}
	obj, st := e.gitSyncObject(e.ns, "sync")
	checkReady(t, obj, st, metav1.ConditionTrue, gitsync.ReasonSynced, "Applied revision main@sha1:1")
	if st.ManualEdits.Reverted != len(personEdits) || st.ManualEdits.Last == nil || st.ManualEdits.Last.Field != "/spec/replicas" ||
		!managerIs(st.ManualEdits.Last.Writer.Manager, personEdits[len(personEdits)-1].manager) || st.Counts.Contested != 0 {
		t.Errorf("status: manualEdits %+v, counts %+v", st.ManualEdits, st.Counts)
	}
	e.checkGitSyncColumns(e.ns, "sync", map[string]string{"Name": "sync", "Ready": "True", "Revision": "main@sha1:1", "Applied": "1",
		"Pruned": "0", "Contested": "0", "Reverted": "5", "Status": "Applied revision main@sha1:1: 1 applied, 0 unchanged, 0 pruned"})

	// A controller changing the same field is contested at the threshold,
	// and named.
	for i := 1; i <= opts.Loop.Threshold; i++ {
		web := e.get(deploymentGVK, e.ns, "web")
		must(t, unstructured.SetNestedField(web.Object, int64(10), "spec", "replicas"))
		_, err := e.live.Update(e.ctx, web, cluster.WriteOptions{FieldManager: "replica-bot"})
		must(t, err)
		res := e.pass(r)
		if contested := len(res.Contested) == 1; contested != (i == opts.Loop.Threshold) || len(res.Reverted) != 0 {
			t.Fatalf("replica-bot's change %d: %s", i, describe(res))
		}
	}
	obj, st = e.gitSyncObject(e.ns, "sync")
	checkReady(t, obj, st, metav1.ConditionFalse, gitsync.ReasonContested, "1 field contested")
	if len(st.Contested) != 1 || st.Contested[0].Field != "/spec/replicas" ||
		st.Contested[0].Writer != (gitsync.Writer{Manager: "replica-bot", Operation: "Update"}) || st.Contested[0].Changes != opts.Loop.Threshold {
		t.Fatalf("contested %+v", st.Contested)
	}
	if n := replicas(); n != 10 {
		t.Errorf("replicas %d, want replica-bot's 10 left to it", n)
	}
	if st.ManualEdits.Reverted != len(personEdits) {
		t.Errorf("the controller's changes counted as people's: %+v", st.ManualEdits)
	}
}

// managerIs matches a field manager against want, a name or a prefix
// ending in "*".
func managerIs(manager, want string) bool {
	if prefix, ok := strings.CutSuffix(want, "*"); ok {
		return strings.HasPrefix(manager, prefix)
	}
	return manager == want
}

// counterSum adds up the series of the counter name in reg.
func counterSum(t *testing.T, reg *prometheus.Registry, name string) float64 {
	t.Helper()
	families, err := reg.Gather()
	must(t, err)
	sum := 0.0
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
