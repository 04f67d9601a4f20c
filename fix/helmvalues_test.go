package fix

import (
	"context"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/drift"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/flux"
	"github.com/truce-dev/truce/render/helm"
	"github.com/truce-dev/truce/render/world"
	"github.com/truce-dev/truce/simulate"
)

const imagePtr = "/spec/template/spec/containers/0/image"

// mirrored is the problem of an image that admission mirrors: Git says
// git, the cluster stores stored.
func mirrored(tool, git, stored string, src manifest.Source, values *world.ValuesTarget) Problem {
	ref := cluster.Ref{Namespace: "shop", Name: "web"}
	ref.Group, ref.Version, ref.Kind = "apps", "v1", "Deployment"
	o := &simulate.Object{Ref: ref, InGit: true, Verdict: simulate.Loop,
		Loop: &simulate.LoopInfo{Fields: []string{imagePtr}, Other: "MutatingAdmissionPolicy/mirror (binding mirror)", OtherKind: "admission",
			OtherStep: &admission.Step{Kind: admission.PolicyStep, Name: "mirror", Binding: "mirror"}},
		Drift: &drift.Object{Fields: []drift.Field{{Pointer: imagePtr, Desired: git, Live: stored}},
			Desired: map[string]any{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": map[string]any{"name": "web"},
				"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
					"containers": []any{map[string]any{"name": "web", "image": git}}}}}}}}
	return Problem{Tool: tool, Object: o, Source: src, Values: values}
}

func reader(files map[string]string) Reader {
	return func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errNotExist
	}
}

// gitValue is the Git-value fix of p, failing the test when there is none.
func gitValue(t *testing.T, p Problem, read Reader) *Candidate {
	t.Helper()
	cands, skipped := Candidates(p, read)
	for _, c := range cands {
		if c.Kind == KindGitValue {
			return c
		}
	}
	t.Fatalf("no %s fix; skipped %v", KindGitValue, skipped)
	return nil
}

func TestHelmValuesGoWhereTheyAreSet(t *testing.T) {
	const appHead = "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: web}\nspec:\n  source:\n    helm:\n"
	chartValues := "# chart defaults\nimage:\n  repository: nginx # upstream\n  tag: \"1.27\"\n"
	envValues := "image:\n  repository: ghcr.io/acme/nginx # our build\n"
	values := map[string]any{"image": map[string]any{"repository": "nginx", "tag": "1.27"}}
	cases := []struct {
		name  string
		app   string
		files []world.ValuesFile
		// file is the one written, want what it then holds.
		file, want string
	}{
		{"chart values.yaml", appHead + "      valuesObject:\n        replicas: 2\n",
			[]world.ValuesFile{{Path: "chart/values.yaml"}},
			"chart/values.yaml", strings.Replace(chartValues, "nginx # upstream", "registry.internal/nginx # upstream", 1)},
		{"the last values file setting it", appHead + "      valuesObject:\n        replicas: 2\n",
			[]world.ValuesFile{{Path: "chart/values.yaml"}, {Path: "env/values.yaml"}, {Path: "env/other.yaml"}},
			"env/values.yaml", "image:\n  repository: registry.internal/nginx # our build\n"},
		{"inline values win over files", appHead + "      valuesObject:\n        image:\n          repository: nginx\n",
			[]world.ValuesFile{{Path: "chart/values.yaml"}, {Path: "env/values.yaml"}},
			"app.yaml", appHead + "      valuesObject:\n        image:\n          repository: registry.internal/nginx\n"},
		{"a parameter wins over all", appHead + "      parameters:\n        - name: image.repository\n          value: nginx\n      valuesObject:\n        image:\n          repository: nginx\n",
			[]world.ValuesFile{{Path: "chart/values.yaml"}},
			"app.yaml", appHead + "      parameters:\n        - name: image.repository\n          value: registry.internal/nginx\n      valuesObject:\n        image:\n          repository: nginx\n"},
		{"another repository's file: the inline values", appHead + "      valuesObject:\n        replicas: 2\n",
			[]world.ValuesFile{{Path: "chart/values.yaml"}, {Path: "env/values.yaml", NotOwned: "a clone"}},
			"app.yaml", appHead + "      valuesObject:\n        replicas: 2\n        image:\n          repository: registry.internal/nginx\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"app.yaml": tc.app, "chart/values.yaml": chartValues, "env/values.yaml": envValues, "env/other.yaml": "replicas: 3\n"}
			target := &world.ValuesTarget{Source: manifest.Source{File: "app.yaml", Line: 1}, Pointer: "/spec/source/helm/valuesObject",
				Parameters: "/spec/source/helm/parameters", Values: values, Files: tc.files}
			p := mirrored("argocd", "nginx:1.27", "registry.internal/nginx:1.27",
				manifest.Source{File: "chart/templates/web.yaml", Renderer: manifest.RendererHelm, RenderRoot: "chart"}, target)
			c := gitValue(t, p, reader(files))
			if got := c.Paths(); len(got) != 1 || got[0] != tc.file {
				t.Fatalf("writes %v, want %s:\n%s", got, tc.file, c.Description)
			}
			if got := string(c.Files[tc.file]); got != tc.want {
				t.Errorf("%s:\n%s\nwant:\n%s", tc.file, got, tc.want)
			}
		})
	}
}

