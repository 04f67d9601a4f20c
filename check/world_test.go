package check

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"helm.sh/helm/v4/pkg/chart/v2/loader"
	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	helmrepo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/world"
	"github.com/truce-dev/truce/simulate"
)

// checkWorlds reads paths through their entry points and checks every
// world, fixes verified as truce check does.
func checkWorlds(t *testing.T, paths []string, opts world.Options, cluster []string) []*Outcome {
	t.Helper()
	ctx := context.Background()
	cl, err := manifest.LoadPaths(ctx, cluster, manifest.DefaultOptions())
	if err != nil && len(cluster) > 0 {
		t.Fatal(err)
	}
	worlds, err := world.Load(ctx, paths, opts)
	if err != nil {
		t.Fatal(err)
	}
	var out []*Outcome
	for i, w := range worlds {
		src := Sources{Repository: paths, Cluster: cluster}
		got, err := Run(ctx, Request{Input: WorldInput(w, cl), Sources: src, Verify: true, Load: WorldLoader(testWorkspace(t), paths, i, opts, src, cl)})
		if err != nil {
			t.Fatalf("checking %s: %v", w.Name, err)
		}
		out = append(out, got)
	}
	return out
}

// verdicts are "world: unit" → object → verdict.
func verdicts(outs []*Outcome) map[string]map[string]simulate.Verdict {
	out := map[string]map[string]simulate.Verdict{}
	for _, o := range outs {
		for _, run := range o.Report.Runs {
			m := out[run.UnitLabel()]
			if m == nil {
				m = map[string]simulate.Verdict{}
				out[run.UnitLabel()] = m
			}
			for _, obj := range run.Objects {
				m[obj.Object] = obj.Verdict
			}
		}
	}
	return out
}

func offlineOptions(t *testing.T, root string, urls ...string) world.Options {
	return world.Options{Render: render.Options{Offline: true, CacheDir: t.TempDir()}, Root: root, RepoURLs: urls}
}

// Argo CD's example repository, checked from its app of apps as a user
// would: every example Application judged; the guestbooks (plain,
// kustomize, Helm, Jsonnet) and sock-shop settle; what needs the network
// or a plugin is Unpredictable, naming it; nothing is Rejected.
func TestArgoCDExampleAppsSettle(t *testing.T) {
	root := filepath.Join("..", "render", "world", "testdata", "argocd-example-apps")
	got := verdicts(checkWorlds(t, []string{filepath.Join(root, "apps")},
		offlineOptions(t, root, "https://github.com/argoproj/argocd-example-apps"), nil))
	prefix := filepath.Join(root, "apps") + ": example."
	for _, app := range []string{"guestbook", "helm-guestbook", "kustomize-guestbook", "jsonnet-guestbook", "jsonnet-guestbook-tla", "sock-shop", "helm-hooks", "pre-post-sync", "sync-waves"} {
		objs, ok := got[prefix+app]
		if !ok || len(objs) == 0 {
			t.Errorf("%s: not judged (runs: %v)", app, keys(got))
			continue
		}
		for obj, v := range objs {
			if v != simulate.Synced {
				t.Errorf("%s: %s is %s, want Synced", app, obj, v)
			}
		}
	}
	for _, app := range []string{"helm-dependency", "plugin-kasane", "plugin-nix", "plugin-kustomized-helm"} {
		for obj, v := range got[prefix+app] {
			if v != simulate.Unpredictable {
				t.Errorf("%s: %s is %s, want Unpredictable", app, obj, v)
			}
		}
	}
	for unit, objs := range got {
		for obj, v := range objs {
			if v == simulate.Rejected {
				t.Errorf("%s: %s Rejected", unit, obj)
			}
		}
	}
}

