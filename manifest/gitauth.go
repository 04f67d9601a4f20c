package manifest

import (
	"bytes"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"github.com/go-git/go-git/v5/plumbing/transport"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	"golang.org/x/crypto/ssh"
)

// ErrGitInsecure classifies the errors of GitAuthFromDir that a
// GitAuthOptions field would lift: credentials for a plain http:// URL,
// an SSH URL without known_hosts.
var ErrGitInsecure = errors.New("insecure Git transport")

// insecureError matches ErrGitInsecure without prefixing its message.
type insecureError string

func (e insecureError) Error() string      { return string(e) }
func (insecureError) Is(target error) bool { return target == ErrGitInsecure }

// The files of a Flux Git secret (the Secret a GitRepository's
// spec.secretRef names), one per key when the Secret is mounted as a
// volume.
const (
	gitSecretUsername    = "username"
	gitSecretPassword    = "password"
	gitSecretBearerToken = "bearerToken"
	gitSecretIdentity    = "identity"
	gitSecretKnownHosts  = "known_hosts"
)

// GitAuthOptions loosen what GitAuthFromDir accepts. Both are off by
// default, as in Flux.
type GitAuthOptions struct {
	// InsecureHTTP lets credentials go to a plain http:// URL, where
	// they cross the network in clear text.
	InsecureHTTP bool
	// InsecureIgnoreHostKey accepts any SSH host key when the directory
	// holds no known_hosts, so that anyone between truce and the server
	// can pose as the server.
	InsecureIgnoreHostKey bool
}

// GitAuthFromDir builds the credentials for the repository at repoURL (a
// GitSource.URL) from a directory laid out like a Flux Git secret mounted
// as a volume, one file per key:
//
//   - https:// and http:// URLs: bearerToken, sent as an HTTP bearer
//     token, or else username and password, sent as HTTP basic
//     authentication (a personal access token goes in password). A
//     bearerToken wins over username and password, as in Flux.
//   - ssh:// and user@host:path URLs: identity, a PEM private key, with
//     password as its passphrase when it is encrypted, and known_hosts,
//     the keys the server may present. The user is the URL's, else "git".
//     identity.pub is not needed.
//
// Files of the other transport are not read, so one directory can serve
// both, as one Flux Secret can. Empty files count as missing; trailing
// newlines of username, password and bearerToken are dropped (files
// written with echo, or kubectl create secret --from-file, have one).
//
// It refuses to send credentials to a plain http:// URL unless
// opts.InsecureHTTP, and an SSH URL without known_hosts unless
// opts.InsecureIgnoreHostKey: those errors match ErrGitInsecure. It also
// refuses a known_hosts without a key for the URL's host, a key it cannot
// parse or decrypt, a password without a username, a directory without the
// files the URL's transport needs, and local repositories, which are read
// without credentials. Errors name the files, never what they hold.
//
// The files are read once: call it again to see a rotated secret.
func GitAuthFromDir(dir, repoURL string, opts GitAuthOptions) (transport.AuthMethod, error) {
	if info, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("reading the Git credentials: %w", err)
	} else if !info.IsDir() {
		return nil, fmt.Errorf("reading the Git credentials: %s is not a directory", dir)
	}
	ep, err := transport.NewEndpoint(repoURL)
	if err == nil && isRemoteURL(repoURL) {
		switch ep.Protocol {
		case "https", "http":
			return secretDir(dir).httpAuth(ep, opts)
		case "ssh":
			return secretDir(dir).sshAuth(ep, opts)
		}
	}
	return nil, fmt.Errorf("credentials are for https://, http:// and SSH URLs; %s is read without them", repoURL)
}

// secretDir is a directory holding a mounted secret.
type secretDir string

func (d secretDir) path(key string) string { return filepath.Join(string(d), key) }

// read returns the content of the file key, nil when it is missing or
// empty. Errors carry the path, never the content.
func (d secretDir) read(key string) ([]byte, error) {
	data, err := os.ReadFile(d.path(key))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading the Git credentials: %w", err)
	case len(data) == 0:
		return nil, nil
	}
	return data, nil
}

// readLine reads a single-value file without its trailing newlines.
func (d secretDir) readLine(key string) (string, error) {
	data, err := d.read(key)
	return string(bytes.TrimRight(data, "\r\n")), err
}

