package manifest

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
)

// Values that must never appear in an error.
const (
	testPassword = "s3cret-pass"
	testToken    = "t0ken-value"
)

// testKey is an unencrypted ed25519 private key in PKCS#8 PEM and its
// public key.
func testKey(t *testing.T) (string, ssh.PublicKey) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), signer.PublicKey()
}

// encryptedKey is an OpenSSH private key encrypted with passphrase,
// written by ssh-keygen.
func encryptedKey(t *testing.T, passphrase string) string {
	t.Helper()
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("needs ssh-keygen")
	}
	p := filepath.Join(t.TempDir(), "key")
	if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", passphrase, "-C", "", "-f", p).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v: %s", err, out)
	}
	data, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// secretDirWith writes files into a new directory, as a mounted Secret.
func secretDirWith(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestGitAuthFromDir(t *testing.T) {
	key, pub := testKey(t)
	_, otherPub := testKey(t)
	knownHosts := "github.com " + string(ssh.MarshalAuthorizedKey(pub))
	keyBody := strings.Split(key, "\n")[1]

	type check func(t *testing.T, auth transport.AuthMethod)
	basic := func(user, password string) check {
		return func(t *testing.T, auth transport.AuthMethod) {
			if a, ok := auth.(*githttp.BasicAuth); !ok || a.Username != user || a.Password != password {
				t.Errorf("auth = %#v, want basic auth for %s", auth, user)
			}
		}
	}
	sshAs := func(user string) check {
		return func(t *testing.T, auth transport.AuthMethod) {
			a, ok := auth.(*gitssh.PublicKeys)
			if !ok || a.User != user || a.HostKeyCallback == nil {
				t.Fatalf("auth = %#v, want public keys for %s with a host key check", auth, user)
			}
		}
	}
	tests := []struct {
		name  string
		url   string
		files map[string]string
		opts  GitAuthOptions
		check check
		// want is in the error; it also matches ErrGitInsecure when
		// insecure is set.
		want     string
		insecure bool
	}{
		{name: "basic auth", url: "https://github.com/org/fleet", files: map[string]string{"username": "git\n", "password": testPassword + "\r\n"},
			check: basic("git", testPassword)},
		{name: "a username alone", url: "https://github.com/org/fleet", files: map[string]string{"username": testToken},
			check: basic(testToken, "")},
		{name: "bearer token", url: "https://github.com/org/fleet", files: map[string]string{"bearerToken": testToken + "\n"},
			check: func(t *testing.T, auth transport.AuthMethod) {
				if a, ok := auth.(*githttp.TokenAuth); !ok || a.Token != testToken {
					t.Errorf("auth = %#v, want the bearer token", auth)
				}
			}},
		{name: "a bearer token wins over basic auth, as in Flux", url: "https://github.com/org/fleet",
			files: map[string]string{"bearerToken": testToken, "username": "git", "password": testPassword},
			check: func(t *testing.T, auth transport.AuthMethod) {
				if _, ok := auth.(*githttp.TokenAuth); !ok {
					t.Errorf("auth = %#v, want the bearer token", auth)
				}
			}},
		{name: "an https URL takes the HTTP files of a directory holding both", url: "https://github.com/org/fleet",
			files: map[string]string{"username": "git", "password": testPassword, "identity": "not read", "known_hosts": "not read"},
			check: basic("git", testPassword)},
		{name: "a password without a username", url: "https://github.com/org/fleet", files: map[string]string{"password": testPassword, "username": ""},
			want: "password is set but DIR/username is missing or empty"},
		{name: "no HTTP credentials", url: "https://github.com/org/fleet", files: map[string]string{"identity": key, "identity.pub": "x"},
			want: "holds no credentials for https://: want bearerToken, or username and password"},
		{name: "basic auth over plain HTTP", url: "http://git.internal/org/fleet", files: map[string]string{"username": "git", "password": testPassword},
			want: "refusing to send the credentials of DIR/username and DIR/password to git.internal over plain http://: they would cross the network in clear text", insecure: true},
		{name: "a bearer token over plain HTTP", url: "http://git.internal/org/fleet", files: map[string]string{"bearerToken": testToken},
			want: "refusing to send the credentials of DIR/bearerToken", insecure: true},
		{name: "basic auth over plain HTTP, allowed", url: "http://git.internal/org/fleet", files: map[string]string{"username": "git", "password": testPassword},
			opts: GitAuthOptions{InsecureHTTP: true}, check: basic("git", testPassword)},

		{name: "SSH", url: "ssh://github.com/org/fleet.git", files: map[string]string{"identity": key, "known_hosts": knownHosts},
			check: func(t *testing.T, auth transport.AuthMethod) {
				sshAs("git")(t, auth)
				a := auth.(*gitssh.PublicKeys)
				addr := &net.TCPAddr{IP: net.IPv4(140, 82, 121, 4), Port: 22}
				if err := a.HostKeyCallback("github.com:22", addr, pub); err != nil {
					t.Errorf("the known host key is refused: %v", err)
				}
				if err := a.HostKeyCallback("github.com:22", addr, otherPub); err == nil {
					t.Error("another host key is accepted")
				}
				if len(a.HostKeyAlgorithms) == 0 || !strings.Contains(strings.Join(a.HostKeyAlgorithms, ","), ssh.KeyAlgoED25519) {
					t.Errorf("host key algorithms %q, want the known key's", a.HostKeyAlgorithms)
				}
			}},
		{name: "the user of an scp-style URL", url: "deploy@github.com:org/fleet.git", files: map[string]string{"identity": key, "known_hosts": knownHosts},
			check: sshAs("deploy")},
		{name: "a port", url: "ssh://git@git.internal:2222/fleet", files: map[string]string{"identity": key, "known_hosts": "[git.internal]:2222 " + string(ssh.MarshalAuthorizedKey(pub))},
			check: sshAs("git")},
		{name: "an SSH URL takes the SSH files of a directory holding both", url: "git@github.com:org/fleet",
			files: map[string]string{"identity": key, "known_hosts": knownHosts, "username": "someone", "password": "unused for a key in clear"},
			check: sshAs("git")},
		{name: "no identity", url: "git@github.com:org/fleet", files: map[string]string{"username": "git", "password": testPassword, "known_hosts": knownHosts},
			want: "DIR/identity is missing or empty: SSH URLs need a private key"},
		{name: "no known_hosts", url: "git@github.com:org/fleet", files: map[string]string{"identity": key},
			want: "DIR/known_hosts is missing or empty: refusing to connect to github.com without knowing its host key", insecure: true},
		{name: "no known_hosts, allowed", url: "git@github.com:org/fleet", files: map[string]string{"identity": key},
			opts: GitAuthOptions{InsecureIgnoreHostKey: true},
			check: func(t *testing.T, auth transport.AuthMethod) {
				sshAs("git")(t, auth)
				if err := auth.(*gitssh.PublicKeys).HostKeyCallback("github.com:22", &net.TCPAddr{}, otherPub); err != nil {
					t.Errorf("host key refused: %v", err)
				}
			}},
		{name: "known_hosts without the host", url: "git@gitlab.com:org/fleet", files: map[string]string{"identity": key, "known_hosts": knownHosts},
			want: "DIR/known_hosts has no key for gitlab.com:22"},
		{name: "known_hosts that does not parse", url: "git@github.com:org/fleet", files: map[string]string{"identity": key, "known_hosts": "github.com ssh-ed25519 !!!\n"},
			want: "DIR/known_hosts:1"},
		{name: "an identity that is no PEM key", url: "git@github.com:org/fleet", files: map[string]string{"identity": testPassword + "\n" + keyBody, "known_hosts": knownHosts},
			want: "DIR/identity is not a PEM private key truce can use: ssh: no key found"},
		{name: "a local repository", url: "/srv/git/fleet", files: map[string]string{"username": "git", "password": testPassword},
			want: "credentials are for https://, http:// and SSH URLs; /srv/git/fleet is read without them"},
		{name: "a file:// URL", url: "file:///srv/git/fleet", files: map[string]string{"username": "git", "password": testPassword},
			want: "credentials are for https://, http:// and SSH URLs"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := secretDirWith(t, tt.files)
			auth, err := GitAuthFromDir(dir, tt.url, tt.opts)
			if tt.check != nil {
				if err != nil {
					t.Fatal(err)
				}
				tt.check(t, auth)
				return
			}
			if err == nil {
				t.Fatalf("no error; auth %#v", auth)
			}
			msg := strings.ReplaceAll(err.Error(), dir, "DIR")
			if !strings.Contains(msg, tt.want) {
				t.Errorf("error %q\nwant it to contain %q", msg, tt.want)
			}
			if errors.Is(err, ErrGitInsecure) != tt.insecure {
				t.Errorf("errors.Is(%v, ErrGitInsecure) = %t", err, !tt.insecure)
			}
			for _, secret := range []string{testPassword, testToken, keyBody} {
				if strings.Contains(msg, secret) {
					t.Errorf("error %q shows a secret", msg)
				}
			}
		})
	}
}