// A field no value lands in: a HelmRelease gets a post-renderer patch,
// which helm-controller's post-rendering applies; an Application gets a
// note.
func TestPostRendererWhenNoValueLands(t *testing.T) {
	const hr = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: shop}\nspec:\n  chart:\n    spec:\n      chart: web\n      sourceRef: {kind: HelmRepository, name: charts}\n  values:\n    replicas: 2\n"
	src := manifest.Source{File: "chart/templates/web.yaml", Renderer: manifest.RendererHelm, RenderRoot: "chart"}
	values := map[string]any{"replicas": int64(2)}
	target := &world.ValuesTarget{Source: manifest.Source{File: "hr.yaml", Line: 1}, Pointer: "/spec/values", PostRenderers: "/spec/postRenderers", Values: values}
	p := mirrored("flux", "nginx:1.27", "registry.internal/nginx:1.27", src, target)
	c := gitValue(t, p, reader(map[string]string{"hr.yaml": hr}))
	out := c.Files["hr.yaml"]
	if !strings.HasPrefix(string(out), hr) {
		t.Errorf("the HelmRelease changes beyond its post-renderers:\n%s", out)
	}
	var obj map[string]any
	if err := yaml.Unmarshal(out, &obj); err != nil {
		t.Fatal(err)
	}
	parsed, err := flux.ParseHelmRelease(&unstructured.Unstructured{Object: obj})
	if err != nil {
		t.Fatal(err)
	}
	dep := &unstructured.Unstructured{Object: p.Object.Drift.Desired}
	got, err := flux.PostRender([]manifest.Object{{Object: dep}}, parsed)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 {
		t.Fatalf("post-rendered %d objects", len(got))
	}
	if img, _ := valueAt(got[0].Object.Object, imagePtr); img != "registry.internal/nginx:1.27" {
		t.Errorf("post-rendered image %v:\n%s", img, out)
	}

	argo := &world.ValuesTarget{Source: manifest.Source{File: "app.yaml", Line: 1}, Pointer: "/spec/source/helm/valuesObject", Values: values}
	_, skipped := Candidates(mirrored("argocd", "nginx:1.27", "registry.internal/nginx:1.27", src, argo),
		reader(map[string]string{"app.yaml": "apiVersion: argoproj.io/v1alpha1\nkind: Application\nmetadata: {name: web}\nspec: {}\n"}))
	if !strings.Contains(strings.Join(skipped, "\n"), "kustomize over Helm") {
		t.Errorf("an Application's note should name kustomize over Helm: %v", skipped)
	}
}

// The registry defaults in the template: no value's text is in the
// field, and rendering with probes finds the one that lands.
func TestProbeFindsTheValue(t *testing.T) {
	ctx := context.Background()
	ch, err := helm.Load(ctx, "testdata/probe", helm.LoadOptions{RepositoryRoot: "testdata"})
	if err != nil {
		t.Fatal(err)
	}
	rel := helm.Release{Name: "web", Namespace: "shop"}
	opts := render.Options{Manifest: manifest.DefaultOptions()}.WithDefaults()
	effective, err := ch.EffectiveValues(nil)
	if err != nil {
		t.Fatal(err)
	}
	renders := 0
	probe := func(values map[string]any) ([]manifest.Object, error) {
		renders++
		out, err := helm.Render(ctx, ch, rel, values, opts)
		if err != nil {
			return nil, err
		}
		return out.Objects, nil
	}
	objs, err := probe(effective)
	if err != nil || len(objs) != 1 {
		t.Fatalf("rendering: %v, %d objects", err, len(objs))
	}
	const hr = "apiVersion: helm.toolkit.fluxcd.io/v2\nkind: HelmRelease\nmetadata: {name: web, namespace: shop}\nspec:\n  values:\n    name: web\n"
	for _, withProbe := range []bool{false, true} {
		target := &world.ValuesTarget{Source: manifest.Source{File: "hr.yaml", Line: 1}, Pointer: "/spec/values", Values: effective}
		if withProbe {
			target.Probe = probe
		}
		p := mirrored("flux", "docker.io/nginx:1.27", "registry.internal/docker.io/nginx:1.27", objs[0].Source, target)
		cands, skipped := Candidates(p, reader(map[string]string{"hr.yaml": hr}))
		var c *Candidate
		for _, cand := range cands {
			if cand.Kind == KindGitValue {
				c = cand
			}
		}
		if !withProbe {
			if c != nil {
				t.Errorf("without probing, string matching finds nothing, yet: %s", c.Description)
			}
			continue
		}
		if c == nil {
			t.Fatalf("no fix: %v", skipped)
		}
		want := hr + "    registry: registry.internal/docker.io\n"
		if got := string(c.Files["hr.yaml"]); got != want {
			t.Errorf("got:\n%s\nwant:\n%s", got, want)
		}
	}
	if renders > maxProbeRenders+1 {
		t.Errorf("%d renders, more than the bound", renders)
	}
}

