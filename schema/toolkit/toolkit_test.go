package toolkit

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"testing"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensionsapiserver "k8s.io/apiextensions-apiserver/pkg/apiserver"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/registry/customresourcedefinition"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// mustCRDs decodes the embedded CRDs into typed v1 objects, rejecting
// fields the v1 type does not have.
func mustCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	objs, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if len(objs) == 0 {
		t.Fatal("no CRDs embedded")
	}
	out := make([]*apiextensionsv1.CustomResourceDefinition, 0, len(objs))
	for _, o := range objs {
		if o.GetAPIVersion() != "apiextensions.k8s.io/v1" || o.GetKind() != "CustomResourceDefinition" {
			t.Fatalf("%s: is %s %s, want apiextensions.k8s.io/v1 CustomResourceDefinition", o.GetName(), o.GetAPIVersion(), o.GetKind())
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(o.Object, crd, true); err != nil {
			t.Fatalf("%s: %v", o.GetName(), err)
		}
		out = append(out, crd)
	}
	return out
}

// serverValidate creates crd the way the apiextensions-apiserver does
// (defaulting, conversion to the internal version, PrepareForCreate,
// Validate), which checks the structural schema, pruned defaults and CEL
// rules, and builds each version's structural schema as truce's admission
// does. It returns the server's warnings.
func serverValidate(crd *apiextensionsv1.CustomResourceDefinition) ([]string, error) {
	ctx := context.Background()
	strategy := customresourcedefinition.NewStrategy(apiextensionsapiserver.Scheme)
	crd = crd.DeepCopy()
	apiextensionsapiserver.Scheme.Default(crd)
	internal := &apiextensions.CustomResourceDefinition{}
	if err := apiextensionsapiserver.Scheme.Convert(crd, internal, nil); err != nil {
		return nil, err
	}
	strategy.PrepareForCreate(ctx, internal)
	if errs := strategy.Validate(ctx, internal); len(errs) > 0 {
		return nil, errs.ToAggregate()
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return nil, fmt.Errorf("version %s has no schema", v.Name)
		}
		in := &apiextensions.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, in, nil); err != nil {
			return nil, err
		}
		if _, err := structuralschema.NewStructural(in.OpenAPIV3Schema); err != nil {
			return nil, fmt.Errorf("version %s: %w", v.Name, err)
		}
	}
	return strategy.WarningsOnCreate(ctx, internal), nil
}

func TestCRDsPassServerValidation(t *testing.T) {
	for _, crd := range mustCRDs(t) {
		t.Run(crd.Name, func(t *testing.T) {
			warnings, err := serverValidate(crd)
			if err != nil {
				t.Fatalf("rejected by the apiextensions-apiserver: %v", err)
			}
			for _, w := range warnings {
				t.Logf("warning: %s", w)
			}
		})
	}
}

// TestServerValidateRejects shows serverValidate fails on what the server
// rejects, so that TestCRDsPassServerValidation can fail.
func TestServerValidateRejects(t *testing.T) {
	var base *apiextensionsv1.CustomResourceDefinition
	for _, crd := range mustCRDs(t) {
		if crd.Name == "kustomizations.kustomize.toolkit.fluxcd.io" {
			base = crd
		}
	}
	if base == nil {
		t.Fatal("Kustomization CRD not embedded")
	}
	for _, tc := range []struct {
		name   string
		mutate func(*apiextensionsv1.CustomResourceDefinition)
	}{
		{"property without type", func(c *apiextensionsv1.CustomResourceDefinition) {
			spec := c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"]
			p := spec.Properties["path"]
			p.Type = ""
			spec.Properties["path"] = p
			c.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = spec
		}},
		{"no storage version", func(c *apiextensionsv1.CustomResourceDefinition) {
			for i := range c.Spec.Versions {
				c.Spec.Versions[i].Storage = false
			}
		}},
		{"name not plural.group", func(c *apiextensionsv1.CustomResourceDefinition) { c.Name = "kustomizations.example.com" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			crd := base.DeepCopy()
			tc.mutate(crd)
			if _, err := serverValidate(crd); err == nil {
				t.Error("accepted")
			}
		})
	}
}