func (d secretDir) httpAuth(ep *transport.Endpoint, opts GitAuthOptions) (transport.AuthMethod, error) {
	token, err := d.readLine(gitSecretBearerToken)
	if err != nil {
		return nil, err
	}
	user, err := d.readLine(gitSecretUsername)
	if err != nil {
		return nil, err
	}
	password, err := d.readLine(gitSecretPassword)
	if err != nil {
		return nil, err
	}
	var (
		auth  transport.AuthMethod
		files string
	)
	switch {
	case token != "":
		auth, files = &githttp.TokenAuth{Token: token}, d.path(gitSecretBearerToken)
	case user != "":
		auth, files = &githttp.BasicAuth{Username: user, Password: password}, d.path(gitSecretUsername)
		if password != "" {
			files += " and " + d.path(gitSecretPassword)
		}
	case password != "":
		return nil, fmt.Errorf("%s is set but %s is missing or empty: HTTP basic authentication needs both (for a token, any username the server accepts, such as git)",
			d.path(gitSecretPassword), d.path(gitSecretUsername))
	default:
		return nil, fmt.Errorf("%s holds no credentials for %s://: want %s, or %s and %s", d, ep.Protocol,
			gitSecretBearerToken, gitSecretUsername, gitSecretPassword)
	}
	if ep.Protocol == "http" && !opts.InsecureHTTP {
		return nil, insecureError(fmt.Sprintf("refusing to send the credentials of %s to %s over plain http://: they would cross the network in clear text; use https://",
			files, ep.Host))
	}
	return auth, nil
}

func (d secretDir) sshAuth(ep *transport.Endpoint, opts GitAuthOptions) (transport.AuthMethod, error) {
	identity, err := d.read(gitSecretIdentity)
	if err != nil {
		return nil, err
	}
	if identity == nil {
		return nil, fmt.Errorf("%s is missing or empty: SSH URLs need a private key", d.path(gitSecretIdentity))
	}
	passphrase, err := d.readLine(gitSecretPassword)
	if err != nil {
		return nil, err
	}
	user := ep.User
	if user == "" {
		user = gitssh.DefaultUsername
	}
	signer, err := d.parseKey(identity, passphrase)
	if err != nil {
		return nil, err
	}
	auth := &gitssh.PublicKeys{User: user, Signer: signer}

	port := ep.Port
	if port == 0 {
		port = 22
	}
	host := net.JoinHostPort(ep.Host, strconv.Itoa(port))
	knownHosts := d.path(gitSecretKnownHosts)
	data, err := d.read(gitSecretKnownHosts)
	switch {
	case err != nil:
		return nil, err
	case data == nil && opts.InsecureIgnoreHostKey:
		auth.HostKeyCallback = ssh.InsecureIgnoreHostKey()
		return auth, nil
	case data == nil:
		return nil, insecureError(fmt.Sprintf("%s is missing or empty: refusing to connect to %s without knowing its host key (ssh-keyscan %s prints the keys to check and put there)",
			knownHosts, ep.Host, ep.Host))
	}
	db, err := gitssh.NewKnownHostsDb(knownHosts)
	if err != nil {
		// The parser names the file and the line.
		return nil, fmt.Errorf("reading the SSH known hosts: %w", err)
	}
	// Offering only the algorithms of the known keys makes the server
	// present one of them, rather than another one the check would
	// then refuse.
	algorithms := db.HostKeyAlgorithms(host)
	if len(algorithms) == 0 {
		return nil, fmt.Errorf("%s has no key for %s (ssh-keyscan %s prints the keys to check and add)", knownHosts, host, ep.Host)
	}
	auth.HostKeyCallback = db.HostKeyCallback()
	auth.HostKeyAlgorithms = algorithms
	return auth, nil
}

// parseKey parses identity, decrypting it with passphrase when it is
// encrypted. Errors name the files, not what they hold.
func (d secretDir) parseKey(identity []byte, passphrase string) (ssh.Signer, error) {
	path := d.path(gitSecretIdentity)
	signer, err := ssh.ParsePrivateKey(identity)
	var missing *ssh.PassphraseMissingError
	if errors.As(err, &missing) {
		if passphrase == "" {
			return nil, fmt.Errorf("%s is encrypted and %s is missing or empty: put the key's passphrase there", path, d.path(gitSecretPassword))
		}
		signer, err = ssh.ParsePrivateKeyWithPassphrase(identity, []byte(passphrase))
		if errors.Is(err, x509.IncorrectPasswordError) {
			return nil, fmt.Errorf("%s: the passphrase in %s does not decrypt the key", path, d.path(gitSecretPassword))
		}
	}
	if err != nil {
		// The parser says what is wrong with the key's structure ("ssh:
		// no key found", an unsupported key type), not what it holds.
		return nil, fmt.Errorf("%s is not a PEM private key truce can use: %w", path, err)
	}
	return signer, nil
}
