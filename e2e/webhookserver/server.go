// Package webhookserver is the e2e suite's admission webhook: an HTTPS
// server on 127.0.0.1 with a CA generated at start, whose behaviour is
// chosen by the request path, so a case's webhook configuration alone says
// what the webhook does. kube-apiserver (e2e/apiserver) and truce call the
// same server; see e2e/README.md ("Webhooks").
//
// Paths (segments are URL-path-decoded; service-backed webhooks only allow
// DNS-1123 segments, so values with ':' or spaces need URL webhooks):
//
//	/allow                         allow, no patch
//	/add-label/KEY/VALUE           JSONPatch: set metadata.labels[KEY]=VALUE
//	/add-annotation/KEY/VALUE      JSONPatch: set metadata.annotations[KEY]=VALUE
//	/annotate-once/KEY/VALUE       JSONPatch: add the annotation only if absent (idempotent)
//	/copy-label/LABEL/ANNOTATION   if label LABEL is set and annotation ANNOTATION is not,
//	                               add the annotation with the label's value (shows reinvocation)
//	/replace-image/IMAGE...        JSONPatch: every container image (Pod, or a pod template) := IMAGE
//	                               (the rest of the path, slashes included)
//	/deny/CODE/MESSAGE             deny with status code CODE and MESSAGE
//	/warn/W1/W2...                 allow with warnings W1, W2, ...
//	/audit/K1/V1/K2/V2...          allow with auditAnnotations K1=V1, ...
//	/sleep/SECONDS                 sleep, then allow (for timeoutSeconds)
//	/label-managers/LABEL          JSONPatch: set label LABEL to the managers of the object's
//	                               metadata.managedFields, sorted and joined by "."; "none" without
//	/require-manager/NAME          deny (403) unless metadata.managedFields has an entry of manager NAME
//	/remove/SEG...                 JSONPatch: remove the field at /SEG/... (if it is there)
//	/set/JSON/SEG...               JSONPatch: add the JSON value at /SEG/... (its parent must exist)
//	/malformed                     200 with a body that is not JSON
//	/error500                      HTTP 500
package webhookserver

import (
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/truce-dev/truce/internal/certs"
)

// Server is a running webhook server.
type Server struct {
	// URL is https://127.0.0.1:PORT (no trailing slash).
	URL string
	// CABundle is the PEM of the CA that signed the serving certificate,
	// for a webhook's clientConfig.caBundle.
	CABundle []byte

	srv  *http.Server
	ln   net.Listener
	done chan struct{}

	mu       sync.Mutex
	requests []Request
}

// Request is a review the server answered, for debugging and tests.
type Request struct {
	Path      string
	Operation string
	DryRun    bool
	Kind      string
	Name      string
}

// Start generates a CA and a serving certificate for 127.0.0.1 and dnsNames
// (e.g. "SVC.NS.svc", or "*.NS.svc" for every service of a namespace) and
// serves on a free port of 127.0.0.1.
func Start(dnsNames []string) (*Server, error) {
	ca, pair, err := certs.Loopback(dnsNames...)
	if err != nil {
		return nil, err
	}
	caPEM := ca.PEM
	cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &Server{
		URL:      "https://" + ln.Addr().String(),
		CABundle: caPEM,
		ln:       ln,
		done:     make(chan struct{}),
	}
	s.srv = &http.Server{
		Handler:           http.HandlerFunc(s.serve),
		TLSConfig:         &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12},
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          nil,
	}
	go func() {
		defer close(s.done)
		_ = s.srv.ServeTLS(ln, "", "")
	}()
	return s, nil
}

// Close stops the server (sleeping handlers return at once).
func (s *Server) Close() error {
	err := s.srv.Close()
	<-s.done
	if errors.Is(err, http.ErrServerClosed) {
		err = nil
	}
	return err
}