// Flux's example repository offline: two clusters, each a world; the
// charts need the network, so their HelmReleases are Unpredictable, as
// are the custom resources whose CRDs those charts install; nothing is
// Rejected for want of Flux's own CRDs.
func TestFluxExampleOffline(t *testing.T) {
	root := filepath.Join("..", "render", "world", "testdata", "flux2-kustomize-helm-example")
	got := verdicts(checkWorlds(t, []string{root}, offlineOptions(t, root), nil))
	for _, cluster := range []string{"clusters/production", "clusters/staging"} {
		for _, unit := range []string{"flux-system", "infra-controllers", "apps"} {
			objs, ok := got[cluster+": "+unit]
			if !ok {
				t.Errorf("%s: %s not judged (runs: %v)", cluster, unit, keys(got))
			}
			for obj, v := range objs {
				if v != simulate.Synced {
					t.Errorf("%s: %s: %s is %s, want Synced", cluster, unit, obj, v)
				}
			}
		}
		for _, hr := range []string{"podinfo", "cert-manager", "envoy-gateway"} {
			objs := got[cluster+": "+simulate.HelmReleaseUnit(hr)]
			if len(objs) != 1 {
				t.Errorf("%s: HelmRelease %s: %v, want one Unpredictable line", cluster, hr, objs)
			}
			for obj, v := range objs {
				if v != simulate.Unpredictable {
					t.Errorf("%s: %s is %s, want Unpredictable", cluster, obj, v)
				}
			}
		}
	}
	for unit, objs := range got {
		for obj, v := range objs {
			if v == simulate.Rejected {
				t.Errorf("%s: %s Rejected", unit, obj)
			}
		}
	}
}