func TestKindsHaveServedStorageVersion(t *testing.T) {
	byKind := map[schema.GroupKind]*apiextensionsv1.CustomResourceDefinition{}
	for _, crd := range mustCRDs(t) {
		byKind[schema.GroupKind{Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind}] = crd
	}
	for _, tc := range []struct {
		gk   schema.GroupKind
		want bool
	}{
		{schema.GroupKind{Group: "argoproj.io", Kind: "Application"}, true},
		{schema.GroupKind{Group: "argoproj.io", Kind: "ApplicationSet"}, true},
		{schema.GroupKind{Group: "argoproj.io", Kind: "AppProject"}, true},
		{schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "GitRepository"}, true},
		{schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "OCIRepository"}, true},
		{schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "HelmRepository"}, true},
		{schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "HelmChart"}, true},
		{schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "Bucket"}, true},
		{schema.GroupKind{Group: "source.toolkit.fluxcd.io", Kind: "ExternalArtifact"}, true},
		{schema.GroupKind{Group: "kustomize.toolkit.fluxcd.io", Kind: "Kustomization"}, true},
		{schema.GroupKind{Group: "helm.toolkit.fluxcd.io", Kind: "HelmRelease"}, true},
		{schema.GroupKind{Group: "notification.toolkit.fluxcd.io", Kind: "Alert"}, true},
		{schema.GroupKind{Group: "notification.toolkit.fluxcd.io", Kind: "Provider"}, true},
		{schema.GroupKind{Group: "notification.toolkit.fluxcd.io", Kind: "Receiver"}, true},
		{schema.GroupKind{Group: "image.toolkit.fluxcd.io", Kind: "ImageRepository"}, true},
		{schema.GroupKind{Group: "image.toolkit.fluxcd.io", Kind: "ImagePolicy"}, true},
		// Copied from Git tags, the module proxy not serving their modules.
		{schema.GroupKind{Group: "image.toolkit.fluxcd.io", Kind: "ImageUpdateAutomation"}, true},
		{schema.GroupKind{Group: "source.extensions.fluxcd.io", Kind: "ArtifactGenerator"}, true},
		// kustomize's own Kustomization is not a CRD.
		{schema.GroupKind{Group: "kustomize.config.k8s.io", Kind: "Kustomization"}, false},
		{schema.GroupKind{Kind: "Application"}, false},
	} {
		t.Run(tc.gk.String(), func(t *testing.T) {
			if got := Has(tc.gk); got != tc.want {
				t.Errorf("Has = %v, want %v", got, tc.want)
			}
			crd, ok := byKind[tc.gk]
			if ok != tc.want {
				t.Fatalf("decoded CRD present = %v, want %v", ok, tc.want)
			}
			if !ok {
				return
			}
			storage := 0
			for _, v := range crd.Spec.Versions {
				if v.Storage {
					storage++
					if !v.Served {
						t.Errorf("storage version %s is not served", v.Name)
					}
				}
				if !v.Served {
					t.Errorf("version %s is embedded although not served", v.Name)
				}
			}
			if storage != 1 {
				t.Errorf("%d storage versions, want 1", storage)
			}
		})
	}
}

// TestIndexMatchesFiles checks the generated index Has relies on against
// the embedded files, and that every module's licence is embedded with them.
func TestIndexMatchesFiles(t *testing.T) {
	mods := Versions()
	for _, f := range files() {
		data, err := readGzip(f.name)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decodeDocuments(data)
		if err != nil {
			t.Fatalf("%s: %v", f.name, err)
		}
		if len(objs) != len(f.kinds) {
			t.Fatalf("%s: %d objects, index lists %d kinds", f.name, len(objs), len(f.kinds))
		}
		for i, o := range objs {
			group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
			kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
			if got := (schema.GroupKind{Group: group, Kind: kind}); got != f.kinds[i] {
				t.Errorf("%s: document %d defines %s, index says %s", f.name, i+1, got, f.kinds[i])
			}
		}
		if f.module < 0 || f.module >= len(mods) {
			t.Fatalf("%s: module index %d out of range", f.name, f.module)
		}
		licence, err := fs.ReadFile(crdFS, path.Join(path.Dir(f.name), "LICENSE"))
		if err != nil {
			t.Fatalf("%s (%s): %v", f.name, mods[f.module], err)
		}
		if !strings.Contains(string(licence), "Apache License") {
			t.Errorf("%s: LICENSE is not the Apache License", path.Dir(f.name))
		}
	}
}

