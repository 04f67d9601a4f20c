package webhookserver

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func TestBehaviours(t *testing.T) {
	s, err := Start([]string{"truce-webhook.webhook-system.svc"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CABundle) {
		t.Fatal("bad CA bundle")
	}
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "truce-webhook.webhook-system.svc"}}}
	call := func(path, object string) (int, *admissionv1.AdmissionResponse) {
		t.Helper()
		review := admissionv1.AdmissionReview{Request: &admissionv1.AdmissionRequest{UID: "u1", Object: runtime.RawExtension{Raw: []byte(object)}}}
		body, _ := json.Marshal(review)
		resp, err := client.Post(s.URL+path, "application/json", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out := admissionv1.AdmissionReview{}
		if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&out) != nil {
			return resp.StatusCode, nil
		}
		if out.Response.UID != "u1" {
			t.Errorf("%s: uid %q", path, out.Response.UID)
		}
		return resp.StatusCode, out.Response
	}
	pod := `{"metadata":{"name":"p","annotations":{"a":"1"}},"spec":{"containers":[{"name":"c","image":"nginx"}]}}`
	managed := `{"metadata":{"name":"c","labels":{},"managedFields":[{"manager":"kubectl-replace"},{"manager":"kubectl-create"},{"manager":"kubectl-replace"}]}}`
	widget := `{"metadata":{"name":"w"},"spec":{"size":3}}`
	for _, tc := range []struct{ path, object, patch string }{
		{"/add-label/team/x", pod, `[{"op":"add","path":"/metadata/labels","value":{"team":"x"}}]`},
		{"/add-label/a~b/x", `{"metadata":{"labels":{}}}`, `[{"op":"add","path":"/metadata/labels/a~0b","value":"x"}]`},
		{"/annotate-once/a/2", pod, ``},
		{"/annotate-once/b/2", pod, `[{"op":"add","path":"/metadata/annotations/b","value":"2"}]`},
		{"/replace-image/mirror.example.com/nginx:1", pod, `[{"op":"replace","path":"/spec/containers/0/image","value":"mirror.example.com/nginx:1"}]`},
		{"/copy-label/team/seen", pod, ``},
		{"/label-managers/m", pod, `[{"op":"add","path":"/metadata/labels","value":{"m":"none"}}]`},
		{"/label-managers/m", managed, `[{"op":"add","path":"/metadata/labels/m","value":"kubectl-create.kubectl-replace"}]`},
		{"/require-manager/kubectl-replace", managed, ``},
		{"/remove/spec/size", widget, `[{"op":"remove","path":"/spec/size"}]`},
		{"/remove/spec/absent", widget, ``},
		{"/set/%22three%22/spec/size", widget, `[{"op":"add","path":"/spec/size","value":"three"}]`},
		{"/set/%7B%22a%22:1%7D/spec/extra", widget, `[{"op":"add","path":"/spec/extra","value":{"a":1}}]`},
	} {
		code, resp := call(tc.path, tc.object)
		if code != 200 || resp == nil || !resp.Allowed || string(resp.Patch) != tc.patch {
			t.Errorf("%s: code %d resp %+v patch %s, want %s", tc.path, code, resp, resp.Patch, tc.patch)
		}
	}
	if _, resp := call("/deny/403/no%20way", pod); resp == nil || resp.Allowed || resp.Result.Code != 403 || resp.Result.Message != "no way" {
		t.Errorf("deny: %+v", resp)
	}
	if _, resp := call("/require-manager/kubectl-replace", pod); resp == nil || resp.Allowed || resp.Result.Code != 403 ||
		resp.Result.Message != "no managedFields entry of kubectl-replace (managers: )" {
		t.Errorf("require-manager: %+v", resp)
	}
	if _, resp := call("/warn/w1/w2", pod); resp == nil || strings.Join(resp.Warnings, ",") != "w1,w2" {
		t.Errorf("warn: %+v", resp)
	}
	if _, resp := call("/audit/k/v", pod); resp == nil || resp.AuditAnnotations["k"] != "v" {
		t.Errorf("audit: %+v", resp)
	}
	if code, _ := call("/error500", pod); code != 500 {
		t.Errorf("error500: %d", code)
	}
	if code, resp := call("/malformed", pod); code != 200 || resp != nil {
		t.Errorf("malformed: %d %+v", code, resp)
	}
	if len(s.Requests()) == 0 {
		t.Error("no requests recorded")
	}
}
