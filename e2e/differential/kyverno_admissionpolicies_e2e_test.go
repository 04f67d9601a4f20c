//go:build e2e

package differential

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/engine/kyverno"
)

// TestKyvernoAdmissionPolicies runs the Kyverno cases of
// e2e/testdata/kyverno on kube-apiserver v1.37.2 holding what Kyverno
// installs for the case's policies: the ValidatingAdmissionPolicies and
// MutatingAdmissionPolicies (with bindings) its generator writes, which the
// server's own plugins evaluate, and its webhook configurations, served by
// the engine (Kyverno's admission handlers in the helper) on loopback. It
// compares the server's answers with `truce admit`, which installs the
// same objects in its own chain. The helper is $TRUCE_KYVERNO (make e2e).
func TestKyvernoAdmissionPolicies(t *testing.T) {
	cases, err := LoadCases(filepath.Join("..", "testdata", "kyverno"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	truceBin := truceBinary(t)
	eng := kyverno.New(kyverno.Options{})
	t.Cleanup(eng.Close)
	for _, c := range cases {
		t.Run(c.ID(), func(t *testing.T) {
			if c.Spec.Description != "" {
				t.Log(c.Spec.Description)
			}
			srv := serverFor(ctx, t, c)
			var cluster []*unstructured.Unstructured
			for _, d := range c.Cluster {
				cluster = append(cluster, d.Object)
			}
			// Kyverno's namespace selectors read the server's namespaces
			// (the harness's sentinel namespace) and the case's.
			nss, err := kubernetes.NewForConfigOrDie(srv.RESTConfig()).CoreV1().Namespaces().List(ctx, metav1.ListOptions{})
			if err != nil {
				t.Fatal(err)
			}
			seen := append([]*unstructured.Unstructured(nil), cluster...)
			for i := range nss.Items {
				m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&nss.Items[i])
				if err != nil {
					t.Fatal(err)
				}
				u := &unstructured.Unstructured{Object: m}
				u.SetAPIVersion("v1")
				u.SetKind("Namespace")
				seen = append(seen, u)
			}
			inst, err := eng.Install(ctx, seen)
			if err != nil {
				t.Fatal(err)
			}
			// Kyverno's Services (its admission controller's and its
			// cleanup controller's), served on loopback.
			for svc, hook := range inst.Webhooks {
				svcNS, svcName, _ := strings.Cut(svc, "/")
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					t.Fatal(err)
				}
				hs := &http.Server{Handler: hook.Handler, TLSConfig: &tls.Config{Certificates: []tls.Certificate{hook.Certificate}, MinVersion: tls.VersionTLS12}}
				go func() { _ = hs.ServeTLS(l, "", "") }()
				if err := apiserver.WebhookServices.Set(svcNS, svcName, "https://"+l.Addr().String()); err != nil {
					t.Fatal(err)
				}
				// Cleanups run last-in first-out: the server is cleaned
				// while the webhook still answers.
				t.Cleanup(func() {
					apiserver.WebhookServices.Delete(svcNS, svcName)
					_ = hs.Close()
				})
			}
			useCleanServer(ctx, t, srv)
			// The server gets the namespaces and what Kyverno writes into
			// admissionregistration.k8s.io; its policies and CRDs
			// configure the engine, installed above.
			// Of its CRDs, only the written object's is needed: a case
			// that writes a policy meets the webhooks Kyverno guards its
			// own objects with.
			written := c.Write.Object.GroupVersionKind()
			var apply []*unstructured.Unstructured
			generated := 0
			for _, o := range append(cluster, inst.Objects...) {
				switch {
				case o.GetKind() == "Namespace", o.GroupVersionKind().Group == "admissionregistration.k8s.io":
					apply = append(apply, o)
					if strings.HasSuffix(o.GetKind(), "AdmissionPolicy") {
						generated++
					}
				case o.GetKind() == "CustomResourceDefinition" && kyverno.IsKyvernoKind(written.GroupKind()):
					group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
					kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
					if group == written.Group && kind == written.Kind {
						apply = append(apply, o)
					}
				}
			}
			t.Logf("Kyverno generated %d admission policies", generated)
			if err := srv.Apply(ctx, apply...); err != nil {
				t.Fatalf("apply: %v", err)
			}
			if err := srv.WaitForAdmissionSync(ctx); err != nil {
				t.Fatal(err)
			}
			res, ann := serverDryRun(ctx, t, srv, c)
			server := ServerResult(c, res, ann)
			serverJSON := mustJSON(t, Output{Results: []Result{server}})
			for _, d := range CheckExpect(c.Spec.Expect, server) {
				t.Errorf("case expectation: %s", d)
			}
			if truceBin == "" {
				t.Logf("server result:\n%s", serverJSON)
				return
			}
			got, raw, _, err := runTruce(ctx, truceBin, c)
			if err != nil {
				t.Fatal(err)
			}
			// A webhook Kyverno answers with what it could not decide
			// offline (an ImageValidatingPolicy's registry) is one truce
			// must name unpredictable.
			diffs := Compare(server, got, CompareOptions{AuditLevel: auditLevel, UnpredictableWebhooks: c.Spec.UnpredictableWebhooks})
			for _, d := range diffs {
				t.Errorf("truce differs from kube-apiserver: %s", d)
			}
			if len(diffs) > 0 || testing.Verbose() {
				t.Logf("server result:\n%s\ntruce result:\n%s", serverJSON, raw)
			}
		})
	}
}
