package flux

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/truce-dev/truce/internal/ocitest"
	"github.com/truce-dev/truce/render"
)

func TestOCIPuller(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	layer := func(content string) ocitest.Layer {
		return ocitest.Layer{MediaType: "application/vnd.cncf.flux.content.v1.tar+gzip", Data: ocitest.TarGz(t, map[string]string{"app/cm.yaml": content})}
	}
	for _, tag := range []string{"v1.0.0", "v1.2.0", "v2.0.0-rc.1", "latest"} {
		reg.Push(t, "manifests/app", tag, layer(tag))
	}
	pinned := reg.Push(t, "manifests/app", "v0.1.0", layer("pinned"))
	reg.Push(t, "manifests/two", "v1", ocitest.Layer{MediaType: "text/plain", Data: []byte("notes")}, layer("second layer"))
	url := "oci://" + reg.Host() + "/manifests/app"
	tests := []struct {
		name string
		repo OCIRepository
		// content is app/cm.yaml's; revision starts with it. Else
		// problem is in the error, Unpredictable when unpredictable.
		content, revision, problem string
		unpredictable              bool
	}{
		{name: "tag", repo: OCIRepository{URL: url, Tag: "v1.0.0"}, content: "v1.0.0", revision: "v1.0.0@sha256:"},
		{name: "no ref: latest", repo: OCIRepository{URL: url}, content: "latest", revision: "latest@sha256:"},
		{name: "semver", repo: OCIRepository{URL: url, SemVer: "1.x", Tag: "v0.1.0"}, content: "v1.2.0", revision: "v1.2.0@sha256:"},
		{name: "semver with prereleases", repo: OCIRepository{URL: url, SemVer: ">=2.0.0-0"}, content: "v2.0.0-rc.1"},
		{name: "semver filter", repo: OCIRepository{URL: url, SemVer: ">=0", SemVerFilter: `^v1\.0`}, content: "v1.0.0"},
		{name: "digest wins", repo: OCIRepository{URL: url, Digest: pinned, SemVer: "1.x"}, content: "pinned", revision: pinned},
		{name: "layer by media type", repo: OCIRepository{URL: "oci://" + reg.Host() + "/manifests/two", Tag: "v1", MediaType: "application/vnd.cncf.flux.content.v1.tar+gzip", Operation: OCILayerCopy}, content: "second layer"},
		{name: "first layer: not a tarball", repo: OCIRepository{URL: "oci://" + reg.Host() + "/manifests/two", Tag: "v1"}, problem: "requires gzip-compressed body"},
		{name: "no layer of the media type", repo: OCIRepository{URL: url, Tag: "v1.0.0", MediaType: "application/x-nope"}, problem: "failed to find layer with media type 'application/x-nope' in artifact"},
		{name: "a missing tag", repo: OCIRepository{URL: url, Tag: "v9"}, problem: "failed to determine artifact digest of " + reg.Host() + "/manifests/app:v9"},
		{name: "no tag meets the range", repo: OCIRepository{URL: url, SemVer: ">=3"}, problem: "no match found for semver: >=3"},
		{name: "a bad range", repo: OCIRepository{URL: url, SemVer: "one"}, problem: "semver 'one' parse error"},
		{name: "a bad operation", repo: OCIRepository{URL: url, Operation: "unpack"}, problem: `layerSelector.operation "unpack" is neither extract nor copy`},
		{name: "not oci://", repo: OCIRepository{URL: "https://" + reg.Host() + "/manifests/app"}, problem: "must start with oci://"},
		{name: "a registry that cannot be reached", repo: OCIRepository{URL: "oci://127.0.0.1:1/manifests/app", Insecure: true}, problem: "cannot be pulled", unpredictable: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.repo.Name = "flux-system/app"
			if tc.repo.URL == url || strings.Contains(tc.repo.URL, "/manifests/two") {
				tc.repo.Insecure = true
			}
			p := &OCIPuller{CacheDir: t.TempDir()}
			art, err := p.Pull(context.Background(), &tc.repo)
			if err == nil {
				err = ExtractTarGz(art.Path, filepath.Join(t.TempDir(), "x"), 1<<20, 1<<20)
			}
			if tc.problem != "" {
				if err == nil || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("error %v, want one with %q", err, tc.problem)
				}
				if _, ok := render.AsUnpredictable(err); ok != tc.unpredictable {
					t.Errorf("error %v: Unpredictable %v, want %v", err, ok, tc.unpredictable)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			if err := ExtractTarGz(art.Path, dir, 1<<20, 1<<20); err != nil {
				t.Fatal(err)
			}
			got, err := os.ReadFile(filepath.Join(dir, "app", "cm.yaml"))
			if err != nil || string(got) != tc.content {
				t.Errorf("app/cm.yaml = %q, %v; want %q", got, err, tc.content)
			}
			if !strings.HasPrefix(art.Revision, tc.revision) {
				t.Errorf("revision %q, want it to start with %q", art.Revision, tc.revision)
			}
			if art.Extract != (tc.repo.Operation != OCILayerCopy) {
				t.Errorf("Extract = %v for operation %q", art.Extract, tc.repo.Operation)
			}
		})
	}
}

