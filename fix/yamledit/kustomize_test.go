package yamledit

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestAddKustomizePatch(t *testing.T) {
	for _, tc := range []struct {
		name, kpath, in, patch, want string
		err                          error
	}{
		{
			name:  "creates patches",
			kpath: "overlays/prod/kustomization.yaml",
			in: lines(
				"apiVersion: kustomize.config.k8s.io/v1beta1",
				"kind: Kustomization",
				"# the base",
				"resources:",
				"  - ../../base",
			),
			patch: "overlays/prod/patches/web-image.yaml",
			want: lines(
				"apiVersion: kustomize.config.k8s.io/v1beta1",
				"kind: Kustomization",
				"# the base",
				"resources:",
				"  - ../../base",
				"patches:",
				"  - path: patches/web-image.yaml",
			),
		},
		{
			name:  "appends to patches in their style",
			kpath: "/repo/app/kustomization.yaml",
			in: lines(
				"resources:",
				"- deployment.yaml",
				"patches:",
				"- path: replicas.yaml # HPA",
				"  target:",
				"    kind: Deployment",
				"",
				"images:",
				"- name: nginx",
			),
			patch: "/repo/app/web-image.yaml",
			want: lines(
				"resources:",
				"- deployment.yaml",
				"patches:",
				"- path: replicas.yaml # HPA",
				"  target:",
				"    kind: Deployment",
				"- path: web-image.yaml",
				"",
				"images:",
				"- name: nginx",
			),
		},
		{
			name:  "already listed",
			kpath: "kustomization.yaml",
			in:    lines("patches:", "- path: ./web-image.yaml"),
			patch: "web-image.yaml",
			want:  lines("patches:", "- path: ./web-image.yaml"),
		},
		{
			name:  "already listed as patchesStrategicMerge",
			kpath: "kustomization.yaml",
			in:    lines("patchesStrategicMerge:", "- web-image.yaml"),
			patch: "web-image.yaml",
			want:  lines("patchesStrategicMerge:", "- web-image.yaml"),
		},
		{
			name:  "empty patches",
			kpath: "kustomization.yaml",
			in:    "resources: [a.yaml]\r\npatches: []\r\n",
			patch: "p.yaml",
			want:  "resources: [a.yaml]\r\npatches:\r\n  - path: p.yaml\r\n",
		},
		{
			name:  "only comments",
			kpath: "kustomization.yaml",
			in:    "# empty",
			patch: "p.yaml",
			want:  lines("# empty", "patches:", "- path: p.yaml"),
		},
		{
			name:  "outside the kustomization",
			kpath: "app/kustomization.yaml",
			in:    lines("resources: []"),
			patch: "other/p.yaml",
			err:   ErrInvalid,
		},
		{
			name:  "patches is not a list",
			kpath: "kustomization.yaml",
			in:    lines("patches: x"),
			patch: "p.yaml",
			err:   ErrInvalid,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := AddKustomizePatch(tc.kpath, []byte(tc.in), tc.patch)
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("got %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestStrategicPatch(t *testing.T) {
	deploy := map[string]any{
		"apiVersion": "apps/v1",
		"kind":       "Deployment",
		"metadata":   map[string]any{"name": "web", "namespace": "prod"},
		"spec": map[string]any{
			"replicas": int64(3),
			"template": map[string]any{"spec": map[string]any{
				"containers": []any{
					map[string]any{"name": "init", "image": "busybox"},
					map[string]any{
						"name":  "nginx",
						"image": "nginx:1.27",
						"args":  []any{"--a", "--b"},
						"env": []any{
							map[string]any{"name": "A", "value": "1"},
							map[string]any{"name": "B", "value": "2"},
						},
						"ports": []any{map[string]any{"name": "http", "containerPort": int64(80)}},
					},
				},
				"tolerations": []any{map[string]any{"key": "k", "operator": "Exists"}},
			}},
		},
	}
	for _, tc := range []struct {
		name       string
		apiVersion string
		kind       string
		fields     map[string]any
		original   map[string]any
		want       string
		err        bool
	}{
		{
			name: "image of the second container",
			fields: map[string]any{
				"/spec/template/spec/containers/1/image": "registry.internal/nginx:1.27",
			},
			original: deploy,
			want: lines(
				"apiVersion: apps/v1",
				"kind: Deployment",
				"metadata:",
				"  name: web",
				"  namespace: prod",
				"spec:",
				"  template:",
				"    spec:",
				"      containers:",
				"        - name: init",
				"        - name: nginx",
				"          image: registry.internal/nginx:1.27",
			),
		},
		{
			name: "env, ports, args, tolerations and a deletion",
			fields: map[string]any{
				"/spec/template/spec/containers/1/env/1/value":      "two",
				"/spec/template/spec/containers/1/ports/0/protocol": "TCP",
				"/spec/template/spec/containers/1/args/-":           "--c",
				"/spec/template/spec/tolerations/0/effect":          "NoSchedule",
				"/spec/replicas":                                            nil,
				"/metadata/annotations/truce.dev~1fixed":                    "true",
				"/spec/template/spec/containers/1/env/-":                    map[string]any{"name": "C", "value": "3"},
				"/spec/template/spec/containers/0/resources/limits/cpu":     "1",
				"/spec/template/spec/containers/0/resources/limits/memory":  "1Gi",
				"/spec/template/spec/containers/1/env/0/valueFrom/fieldRef": map[string]any{"fieldPath": "metadata.name"},
			},
			original: deploy,
			want: lines(
				"apiVersion: apps/v1",
				"kind: Deployment",
				"metadata:",
				"  name: web",
				"  namespace: prod",
				"  annotations:",
				`    truce.dev/fixed: "true"`,
				"spec:",
				"  replicas: null",
				"  template:",
				"    spec:",
				"      containers:",
				"        - name: init",
				"          resources:",
				"            limits:",
				"              cpu: \"1\"",
				"              memory: 1Gi",
				"        - name: nginx",
				"          args:",
				"            - --a",
				"            - --b",
				"            - --c",
				"          env:",
				"            - name: A",
				"              valueFrom:",
				"                fieldRef:",
				"                  fieldPath: metadata.name",
				"            - name: B",
				"              value: two",
				"            - name: C",
				`              value: "3"`,
				"          ports:",
				"            - containerPort: 80",
				"              protocol: TCP",
				"      tolerations:",
				"        - effect: NoSchedule",
				"          key: k",
				"          operator: Exists",
			),
		},
		{
			name:       "custom resource lists are written whole",
			apiVersion: "argoproj.io/v1alpha1",
			kind:       "Application",
			fields:     map[string]any{"/spec/syncPolicy/syncOptions/-": "ServerSideApply=true"},
			original: map[string]any{"spec": map[string]any{"syncPolicy": map[string]any{
				"syncOptions": []any{"CreateNamespace=true"},
			}}},
			want: lines(
				"apiVersion: argoproj.io/v1alpha1",
				"kind: Application",
				"metadata:",
				"  name: web",
				"  namespace: prod",
				"spec:",
				"  syncPolicy:",
				"    syncOptions:",
				"      - CreateNamespace=true",
				"      - ServerSideApply=true",
			),
		},
		{
			name:     "renaming a merge key is refused",
			fields:   map[string]any{"/spec/template/spec/containers/1/name": "x"},
			original: deploy,
			err:      true,
		},
		{
			name:   "index without original",
			fields: map[string]any{"/spec/template/spec/containers/1/image": "x"},
			err:    true,
		},
		{
			name:     "name cannot be patched",
			fields:   map[string]any{"/metadata/name": "x"},
			original: deploy,
			err:      true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			av, kind := tc.apiVersion, tc.kind
			if av == "" {
				av, kind = "apps/v1", "Deployment"
			}
			got, err := StrategicPatch(av, kind, "web", "prod", tc.fields, tc.original)
			if tc.err {
				if !errors.Is(err, ErrInvalid) {
					t.Fatalf("got %v, want an ErrInvalid error", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("got:\n%s\nwant:\n%s", got, tc.want)
			}
		})
	}
}

func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "app.yaml")
	if err := os.WriteFile(p, []byte("a: 1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := WriteFileAtomic(p, []byte("a: 2\n")); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(p)
	st, _ := os.Stat(p)
	if string(b) != "a: 2\n" || st.Mode().Perm() != 0o600 {
		t.Fatalf("got %q mode %v", b, st.Mode())
	}
	// Symbolic links stay links.
	link := filepath.Join(dir, "link.yaml")
	if err := os.Symlink("app.yaml", link); err != nil {
		t.Skip(err)
	}
	if err := WriteFileAtomic(link, []byte("a: 3\n")); err != nil {
		t.Fatal(err)
	}
	if fi, _ := os.Lstat(link); fi.Mode()&os.ModeSymlink == 0 {
		t.Fatal("symlink replaced")
	}
	if b, _ := os.ReadFile(p); string(b) != "a: 3\n" {
		t.Fatalf("got %q", b)
	}
	// New files get 0644; no temporary files are left.
	n := filepath.Join(dir, "new.yaml")
	if err := WriteFileAtomic(n, []byte("x")); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(n); st.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v", st.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 3 {
		t.Fatalf("left %d files", len(entries))
	}
	if err := WriteFileAtomic(dir, []byte("x")); err == nil {
		t.Fatal("wrote over a directory")
	}
}