// Requests returns the reviews answered so far.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	segs := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	switch segs[0] {
	case "error500":
		http.Error(w, "truce-e2e webhook: internal error on purpose", http.StatusInternalServerError)
		return
	case "malformed":
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": {`)
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, 16<<20))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	review := &admissionv1.AdmissionReview{}
	if err := json.Unmarshal(body, review); err != nil || review.Request == nil {
		http.Error(w, fmt.Sprintf("not an AdmissionReview: %v", err), http.StatusBadRequest)
		return
	}
	req := review.Request
	s.mu.Lock()
	s.requests = append(s.requests, Request{
		Path: r.URL.Path, Operation: string(req.Operation), DryRun: req.DryRun != nil && *req.DryRun,
		Kind: req.Kind.Kind, Name: req.Name,
	})
	s.mu.Unlock()

	resp, err := respond(r, segs, req)
	if err != nil {
		http.Error(w, "truce-e2e webhook: "+err.Error(), http.StatusBadRequest)
		return
	}
	resp.UID = req.UID
	out, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Response: resp,
	})
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(out)
}

// respond computes the response for the behaviour named by segs.
func respond(r *http.Request, segs []string, req *admissionv1.AdmissionRequest) (*admissionv1.AdmissionResponse, error) {
	allow := &admissionv1.AdmissionResponse{Allowed: true}
	args := segs[1:]
	need := func(n int) error {
		if len(args) < n {
			return fmt.Errorf("%s needs %d path segments, got %d", segs[0], n, len(args))
		}
		return nil
	}
	var obj map[string]any
	if len(req.Object.Raw) > 0 {
		if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
			return nil, fmt.Errorf("decode object: %w", err)
		}
	}
	switch segs[0] {
	case "allow":
		return allow, nil
	case "add-label", "add-annotation", "annotate-once":
		if err := need(2); err != nil {
			return nil, err
		}
		field := "labels"
		if segs[0] != "add-label" {
			field = "annotations"
		}
		if segs[0] == "annotate-once" {
			if _, ok := metaMap(obj, "annotations")[args[0]]; ok {
				return allow, nil
			}
		}
		return withPatch(allow, setMetaPatch(obj, field, args[0], args[1]))
	case "copy-label":
		if err := need(2); err != nil {
			return nil, err
		}
		v, ok := metaMap(obj, "labels")[args[0]]
		if !ok {
			return allow, nil
		}
		if _, ok := metaMap(obj, "annotations")[args[1]]; ok {
			return allow, nil
		}
		return withPatch(allow, setMetaPatch(obj, "annotations", args[1], fmt.Sprint(v)))
	case "replace-image":
		if err := need(1); err != nil {
			return nil, err
		}
		image := strings.Join(args, "/")
		var ops []map[string]any
		for _, prefix := range [][]string{{"spec"}, {"spec", "template", "spec"}} {
			spec := nested(obj, prefix...)
			for _, list := range []string{"initContainers", "containers"} {
				cs, _ := spec[list].([]any)
				for i := range cs {
					ops = append(ops, map[string]any{
						"op":    "replace",
						"path":  "/" + strings.Join(prefix, "/") + "/" + list + "/" + strconv.Itoa(i) + "/image",
						"value": image,
					})
				}
			}
		}
		if len(ops) == 0 {
			return allow, nil
		}
		return withPatch(allow, ops)
	case "deny":
		if err := need(2); err != nil {
			return nil, err
		}
		code, err := strconv.Atoi(args[0])
		if err != nil {
			return nil, fmt.Errorf("deny: code %q: %w", args[0], err)
		}
		return &admissionv1.AdmissionResponse{
			Allowed: false,
			Result:  &metav1.Status{Code: int32(code), Message: strings.Join(args[1:], "/")},
		}, nil
	case "warn":
		allow.Warnings = append([]string(nil), args...)
		return allow, nil
	case "audit":
		if len(args)%2 != 0 {
			return nil, errors.New("audit needs KEY/VALUE pairs")
		}
		allow.AuditAnnotations = map[string]string{}
		for i := 0; i < len(args); i += 2 {
			allow.AuditAnnotations[args[i]] = args[i+1]
		}
		return allow, nil
	case "label-managers":
		if err := need(1); err != nil {
			return nil, err
		}
		managers := managersOf(obj)
		value := "none"
		if len(managers) > 0 {
			value = strings.Join(managers, ".")
		}
		return withPatch(allow, setMetaPatch(obj, "labels", args[0], value))
	case "require-manager":
		if err := need(1); err != nil {
			return nil, err
		}
		if slices.Contains(managersOf(obj), args[0]) {
			return allow, nil
		}
		return &admissionv1.AdmissionResponse{
			Allowed: false,
			Result: &metav1.Status{Code: http.StatusForbidden, Message: fmt.Sprintf("no managedFields entry of %s (managers: %s)",
				args[0], strings.Join(managersOf(obj), ", "))},
		}, nil
	case "remove":
		if err := need(1); err != nil {
			return nil, err
		}
		if !has(obj, args) {
			return allow, nil
		}
		return withPatch(allow, []map[string]any{{"op": "remove", "path": pointer(args)}})
	case "set":
		if err := need(2); err != nil {
			return nil, err
		}
		var value any
		if err := json.Unmarshal([]byte(args[0]), &value); err != nil {
			return nil, fmt.Errorf("set: value %q is not JSON: %w", args[0], err)
		}
		return withPatch(allow, []map[string]any{{"op": "add", "path": pointer(args[1:]), "value": value}})
	case "sleep":
		if err := need(1); err != nil {
			return nil, err
		}
		secs, err := strconv.ParseFloat(args[0], 64)
		if err != nil {
			return nil, err
		}
		select {
		case <-time.After(time.Duration(secs * float64(time.Second))):
		case <-r.Context().Done():
		}
		return allow, nil
	}
	return nil, fmt.Errorf("unknown behaviour %q", segs[0])
}

