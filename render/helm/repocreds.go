package helm

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"

	"helm.sh/helm/v4/pkg/getter"
	repo "helm.sh/helm/v4/pkg/repo/v1"

	"github.com/truce-dev/truce/render"
)

// repoEntry is the HTTP chart repository at repoURL with the credentials
// the repositories file (Helm's --repository-config, repositories.yaml as
// `helm repo add` writes it) has for that URL; without a file or an entry
// for the URL, the repository is read anonymously, as `helm pull --repo`
// reads it.
func (p *Puller) repoEntry(name, repoURL string) (*repo.Entry, error) {
	e := &repo.Entry{Name: name, URL: repoURL}
	if p.RepositoryConfig == "" {
		return e, nil
	}
	f, err := repo.LoadFile(p.RepositoryConfig)
	if err != nil {
		return nil, fmt.Errorf("--repository-config: %w", err)
	}
	for _, r := range f.Repositories {
		if sameRepoURL(r.URL, repoURL) {
			c := *r
			c.Name = name
			c.URL = repoURL
			return &c, nil
		}
	}
	return e, nil
}

// sameHost is Helm's rule for sending a repository's basic auth with a
// request: the same scheme and host as the repository's URL.
func sameHost(href, repoURL string) bool {
	a, err1 := url.Parse(href)
	b, err2 := url.Parse(repoURL)
	return err1 == nil && err2 == nil && a.Scheme == b.Scheme && a.Host == b.Host
}

func sameRepoURL(a, b string) bool {
	return strings.TrimSuffix(a, "/") == strings.TrimSuffix(b, "/")
}

// hasCredentials reports whether e authenticates the client.
func hasCredentials(e *repo.Entry) bool {
	return e.Username != "" || e.Password != "" || e.CertFile != ""
}

// credentialsOf names where the credentials of e came from, for messages;
// never their values.
func (p *Puller) credentialsOf(e *repo.Entry) string {
	if hasCredentials(e) {
		return "--repository-config " + p.RepositoryConfig
	}
	return "none (anonymous; pass them with --repository-config, a Helm repositories.yaml)"
}

// getterOptions are the options a getter needs to read from e: its
// credentials, as Helm passes them (basic auth only to e's host unless
// pass_credentials_all), and the session's transport with e's TLS
// settings.
func (s *session) getterOptions(e *repo.Entry) ([]getter.Option, error) {
	t, err := s.transportFor(e)
	if err != nil {
		return nil, err
	}
	opts := []getter.Option{getter.WithURL(e.URL), getter.WithTransport(t), getter.WithPassCredentialsAll(e.PassCredentialsAll)}
	if e.Username != "" || e.Password != "" {
		opts = append(opts, getter.WithBasicAuth(e.Username, e.Password))
	}
	return opts, nil
}

// transportFor is the session's transport, with e's CA, client
// certificate and insecure_skip_tls_verify when it has them. Helm's getter
// applies those only to a transport of its own; the session's keeps the
// offline rule, the context and the download budget.
func (s *session) transportFor(e *repo.Entry) (*http.Transport, error) {
	if e.CAFile == "" && e.CertFile == "" && !e.InsecureSkipTLSVerify {
		return s.transport, nil
	}
	cfg := &tls.Config{InsecureSkipVerify: e.InsecureSkipTLSVerify} //nolint:gosec // the user's repositories.yaml asks for it
	if e.CAFile != "" {
		pem, err := os.ReadFile(e.CAFile)
		if err != nil {
			return nil, fmt.Errorf("--repository-config: caFile of %s: %w", redactURL(e.URL), err)
		}
		cfg.RootCAs = x509.NewCertPool()
		if !cfg.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("--repository-config: caFile %s of %s holds no PEM certificate", e.CAFile, redactURL(e.URL))
		}
	}
	if e.CertFile != "" || e.KeyFile != "" {
		pair, err := tls.LoadX509KeyPair(e.CertFile, e.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("--repository-config: client certificate of %s: %w", redactURL(e.URL), err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	}
	t := s.transport.Clone()
	t.TLSClientConfig = cfg
	return t, nil
}

// refused is a *render.Unpredictable for subject when the repository
// answers href with 401 or 403 for e's credentials: the cluster's tool may
// hold credentials truce does not, so what it would render is unknown.
// Helm's getter reports a status only as text; one more request with the
// same credentials reads it as a number.
func (p *Puller) refused(s *session, e *repo.Entry, href, subject string) error {
	if s.offline || s.ctx.Err() != nil {
		return nil
	}
	t, err := s.transportFor(e)
	if err != nil {
		return nil
	}
	req, err := http.NewRequestWithContext(s.ctx, http.MethodGet, href, http.NoBody)
	if err != nil {
		return nil
	}
	if (e.Username != "" || e.Password != "") && (e.PassCredentialsAll || sameHost(href, e.URL)) {
		req.SetBasicAuth(e.Username, e.Password)
	}
	resp, err := (&http.Client{Transport: t}).Do(req)
	if err != nil {
		return nil
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized && resp.StatusCode != http.StatusForbidden {
		return nil
	}
	return &render.Unpredictable{Subject: subject, Reason: fmt.Sprintf("chart repository %s refused access (%s) with credentials: %s", redactURL(e.URL), resp.Status, p.credentialsOf(e))}
}

// CheckRepositoryConfig reads path as a Helm repositories file, so that a
// bad --repository-config is refused before any work.
func CheckRepositoryConfig(path string) error {
	_, err := repo.LoadFile(path)
	return err
}
