//go:build e2e

package differential

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"

	"github.com/truce-dev/truce/e2e/apiserver"
	"github.com/truce-dev/truce/engine/gatekeeper"
)

// TestGatekeeper runs the Gatekeeper cases (e2e/testdata/gatekeeper) on
// kube-apiserver v1.37.2 calling the engine's webhooks over the network,
// with the webhook configurations, CRDs and constraint CRDs the engine
// installs, and compares its answers with `truce admit`, which serves the
// same engine in process.
func TestGatekeeper(t *testing.T) {
	cases, err := LoadCases(filepath.Join("..", "testdata", "gatekeeper"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	truceBin := truceBinary(t)
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
			// The server's Gatekeeper: the engine configured by the case,
			// served on loopback for its Service.
			eng, err := gatekeeper.New()
			if err != nil {
				t.Fatal(err)
			}
			// Gatekeeper reads namespaces from its cache of the cluster:
			// the server's (the harness's sentinel namespace) and the
			// case's.
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
			hook := inst.Webhooks[gatekeeper.Namespace+"/"+gatekeeper.Service]
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			hs := &http.Server{Handler: hook.Handler, TLSConfig: &tls.Config{Certificates: []tls.Certificate{hook.Certificate}, MinVersion: tls.VersionTLS12}}
			go func() { _ = hs.ServeTLS(l, "", "") }()
			if err := apiserver.WebhookServices.Set(gatekeeper.Namespace, gatekeeper.Service, "https://"+l.Addr().String()); err != nil {
				t.Fatal(err)
			}
			// Cleanups run last-in first-out: the server is cleaned while
			// the webhook still answers (check-ignore-label fails closed).
			t.Cleanup(func() {
				apiserver.WebhookServices.Delete(gatekeeper.Namespace, gatekeeper.Service)
				_ = hs.Close()
			})
			useCleanServer(ctx, t, srv)
			// The server needs what routes writes to the engine: the
			// namespaces and the webhook configurations. Gatekeeper's own
			// objects and CRDs configure the engine, already installed
			// above (creating and deleting 17 CRDs per case only slows
			// the server's cleanup); only the CRD of a Gatekeeper object
			// the case writes is needed.
			written := c.Write.Object.GroupVersionKind()
			var apply []*unstructured.Unstructured
			for _, o := range append(cluster, inst.Objects...) {
				switch {
				case o.GetKind() == "Namespace", o.GroupVersionKind().Group == "admissionregistration.k8s.io":
					apply = append(apply, o)
				case o.GetKind() == "CustomResourceDefinition" && gatekeeper.Reads(written.Group):
					group, _, _ := unstructured.NestedString(o.Object, "spec", "group")
					kind, _, _ := unstructured.NestedString(o.Object, "spec", "names", "kind")
					if group == written.Group && kind == written.Kind {
						apply = append(apply, o)
					}
				}
			}
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
			diffs := Compare(server, got, CompareOptions{AuditLevel: auditLevel})
			for _, d := range diffs {
				t.Errorf("truce differs from kube-apiserver: %s", d)
			}
			if len(diffs) > 0 || testing.Verbose() {
				t.Logf("server result:\n%s\ntruce result:\n%s", serverJSON, raw)
			}
		})
	}
}