// managersOf returns the distinct managers of obj's managedFields, sorted.
func managersOf(obj map[string]any) []string {
	entries, _ := nested(obj, "metadata")["managedFields"].([]any)
	var out []string
	for _, e := range entries {
		if m, ok := e.(map[string]any)["manager"].(string); ok && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// has reports whether obj has a field at path.
func has(obj map[string]any, path []string) bool {
	parent := nested(obj, path[:len(path)-1]...)
	_, ok := parent[path[len(path)-1]]
	return ok
}

// pointer is the JSON pointer of path.
func pointer(path []string) string {
	var b strings.Builder
	for _, p := range path {
		b.WriteString("/" + escapePointer(p))
	}
	return b.String()
}

func nested(obj map[string]any, path ...string) map[string]any {
	cur := obj
	for _, p := range path {
		next, _ := cur[p].(map[string]any)
		if next == nil {
			return nil
		}
		cur = next
	}
	return cur
}

func metaMap(obj map[string]any, field string) map[string]any {
	return nested(obj, "metadata", field)
}

// setMetaPatch returns JSONPatch operations setting metadata.FIELD[key].
func setMetaPatch(obj map[string]any, field, key, value string) []map[string]any {
	if metaMap(obj, field) == nil {
		return []map[string]any{{"op": "add", "path": "/metadata/" + field, "value": map[string]any{key: value}}}
	}
	return []map[string]any{{"op": "add", "path": "/metadata/" + field + "/" + escapePointer(key), "value": value}}
}

func escapePointer(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func withPatch(resp *admissionv1.AdmissionResponse, ops []map[string]any) (*admissionv1.AdmissionResponse, error) {
	patch, err := json.Marshal(ops)
	if err != nil {
		return nil, err
	}
	pt := admissionv1.PatchTypeJSONPatch
	resp.Patch = bytes.TrimSpace(patch)
	resp.PatchType = &pt
	return resp, nil
}
