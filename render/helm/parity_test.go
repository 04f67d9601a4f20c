package helm

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/argovalues"
)

// parityCase is one chart and one set of inputs, given to Render (through
// ArgoValues) and to helm template (as flags).
type parityCase struct {
	name        string
	chart       string // under testdata
	rel         Release
	values      ArgoValues
	kubeVersion string
	apiVersions []string
	wantErr     bool
	// errContains, with wantErr, is in both errors.
	errContains string
}

var parityCases = []parityCase{
	{name: "web defaults", chart: "charts/web", rel: Release{Name: "site", Namespace: "apps"}},
	{name: "web prod file and set", chart: "charts/web", rel: Release{Name: "site", Namespace: "apps"},
		values: ArgoValues{Files: []string{"values-prod.yaml"}, Parameters: []Parameter{
			{Name: "image.tag", Value: "1.28"}, {Name: "service.port", Value: "8080", ForceString: true}}},
		apiVersions: []string{"monitoring.coreos.com/v1/ServiceMonitor"}},
	{name: "web old kubernetes", chart: "charts/web", rel: Release{Name: "site", Namespace: "apps"},
		values: ArgoValues{Values: "ingress:\n  enabled: true\nservice:\n  enabled: false\n"}, kubeVersion: "v1.18.4"},
	{name: "web upgrade with labels list", chart: "charts/web", rel: Release{Name: "site", IsUpgrade: true},
		values: ArgoValues{Parameters: []Parameter{{Name: "extraLabels.team", Value: "a,b"}}}},
	{name: "umbrella defaults", chart: "charts/umbrella", rel: Release{Name: "u", Namespace: "apps"}},
	{name: "umbrella alias enabled", chart: "charts/umbrella", rel: Release{Name: "u", Namespace: "apps"},
		values: ArgoValues{Parameters: []Parameter{{Name: "worker.enabled", Value: "true"}, {Name: "backend.enabled", Value: "false"}, {Name: "global.env", Value: "dev"}}}},
	{name: "crds included", chart: "charts/crds", rel: Release{Name: "c", Namespace: "x", IncludeCRDs: true}},
	{name: "crds left out", chart: "charts/crds", rel: Release{Name: "c", Namespace: "x"},
		values: ArgoValues{Parameters: []Parameter{{Name: "size", Value: "7"}}}},
	{name: "hooks", chart: "charts/hooks", rel: Release{Name: "h", Namespace: "x"}},
	{name: "hooks skip tests upgrade", chart: "charts/hooks", rel: Release{Name: "h", Namespace: "x", SkipTests: true, IsUpgrade: true},
		values: ArgoValues{Parameters: []Parameter{{Name: "migrate", Value: "false"}}}},
	{name: "required given", chart: "charts/required", rel: Release{Name: "r"},
		values: ArgoValues{Parameters: []Parameter{{Name: "image.tag", Value: "2.0"}}}},
	{name: "required missing", chart: "charts/required", rel: Release{Name: "r"}, wantErr: true},
	{name: "tpl loop", chart: "charts/tplloop", rel: Release{Name: "t"}, wantErr: true},
	{name: "helm subchart", chart: "helm/subchart", rel: Release{Name: "rel", Namespace: "ns", IncludeCRDs: true},
		apiVersions: []string{"helm.k8s.io/test"}, kubeVersion: "1.29.3"},
	{name: "helm subchart extra values no tests", chart: "helm/subchart", rel: Release{Name: "rel", Namespace: "ns", SkipTests: true},
		values: ArgoValues{Files: []string{"extra_values.yaml"}, Parameters: []Parameter{
			{Name: "tags.front-end", Value: "false"}, {Name: "subchartb.enabled", Value: "true"}, {Name: "configmap.enabled", Value: "true"}}}},
	{name: "schema valid, import-values, capabilities, lookup", chart: "charts/schema", rel: Release{Name: "s", Namespace: "data"},
		apiVersions: []string{"example.com/v1"}, kubeVersion: "v1.31.2"},
	{name: "schema valid upgrade, subchart disabled", chart: "charts/schema", rel: Release{Name: "s", IsUpgrade: true},
		values: ArgoValues{Parameters: []Parameter{{Name: "db.enabled", Value: "false"}, {Name: "replicas", Value: "4"}}}},
	{name: "schema violated", chart: "charts/schema", rel: Release{Name: "s"},
		values:  ArgoValues{Parameters: []Parameter{{Name: "replicas", Value: "0"}}},
		wantErr: true, errContains: "values don't meet the specifications of the schema"},
	{name: "schema violated, wrong type", chart: "charts/schema", rel: Release{Name: "s"},
		values:  ArgoValues{Parameters: []Parameter{{Name: "image.tag", Value: "latest"}}},
		wantErr: true, errContains: "at '/image/tag': 'latest' does not match pattern"},
	{name: "subchart schema violated", chart: "charts/schema", rel: Release{Name: "s"},
		values:  ArgoValues{Parameters: []Parameter{{Name: "db.storage", Value: "lots"}}},
		wantErr: true, errContains: "db:\n- at '/storage'"},
	{name: "schema violated, validation skipped", chart: "charts/schema", rel: Release{Name: "s", SkipSchemaValidation: true},
		values: ArgoValues{Parameters: []Parameter{{Name: "replicas", Value: "0"}, {Name: "db.storage", Value: "lots"}}}},
	{name: "library chart dependency", chart: "charts/withlib", rel: Release{Name: "l", Namespace: "x"}},
	{name: "chart kubeVersion met", chart: "charts/future", rel: Release{Name: "f"}, kubeVersion: "1.30.0"},
	{name: "chart kubeVersion not met", chart: "charts/future", rel: Release{Name: "f"}, kubeVersion: "1.29.9",
		wantErr: true, errContains: "chart requires kubeVersion: >=1.30.0-0 which is incompatible with Kubernetes v1.29.9"},
	{name: "invalid release name", chart: "charts/future", rel: Release{Name: "Not_Valid"}, kubeVersion: "1.30.0",
		wantErr: true, errContains: `release name "Not_Valid"`},
}