func TestGitAuthFromDirEncryptedKey(t *testing.T) {
	const passphrase = "correct horse"
	key := encryptedKey(t, passphrase)
	_, pub := testKey(t)
	knownHosts := "github.com " + string(ssh.MarshalAuthorizedKey(pub))
	for _, tt := range []struct {
		name, password, want string
	}{
		{"the passphrase", passphrase + "\n", ""},
		{"no passphrase", "", "DIR/identity is encrypted and DIR/password is missing or empty: put the key's passphrase there"},
		{"a wrong passphrase", testPassword, "DIR/identity: the passphrase in DIR/password does not decrypt the key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := secretDirWith(t, map[string]string{"identity": key, "known_hosts": knownHosts, "password": tt.password})
			auth, err := GitAuthFromDir(dir, "git@github.com:org/fleet", GitAuthOptions{})
			if tt.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				if a, ok := auth.(*gitssh.PublicKeys); !ok || a.Signer == nil {
					t.Errorf("auth = %#v", auth)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			if msg := strings.ReplaceAll(err.Error(), dir, "DIR"); !strings.Contains(msg, tt.want) || strings.Contains(msg, testPassword) {
				t.Errorf("error %q\nwant it to contain %q, and no passphrase", msg, tt.want)
			}
		})
	}
}