// The same repository with podinfo's chart served on loopback: the
// HelmRelease is rendered with the cluster's values and judged.
func TestFluxExampleChartServedOnLoopback(t *testing.T) {
	src := filepath.Join("..", "render", "world", "testdata", "flux2-kustomize-helm-example")
	root := t.TempDir()
	if err := copyTree(src, root); err != nil {
		t.Fatal(err)
	}
	srv := serveChart(t, filepath.Join("testdata", "helm-mirror", "charts", "podinfo"))
	repoFile := filepath.Join(root, "apps", "base", "podinfo", "repository.yaml")
	data, err := os.ReadFile(repoFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(repoFile, []byte(strings.ReplaceAll(string(data), "https://stefanprodan.github.io/podinfo", srv.URL)), 0o644); err != nil {
		t.Fatal(err)
	}
	opts := world.Options{Render: render.Options{CacheDir: t.TempDir()}, Root: root}
	got := verdicts(checkWorlds(t, []string{filepath.Join(root, "clusters", "staging")}, opts, nil))
	objs := got["clusters/staging: "+simulate.HelmReleaseUnit("podinfo")]
	if objs["Deployment.apps/podinfo/podinfo"] != simulate.Synced {
		t.Errorf("podinfo's Deployment: %v, want Synced (all: %v)", objs["Deployment.apps/podinfo/podinfo"], objs)
	}
	if objs["Deployment.apps/podinfo/podinfo-redis"] != simulate.Synced {
		t.Errorf("the redis the staging values enable: %v, want Synced (all: %v)", objs["Deployment.apps/podinfo/podinfo-redis"], objs)
	}
}

// A public chart under an image-mirroring MutatingAdmissionPolicy: under
// Argo CD's legacy diff the rendered Deployment loops, and the fix edits
// the file whose value lands in the field: the chart's own values.yaml, a
// values file of the repository (directly or through a $values source),
// or a kustomize images entry; each verified Synced by rendering and
// simulating again.
func TestHelmValuesFix(t *testing.T) {
	cases := []struct {
		name, apps, object string
		// file is written by the fix and holds want; untouched is not
		// written.
		file, want, untouched string
	}{
		{"chart values.yaml", "apps", "Deployment.apps/podinfo/podinfo",
			"charts/podinfo/values.yaml", "  repository: registry.internal/ghcr.io/stefanprodan/podinfo\n", "apps/podinfo.yaml"},
		{"values file", "apps-valuefiles", "Deployment.apps/podinfo/podinfo",
			"envs/prod/podinfo-values.yaml", "  repository: registry.internal/ghcr.io/example/podinfo # built by CI\n", "charts/podinfo/values.yaml"},
		{"$values file", "apps-ref", "Deployment.apps/podinfo/podinfo",
			"envs/prod/podinfo-values.yaml", "  repository: registry.internal/ghcr.io/example/podinfo # built by CI\n", "apps-ref/podinfo.yaml"},
		{"kustomize images", "apps-kustomize", "Deployment.apps/web/web",
			"kustomize/overlay/kustomization.yaml", "    newName: \"registry.internal/nginx\"\n", "kustomize/base/deployment.yaml"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			if err := copyTree(filepath.Join("testdata", "helm-mirror"), root); err != nil {
				t.Fatal(err)
			}
			opts := offlineOptions(t, root, "https://git.example.com/platform.git")
			cluster := []string{filepath.Join(root, "cluster")}
			apps := []string{filepath.Join(root, tc.apps)}
			outs := checkWorlds(t, apps, opts, cluster)
			var pf *ProblemFixes
			for _, p := range outs[0].Problems {
				if p.Ref.String() == tc.object {
					pf = p
				}
			}
			if pf == nil || pf.Verdict != simulate.Loop {
				t.Fatalf("%s: %+v, want a Loop", tc.object, pf)
			}
			if pf.Chosen == nil || pf.Chosen.Kind != fix.KindGitValue {
				t.Fatalf("chosen fix %+v, want %s (notes %v)", pf.Chosen, fix.KindGitValue, pf.Notes)
			}
			file := filepath.Join(root, filepath.FromSlash(tc.file))
			if got := string(pf.Chosen.Content(file)); !strings.Contains(got, tc.want) {
				t.Errorf("the fix writes %v; %s:\n%s\nwant %q", pf.Chosen.Paths(), tc.file, got, tc.want)
			}
			if slices.Contains(pf.Chosen.Paths(), filepath.Join(root, filepath.FromSlash(tc.untouched))) {
				t.Errorf("the fix writes %s: %v", tc.untouched, pf.Chosen.Paths())
			}
			ctx := context.Background()
			w, err := world.Load(ctx, apps, opts)
			if err != nil {
				t.Fatal(err)
			}
			cl, _ := manifest.LoadPaths(ctx, cluster, manifest.DefaultOptions())
			src := Sources{Repository: apps, Cluster: cluster}
			applied, err := Fix(ctx, Request{Input: WorldInput(w[0], cl), Sources: src, Load: WorldLoader(testWorkspace(t), apps, 0, opts, src, cl)}, FixOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if applied.After == nil || applied.After.Report.Failed() {
				t.Errorf("after the fix: %+v", applied.After)
			}
		})
	}
}

// The chart's HelmRelease is Synced under the mirror: Flux's server-side
// dry run sees the policy's change.
func TestHelmMirrorFluxSettles(t *testing.T) {
	root := t.TempDir()
	if err := copyTree(filepath.Join("testdata", "helm-mirror"), root); err != nil {
		t.Fatal(err)
	}
	opts := offlineOptions(t, root, "https://git.example.com/platform.git")
	cluster := []string{filepath.Join(root, "cluster")}
	for unit, objs := range verdicts(checkWorlds(t, []string{filepath.Join(root, "clusters")}, opts, cluster)) {
		for obj, v := range objs {
			if v != simulate.Synced {
				t.Errorf("Flux %s: %s is %s, want Synced", unit, obj, v)
			}
		}
	}
}

// serveChart serves a chart directory as an HTTP chart repository on
// loopback, packaged and indexed with Helm's own code.
func serveChart(t *testing.T, chartDir string) *httptest.Server {
	t.Helper()
	dir := t.TempDir()
	ch, err := loader.LoadDir(chartDir)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := chartutil.Save(ch, dir); err != nil {
		t.Fatal(err)
	}
	idx, err := helmrepo.IndexDirectory(dir, "")
	if err != nil {
		t.Fatal(err)
	}
	if err := idx.WriteFile(filepath.Join(dir, "index.yaml"), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.FileServer(http.Dir(dir)))
	t.Cleanup(srv.Close)
	return srv
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// The units of one cluster directory are applied to one cluster: two
// Kustomizations that apply the same ConfigMap with different data fight
// over it every interval, each naming the other; their order follows
// dependsOn.
func TestUnitsOfAClusterShareIt(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"clusters/dev/flux-system/gotk-sync.yaml": "# placeholder, as flux bootstrap leaves it before the first run\n",
		"clusters/dev/apps.yaml": `apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: second, namespace: flux-system}
spec:
  interval: 10m
  path: ./apps/b
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
  dependsOn: [{name: first}]
---
apiVersion: kustomize.toolkit.fluxcd.io/v1
kind: Kustomization
metadata: {name: first, namespace: flux-system}
spec:
  interval: 10m
  path: ./apps/a
  prune: true
  sourceRef: {kind: GitRepository, name: flux-system}
`,
		"apps/a/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {mode: a}\n",
		"apps/b/settings.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings, namespace: default}\ndata: {mode: b}\n",
		"apps/b/own.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: own, namespace: default}\ndata: {k: v}\n",
	})
	outs := checkWorlds(t, []string{root}, offlineOptions(t, root), nil)
	var order []string
	for _, run := range outs[0].Report.Runs {
		order = append(order, run.Unit)
	}
	if strings.Join(order, ",") != "flux-system,first,second" {
		t.Errorf("units in order %v, want flux-system, first, second (dependsOn)", order)
	}
	got := verdicts(outs)
	for _, unit := range []string{"first", "second"} {
		if v := got["clusters/dev: "+unit]["ConfigMap/default/settings"]; v != simulate.Loop {
			t.Errorf("%s: settings %s, want Loop (the other Kustomization applies it too); all %v", unit, v, got)
		}
	}
	if v := got["clusters/dev: second"]["ConfigMap/default/own"]; v != simulate.Synced {
		t.Errorf("second: own %s, want Synced", v)
	}
	var shared []string
	for _, f := range outs[0].Report.Findings {
		if strings.Contains(f.Message, "applied by") {
			shared = append(shared, f.Source+": "+f.Message)
		}
	}
	if len(shared) != 1 || !strings.Contains(shared[0], "ConfigMap/default/settings is applied by Kustomization first and Kustomization second") {
		t.Errorf("findings on shared objects %q, want one naming both Kustomizations", shared)
	}
	for _, run := range outs[0].Report.Runs {
		for _, obj := range run.Objects {
			if obj.Loop != nil && !strings.Contains(obj.Loop.Other, "Kustomization") {
				t.Errorf("%s: %s loops with %q, want the other Kustomization named", run.Unit, obj.Object, obj.Loop.Other)
			}
		}
	}
}