// Offline, the last pull of a tag or digest is used; a semver range, or
// what was never pulled, is Unpredictable and names the URL.
func TestOCIPullerOffline(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	reg.Push(t, "app", "v1", ocitest.Layer{MediaType: "application/gzip", Data: ocitest.TarGz(t, map[string]string{"a.yaml": "a"})})
	url := "oci://" + reg.Host() + "/app"
	cache := t.TempDir()
	online := &OCIPuller{CacheDir: cache}
	first, err := online.Pull(context.Background(), &OCIRepository{Name: "ns/app", URL: url, Tag: "v1", Insecure: true})
	if err != nil {
		t.Fatal(err)
	}
	before := reg.Requests.Load()
	off := &OCIPuller{CacheDir: cache, Offline: true}
	tests := []struct {
		name string
		repo OCIRepository
		ok   bool
	}{
		{"a tag pulled before", OCIRepository{URL: url, Tag: "v1"}, true},
		{"a tag never pulled", OCIRepository{URL: url, Tag: "v2"}, false},
		{"a range", OCIRepository{URL: url, SemVer: "*"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.repo.Name = "ns/app"
			art, err := off.Pull(context.Background(), &tc.repo)
			if tc.ok {
				if err != nil || art.Revision != first.Revision || art.Path != first.Path {
					t.Errorf("got %+v, %v; want %+v", art, err, first)
				}
				return
			}
			if u, ok := render.AsUnpredictable(err); !ok || !strings.Contains(u.Subject, url) {
				t.Errorf("error %v, want Unpredictable naming %s", err, url)
			}
		})
	}
	if n := reg.Requests.Load(); n != before {
		t.Errorf("offline pulls made %d requests", n-before)
	}
}

// Registries get the credentials of the registry config: right ones
// pull, wrong or missing ones are Unpredictable, naming the registry and
// never the password.
func TestOCIPullerCredentials(t *testing.T) {
	t.Setenv("DOCKER_CONFIG", t.TempDir()) // not the user's Docker logins
	const password = "reg-pa55word"
	reg := ocitest.NewRegistry(t)
	reg.Push(t, "manifests/app", "v1.0.0", ocitest.Layer{MediaType: "application/vnd.cncf.flux.content.v1.tar+gzip",
		Data: ocitest.TarGz(t, map[string]string{"app/cm.yaml": "x"})})
	reg.RequireBasicAuth("truce", password)
	empty := filepath.Join(t.TempDir(), "config.json")
	if err := os.WriteFile(empty, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	url := "oci://" + reg.Host() + "/manifests/app"
	tests := []struct {
		name, config string
		repo         OCIRepository
		want         string // "" pulls
	}{
		{"right credentials", reg.DockerConfig(t, "truce", password), OCIRepository{Tag: "v1.0.0"}, ""},
		{"right credentials, semver", reg.DockerConfig(t, "truce", password), OCIRepository{SemVer: "1.x"}, ""},
		{"wrong password", reg.DockerConfig(t, "truce", "not-"+password), OCIRepository{Tag: "v1.0.0"},
			"OCIRepository ns/app (" + url + "): the registry refused access with the credentials of --registry-config"},
		{"wrong password, semver", reg.DockerConfig(t, "truce", "not-"+password), OCIRepository{SemVer: "1.x"}, "the registry refused access"},
		{"no credentials", empty, OCIRepository{Tag: "v1.0.0"}, "the registry refused access"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := &OCIPuller{CacheDir: t.TempDir(), RegistryConfig: tc.config}
			r := tc.repo
			r.Name, r.URL, r.Insecure = "ns/app", url, true
			art, err := p.Pull(t.Context(), &r)
			if tc.want == "" {
				if err != nil || art.Revision == "" {
					t.Fatalf("pulled %v, %v", art, err)
				}
				return
			}
			if _, ok := render.AsUnpredictable(err); !ok || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want Unpredictable with %q", err, tc.want)
			}
			if strings.Contains(err.Error(), password) {
				t.Errorf("error %v shows the password", err)
			}
		})
	}
}