func TestCRDsReturnsFreshCopies(t *testing.T) {
	first, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	name := first[0].GetName()
	first[0].SetName("changed")
	first[0] = nil
	second, err := CRDs()
	if err != nil {
		t.Fatal(err)
	}
	if second[0] == nil || second[0].GetName() != name {
		t.Errorf("second call saw the first call's change")
	}
}

func TestVersions(t *testing.T) {
	pinned := map[string]bool{
		ArgoCD: true, FluxSourceController: true, FluxKustomizeController: true,
		FluxHelmController: true, FluxNotificationController: true, FluxImageReflectorController: true,
		FluxSourceWatcher: true, FluxImageAutomationController: true,
	}
	got := Versions()
	if len(got) != len(pinned) {
		t.Fatalf("Versions has %d modules, constants name %d", len(got), len(pinned))
	}
	for _, m := range got {
		if !pinned[m.String()] {
			t.Errorf("%s has no constant", m)
		}
	}
	got[0].Version = "v0.0.0"
	if Versions()[0].Version == "v0.0.0" {
		t.Error("Versions returned shared state")
	}
}

// TestKindsComeFromTheirSource checks the module or repository each kind is
// attributed to, Git tags included.
func TestKindsComeFromTheirSource(t *testing.T) {
	mods := Versions()
	from := map[schema.GroupKind]Module{}
	for _, f := range files() {
		for _, k := range f.kinds {
			from[k] = mods[f.module]
		}
	}
	for _, tc := range []struct {
		gk   schema.GroupKind
		want string // Module.Path
	}{
		{schema.GroupKind{Group: "source.extensions.fluxcd.io", Kind: "ArtifactGenerator"}, "https://github.com/fluxcd/source-watcher"},
		{schema.GroupKind{Group: "image.toolkit.fluxcd.io", Kind: "ImageUpdateAutomation"}, "https://github.com/fluxcd/image-automation-controller"},
		{schema.GroupKind{Group: "image.toolkit.fluxcd.io", Kind: "ImagePolicy"}, "github.com/fluxcd/image-reflector-controller"},
		{schema.GroupKind{Group: "kustomize.toolkit.fluxcd.io", Kind: "Kustomization"}, "github.com/fluxcd/kustomize-controller"},
	} {
		t.Run(tc.gk.String(), func(t *testing.T) {
			m, ok := from[tc.gk]
			if !ok {
				t.Fatal("not embedded")
			}
			if m.Path != tc.want || !strings.HasPrefix(m.Version, "v") {
				t.Errorf("from %s, want %s at a version or tag", m, tc.want)
			}
		})
	}
}

func TestDecodeDocuments(t *testing.T) {
	for _, tc := range []struct {
		name, in string
		want     []string // names
		wantErr  bool
	}{
		{name: "empty", in: ""},
		{name: "separators only", in: "---\n---\n"},
		{name: "two", in: "---\napiVersion: v1\nkind: A\nmetadata: {name: a}\n---\napiVersion: v1\nkind: B\nmetadata: {name: b}\n", want: []string{"a", "b"}},
		{name: "integers stay integers", in: "apiVersion: v1\nkind: A\nmetadata: {name: a, generation: 3}\n", want: []string{"a"}},
		{name: "not a mapping", in: "- a\n- b\n", wantErr: true},
		{name: "no kind", in: "apiVersion: v1\n", wantErr: true},
		{name: "bad YAML", in: "a: [\n", wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs, err := decodeDocuments([]byte(tc.in))
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			var names []string
			for _, o := range objs {
				names = append(names, o.GetName())
			}
			if strings.Join(names, ",") != strings.Join(tc.want, ",") {
				t.Errorf("names = %v, want %v", names, tc.want)
			}
			if tc.name == "integers stay integers" && objs[0].GetGeneration() != 3 {
				t.Errorf("generation = %d, want 3", objs[0].GetGeneration())
			}
		})
	}
}

func FuzzDecodeDocuments(f *testing.F) {
	f.Add([]byte("apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: B\n"))
	f.Add([]byte("---\n"))
	f.Add([]byte("{\"apiVersion\": \"v1\", \"kind\": \"A\"}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		objs, err := decodeDocuments(data)
		if err != nil {
			return
		}
		for _, o := range objs {
			if o.GetKind() == "" {
				t.Errorf("decoded an object without kind: %v", o.Object)
			}
		}
	})
}