func writeFiles(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// Applications with different destinations are different clusters: the
// same object sent to both is no fight, and each cluster's units are
// simulated on their own.
func TestDestinationsAreSeparateClusters(t *testing.T) {
	root := t.TempDir()
	app := func(name, server, path string) string {
		return `apiVersion: argoproj.io/v1alpha1
kind: Application
metadata: {name: ` + name + `, namespace: argocd}
spec:
  project: default
  source: {repoURL: https://example.com/team/config.git, path: ` + path + `, targetRevision: HEAD}
  destination: {server: "` + server + `", namespace: default}
  syncPolicy: {automated: {selfHeal: true, prune: true}}
`
	}
	writeFiles(t, root, map[string]string{
		"apps/staging.yaml":      app("staging", "https://staging.example.com", "envs/staging"),
		"apps/production.yaml":   app("production", "https://production.example.com", "envs/production"),
		"apps/local.yaml":        app("local", "https://kubernetes.default.svc", "envs/local"),
		"envs/staging/s.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {env: staging}\n",
		"envs/production/s.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {env: production}\n",
		"envs/local/s.yaml":      "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: other}\ndata: {env: local}\n",
	})
	outs := checkWorlds(t, []string{filepath.Join(root, "apps")}, offlineOptions(t, root, "https://example.com/team/config.git"), nil)
	got := verdicts(outs)
	for _, unit := range []string{"staging", "production", "local"} {
		objs := got[filepath.Join(root, "apps")+": "+unit]
		if len(objs) != 1 {
			t.Fatalf("%s: objects %v; all %v", unit, objs, got)
		}
		for obj, v := range objs {
			if v != simulate.Synced {
				t.Errorf("%s: %s %s, want Synced", unit, obj, v)
			}
		}
	}
	for _, f := range outs[0].Report.Findings {
		if strings.Contains(f.Message, "applied by") {
			t.Errorf("finding %q: the Applications go to different clusters", f.Message)
		}
	}
}

// A HelmRelease whose drift detection corrects what an autoscaler
// changes loops; the narrow fix is a driftDetection.ignore rule, verified.
func TestHelmReleaseDriftIgnoreFix(t *testing.T) {
	root := t.TempDir()
	writeFiles(t, root, map[string]string{
		"clusters/dev/flux-system/gotk-sync.yaml": "# placeholder\n",
		"clusters/dev/web.yaml": `apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {name: web, namespace: flux-system}
spec:
  interval: 10m
  targetNamespace: default
  chart:
    spec:
      chart: ./charts/web
      sourceRef: {kind: GitRepository, name: flux-system}
  driftDetection:
    mode: enabled
`,
		"charts/web/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"charts/web/values.yaml": "replicas: 1\n",
		"charts/web/templates/deployment.yaml": `apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: {{ .Values.replicas }}
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers: [{name: web, image: "nginx:1.27"}]
`,
		"charts/web/templates/hpa.yaml": `apiVersion: autoscaling/v2
kind: HorizontalPodAutoscaler
metadata: {name: web}
spec:
  scaleTargetRef: {apiVersion: apps/v1, kind: Deployment, name: web}
  minReplicas: 3
  maxReplicas: 5
`,
	})
	outs := checkWorlds(t, []string{root}, offlineOptions(t, root), nil)
	var pf *ProblemFixes
	for _, p := range outs[0].Problems {
		if p.Unit == simulate.HelmReleaseUnit("web") && p.Ref.Kind == "Deployment" {
			pf = p
		}
	}
	if pf == nil || pf.Verdict != simulate.Loop {
		t.Fatalf("no Loop for the HelmRelease's Deployment; verdicts %v", verdicts(outs))
	}
	for i, c := range pf.Candidates {
		if c.Kind != fix.KindIgnoreRule {
			continue
		}
		if pf.Verdicts[i] != simulate.Synced {
			t.Errorf("ignore rule verified %q, want Synced; notes %v", pf.Verdicts[i], pf.Notes)
		}
		for _, p := range c.Paths() {
			if !strings.Contains(c.Diff(p), "driftDetection") && !strings.Contains(string(c.Content(p)), "ignore:") {
				t.Errorf("ignore rule edits %s:\n%s", p, c.Diff(p))
			}
		}
		if !strings.Contains(string(c.Content(filepath.Join(root, "clusters", "dev", "web.yaml"))), "/spec/replicas") {
			t.Errorf("the HelmRelease does not ignore /spec/replicas:\n%s", c.Content(filepath.Join(root, "clusters", "dev", "web.yaml")))
		}
		return
	}
	t.Fatalf("no ignore rule among the fixes; notes %v", pf.Notes)
}

func testWorkspace(t *testing.T) *Workspace {
	ws := NewWorkspace()
	t.Cleanup(func() {
		if err := ws.Close(); err != nil {
			t.Error(err)
		}
	})
	return ws
}