// TestParityWithHelmTemplate checks that Render gives, object for object
// and in order, what helm template prints for the same chart and inputs.
func TestParityWithHelmTemplate(t *testing.T) {
	for _, tc := range parityCases {
		t.Run(tc.name, func(t *testing.T) {
			dir := fixture(t, tc.chart)
			opts := render.Options{KubeVersion: tc.kubeVersion, APIVersions: tc.apiVersions}.WithDefaults()

			vals, err := tc.values.Merge(context.Background(), dir, nil)
			if err != nil {
				t.Fatal(err)
			}
			ch := mustLoad(t, dir)
			got, renderErr := Render(context.Background(), ch, tc.rel, vals, opts)

			out, helmErr := helmTemplate(t, helmArgs(t, dir, tc, opts)...)
			if tc.wantErr {
				if renderErr == nil || helmErr == nil {
					t.Fatalf("want both to fail; Render: %v, helm template: %v", renderErr, helmErr)
				}
				if !strings.Contains(renderErr.Error(), tc.errContains) || !strings.Contains(helmErr.Error(), tc.errContains) {
					t.Fatalf("want both errors to contain %q; Render: %v, helm template: %v", tc.errContains, renderErr, helmErr)
				}
				return
			}
			if renderErr != nil || helmErr != nil {
				t.Fatalf("Render: %v, helm template: %v", renderErr, helmErr)
			}
			want, err := manifest.Decode("helm template", strings.NewReader(out), manifest.Options{})
			if err != nil {
				t.Fatalf("decoding helm template output: %v", err)
			}
			gotObjs := append(append([]manifest.Object(nil), got.Objects...), got.Hooks...)
			if len(want) == 0 {
				t.Fatal("helm template printed no objects")
			}
			if diff := cmp.Diff(contents(want), contents(gotObjs)); diff != "" {
				t.Errorf("Render differs from helm template (-helm +truce):\n%s", diff)
			}
		})
	}
}

// helmArgs are the helm template flags Argo CD would pass for tc.
func helmArgs(t *testing.T, dir string, tc parityCase, opts render.Options) []string {
	// Always --namespace: helm's flags live in a package variable that
	// keeps the previous run's value in process; "default" is what helm
	// template uses without a kubeconfig.
	ns := tc.rel.Namespace
	if ns == "" {
		ns = "default"
	}
	args := []string{"template", tc.rel.Name, dir, "--kube-version", opts.KubeVersion, "--namespace", ns}
	for _, v := range tc.apiVersions {
		args = append(args, "--api-versions", v)
	}
	if tc.rel.IncludeCRDs {
		args = append(args, "--include-crds")
	}
	if tc.rel.SkipTests {
		args = append(args, "--skip-tests")
	}
	if tc.rel.IsUpgrade {
		args = append(args, "--is-upgrade")
	}
	if tc.rel.SkipSchemaValidation {
		args = append(args, "--skip-schema-validation")
	}
	for _, f := range tc.values.Files {
		args = append(args, "--values", filepath.Join(dir, f))
	}
	if tc.values.Values != "" {
		p := filepath.Join(t.TempDir(), "inline.yaml")
		if err := os.WriteFile(p, []byte(tc.values.Values), 0o644); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--values", p)
	}
	for _, p := range tc.values.Parameters {
		flag := "--set"
		if p.ForceString {
			flag = "--set-string"
		}
		args = append(args, flag, p.Name+"="+argovalues.CleanSetParameters(p.Value))
	}
	return args
}

// contents are the objects' content, without positions.
func contents(objs []manifest.Object) []map[string]any {
	out := make([]map[string]any, len(objs))
	for i, o := range objs {
		out[i] = o.Object.Object
	}
	return out
}