// A kustomization's own patch sets the image: it is edited, by merge key
// for a strategic merge patch, by path for a JSON 6902 one, inline or in
// its file; the base stays.
func TestKustomizeExistingPatch(t *testing.T) {
	const base = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\nspec:\n  template:\n    spec:\n      containers:\n        - name: web\n          image: nginx:1.25\n"
	const smp = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: web\nspec:\n  template:\n    spec:\n      containers:\n        - name: sidecar\n          image: envoy:1\n        - name: web\n          image: nginx:1.27 # pinned\n"
	cases := []struct {
		name          string
		kustomization string
		file, want    string
	}{
		{"patch file", "resources: [../base]\npatches:\n  - path: web.yaml\n",
			"overlay/web.yaml", strings.Replace(smp, "nginx:1.27 # pinned", "registry.internal/nginx:1.27 # pinned", 1)},
		{"patchesStrategicMerge file", "resources: [../base]\npatchesStrategicMerge:\n  - web.yaml\n",
			"overlay/web.yaml", strings.Replace(smp, "nginx:1.27 # pinned", "registry.internal/nginx:1.27 # pinned", 1)},
		{"inline JSON 6902", "resources: [../base]\npatches:\n  - target: {kind: Deployment, name: web}\n    patch: |\n      - op: replace\n        path: /spec/template/spec/containers/0/image\n        value: nginx:1.27\n",
			"overlay/kustomization.yaml", "resources: [../base]\npatches:\n  - target: {kind: Deployment, name: web}\n    patch: |\n      - op: replace\n        path: /spec/template/spec/containers/0/image\n        value: registry.internal/nginx:1.27\n"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			files := map[string]string{"overlay/kustomization.yaml": tc.kustomization, "overlay/web.yaml": smp, "base/web.yaml": base}
			p := mirrored("argocd", "nginx:1.27", "registry.internal/nginx:1.27",
				manifest.Source{File: "base/web.yaml", Line: 1, Kustomization: "overlay/kustomization.yaml"}, nil)
			c := gitValue(t, p, reader(files))
			if got := c.Paths(); len(got) != 1 || got[0] != tc.file {
				t.Fatalf("writes %v, want %s", got, tc.file)
			}
			if got := string(c.Files[tc.file]); got != tc.want {
				t.Errorf("%s:\n%s\nwant:\n%s", tc.file, got, tc.want)
			}
		})
	}
}

func TestKustomizeImagesEntry(t *testing.T) {
	const k = "resources: [../base]\nimages:\n  - name: nginx\n    newName: ghcr.io/acme/nginx\n    newTag: \"1.27\"\n"
	p := mirrored("flux", "ghcr.io/acme/nginx:1.27", "registry.internal/ghcr.io/acme/nginx:1.27",
		manifest.Source{File: "base/web.yaml", Line: 1, Kustomization: "overlay/kustomization.yaml"}, nil)
	c := gitValue(t, p, reader(map[string]string{"overlay/kustomization.yaml": k}))
	want := strings.Replace(k, "newName: ghcr.io/acme/nginx", "newName: registry.internal/ghcr.io/acme/nginx", 1)
	if got := string(c.Files["overlay/kustomization.yaml"]); got != want || len(c.Files) != 1 {
		t.Errorf("writes %v:\n%s\nwant:\n%s", c.Paths(), got, want)
	}
}