func TestCRDsForDecodesOnlyWhatIsAsked(t *testing.T) {
	for _, tc := range []struct {
		gks  []schema.GroupKind
		want []string
	}{
		{nil, nil},
		{[]schema.GroupKind{{Group: "apps", Kind: "Deployment"}}, nil},
		{[]schema.GroupKind{{Group: "source.toolkit.fluxcd.io", Kind: "GitRepository"}}, []string{"gitrepositories.source.toolkit.fluxcd.io"}},
		{[]schema.GroupKind{{Group: "source.toolkit.fluxcd.io", Kind: "HelmRepository"}, {Group: "argoproj.io", Kind: "AppProject"}},
			[]string{"appprojects.argoproj.io", "helmrepositories.source.toolkit.fluxcd.io"}},
		{[]schema.GroupKind{{Group: "source.extensions.fluxcd.io", Kind: "ArtifactGenerator"}}, []string{"artifactgenerators.source.extensions.fluxcd.io"}},
	} {
		got, err := CRDsFor(tc.gks)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, o := range got {
			names = append(names, o.GetName())
		}
		sort.Strings(names)
		if strings.Join(names, ",") != strings.Join(tc.want, ",") {
			t.Errorf("CRDsFor(%v) = %v, want %v", tc.gks, names, tc.want)
		}
	}
}

// TestForLooksUpEachKindOnce compares For, which asks Has once per kind,
// with asking it for every object, over objects repeating kinds, kinds a
// CRD among defined already has, and kinds no tool defines.
func TestForLooksUpEachKindOnce(t *testing.T) {
	obj := func(apiVersion, kind string) *unstructured.Unstructured {
		return &unstructured.Unstructured{Object: map[string]any{"apiVersion": apiVersion, "kind": kind, "metadata": map[string]any{"name": "x"}}}
	}
	crd := func(group, kind string) *unstructured.Unstructured {
		o := obj("apiextensions.k8s.io/v1", "CustomResourceDefinition")
		o.Object["spec"] = map[string]any{"group": group, "names": map[string]any{"kind": kind}}
		return o
	}
	repo := obj("source.toolkit.fluxcd.io/v1", "GitRepository")
	project := obj("argoproj.io/v1alpha1", "AppProject")
	deploy := obj("apps/v1", "Deployment")
	// everyObject is For as it was: Has asked for every object.
	everyObject := func(objects, defined []*unstructured.Unstructured) ([]*unstructured.Unstructured, error) {
		have := DefinedKinds(defined)
		var need []schema.GroupKind
		for _, o := range objects {
			gk := o.GroupVersionKind().GroupKind()
			if !have[gk] && Has(gk) {
				have[gk] = true
				need = append(need, gk)
			}
		}
		if len(need) == 0 {
			return nil, nil
		}
		return CRDsFor(need)
	}
	names := func(objs []*unstructured.Unstructured) string {
		var out []string
		for _, o := range objs {
			out = append(out, o.GetName())
		}
		return strings.Join(out, ",")
	}
	for _, tc := range []struct {
		name             string
		objects, defined []*unstructured.Unstructured
		want             string
	}{
		{"none", nil, nil, ""},
		{"plain kinds", []*unstructured.Unstructured{deploy, deploy, deploy}, nil, ""},
		{"repeated", []*unstructured.Unstructured{deploy, repo, deploy, repo, project, repo}, nil,
			"appprojects.argoproj.io,gitrepositories.source.toolkit.fluxcd.io"},
		{"defined", []*unstructured.Unstructured{repo, project, repo}, []*unstructured.Unstructured{crd("source.toolkit.fluxcd.io", "GitRepository")},
			"appprojects.argoproj.io"},
		{"other order", []*unstructured.Unstructured{project, repo, project}, nil,
			"appprojects.argoproj.io,gitrepositories.source.toolkit.fluxcd.io"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := For(tc.objects, tc.defined)
			if err != nil {
				t.Fatal(err)
			}
			want, err := everyObject(tc.objects, tc.defined)
			if err != nil {
				t.Fatal(err)
			}
			if names(got) != names(want) || names(got) != tc.want {
				t.Errorf("For = %s; asking for every object: %s; want %s", names(got), names(want), tc.want)
			}
		})
	}
}