func TestGitAuthFromDirNotADirectory(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "nope")
	if _, err := GitAuthFromDir(missing, "https://github.com/org/fleet", GitAuthOptions{}); err == nil || !strings.Contains(err.Error(), missing) {
		t.Errorf("missing directory: error %v", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := GitAuthFromDir(file, "https://github.com/org/fleet", GitAuthOptions{}); err == nil || !strings.Contains(err.Error(), file+" is not a directory") {
		t.Errorf("a file: error %v", err)
	}
}

// gitHTTPServer serves the repositories under root with git http-backend
// (smart HTTP) on a loopback address, answering 401 to requests that
// authorize lets through. It returns the server's URL and the
// Authorization headers it saw.
func gitHTTPServer(t *testing.T, root string, authorize func(*http.Request) bool) (string, func() []string) {
	t.Helper()
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Skip("needs git http-backend")
	}
	if err := exec.Command(gitBin, "http-backend", "--help").Run(); err != nil {
		var exit *exec.ExitError
		if !errors.As(err, &exit) {
			t.Skipf("needs git http-backend: %v", err)
		}
	}
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"}, Env: []string{
		"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1", "HOME=" + t.TempDir(), "GIT_CONFIG_NOSYSTEM=1",
	}}
	var (
		mu   sync.Mutex
		seen []string
	)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("Authorization"))
		mu.Unlock()
		if !authorize(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "who are you?", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seen...)
	}
}

func TestLoadGitHTTPAuth(t *testing.T) {
	r := newTestRepo(t)
	basicOK := func(req *http.Request) bool {
		u, p, ok := req.BasicAuth()
		return ok && u == "git" && p == testPassword
	}
	base, seen := gitHTTPServer(t, filepath.Dir(r.dir), basicOK)
	u := base + "/" + filepath.Base(r.dir)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()

	dir := secretDirWith(t, map[string]string{"username": "git", "password": testPassword})
	if _, err := GitAuthFromDir(dir, u, GitAuthOptions{}); !errors.Is(err, ErrGitInsecure) {
		t.Fatalf("credentials over http:// without InsecureHTTP: err = %v", err)
	}
	auth, err := GitAuthFromDir(dir, u, GitAuthOptions{InsecureHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	src := GitSource{URL: u, Ref: "feature", Path: "deploy/app/feature.yaml", Auth: auth}
	objs, rev, err := LoadGit(ctx, src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "feature@sha1:" + r.third; rev.String() != want || len(objs) != 1 {
		t.Errorf("revision %s, %d objects; want %s, 1", rev, len(objs), want)
	}
	got, err := ResolveGit(ctx, src)
	if err != nil || *got != *rev {
		t.Errorf("ResolveGit = %v, %v; want %v", got, err, rev)
	}
	if len(seen()) == 0 {
		t.Fatal("the server saw no request")
	}
	for _, h := range seen() {
		if u, p, ok := (&http.Request{Header: http.Header{"Authorization": {h}}}).BasicAuth(); !ok || u != "git" || p != testPassword {
			t.Errorf("a request had Authorization %q", h)
		}
	}

	for _, tt := range []struct {
		name string
		auth transport.AuthMethod
		want string
	}{
		{"no credentials", nil, "cannot list the refs of Git repository: authentication required: who are you? (no credentials were given)"},
		{"a wrong password", &githttp.BasicAuth{Username: "git", Password: "wrong"}, "cannot list the refs of Git repository: authentication required: who are you? (the credentials were refused)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			src := GitSource{URL: u, Ref: "main", Auth: tt.auth}
			_, _, err := LoadGit(ctx, src, Options{})
			checkErrors(t, err, transport.ErrAuthenticationRequired, u+": "+tt.want)
			_, err = ResolveGit(ctx, src)
			checkErrors(t, err, transport.ErrAuthenticationRequired, u+": "+tt.want)
			// Without a ref there is no ls-remote: the clone asks.
			_, _, err = LoadGit(ctx, GitSource{URL: u, Auth: tt.auth}, Options{})
			checkErrors(t, err, transport.ErrAuthenticationRequired, "cannot clone Git repository: authentication required")
		})
	}
}

func TestLoadGitHTTPBearer(t *testing.T) {
	r := newTestRepo(t)
	base, _ := gitHTTPServer(t, filepath.Dir(r.dir), func(req *http.Request) bool {
		return req.Header.Get("Authorization") == "Bearer "+testToken
	})
	u := base + "/" + filepath.Base(r.dir)
	auth, err := GitAuthFromDir(secretDirWith(t, map[string]string{"bearerToken": testToken}), u, GitAuthOptions{InsecureHTTP: true})
	if err != nil {
		t.Fatal(err)
	}
	_, rev, err := LoadGit(context.Background(), GitSource{URL: u, Path: "deploy/app/new.yaml", Auth: auth}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if want := "main@sha1:" + r.second; rev.String() != want {
		t.Errorf("revision %s, want %s", rev, want)
	}
}
