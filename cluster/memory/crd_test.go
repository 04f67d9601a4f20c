package memory

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
)

// crdWithWebhook is a CRD converted by a webhook, as cert-manager's or an
// operator's: the CA bundle is injected later by another writer.
const crdWithWebhook = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  names: {plural: widgets, kind: Widget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {name: conv, namespace: default, path: /convert}
`

// caBundle returns a base64 PEM bundle holding a fresh self-signed CA, which
// CRD validation accepts as a conversion webhook's caBundle.
func caBundle(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "truce-test-ca"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}

func nestedString(t *testing.T, u *unstructured.Unstructured, path ...string) string {
	t.Helper()
	s, _, err := unstructured.NestedFieldNoCopy(u.Object, path...)
	if err != nil {
		t.Fatal(err)
	}
	str, _ := s.(string)
	return str
}

// owners maps each manager to whether it owns the given field path
// (fieldsV1 keys, e.g. "f:spec", "f:conversion").
func owners(t *testing.T, u *unstructured.Unstructured, path ...string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, mf := range u.GetManagedFields() {
		var fields map[string]any
		if mf.FieldsV1 != nil {
			if err := json.Unmarshal(mf.FieldsV1.GetRawBytes(), &fields); err != nil {
				t.Fatal(err)
			}
		}
		_, found, _ := unstructured.NestedFieldNoCopy(fields, path...)
		out[mf.Manager] = found
	}
	return out
}

func TestCRDCreateUpdateApply(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	bundle := caBundle(t)
	caPath := []string{"spec", "conversion", "webhook", "clientConfig", "caBundle"}
	caFields := []string{"f:spec", "f:conversion", "f:webhook", "f:clientConfig", "f:caBundle"}

	// Create: the apiextensions-apiserver's v1 defaults and PrepareForCreate.
	created, err := c.Create(ctx, object(t, crdWithWebhook), cluster.WriteOptions{FieldManager: "kubectl-create"})
	if err != nil {
		t.Fatal(err)
	}
	port, _, _ := unstructured.NestedInt64(created.Object, "spec", "conversion", "webhook", "clientConfig", "service", "port")
	stored, _, _ := unstructured.NestedStringSlice(created.Object, "status", "storedVersions")
	if port != 443 || nestedString(t, created, "spec", "names", "singular") != "widget" ||
		nestedString(t, created, "spec", "names", "listKind") != "WidgetList" ||
		len(stored) != 1 || stored[0] != "v1" || created.GetGeneration() != 1 {
		t.Fatalf("created CRD lacks the server's defaults: port %d, names %v, storedVersions %v, generation %d",
			port, created.Object["spec"].(map[string]any)["names"], stored, created.GetGeneration())
	}
	if got := managers(created); got["kubectl-create"] != "Update" || len(got) != 1 {
		t.Fatalf("managers after create = %v", got)
	}
	if _, err := c.Create(ctx, object(t, crdWithWebhook), cluster.WriteOptions{}); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v", err)
	}

	// The chain was rebuilt: the new kind is served and validated by its schema.
	widget := object(t, `{apiVersion: example.com/v1, kind: Widget, metadata: {name: w}, spec: {size: big}}`)
	if _, err := c.Create(ctx, widget, cluster.WriteOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("create of a Widget against its schema: err = %v, want Invalid", err)
	}
	widget.Object["spec"] = map[string]any{"size": int64(3)}
	if _, err := c.Create(ctx, widget, cluster.WriteOptions{}); err != nil {
		t.Fatalf("create of a valid Widget: %v", err)
	}

	// Update: another writer injects the CA bundle; status cannot be written
	// through the main resource.
	injected := created.DeepCopy()
	if err := unstructured.SetNestedField(injected.Object, bundle, caPath...); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedStringSlice(injected.Object, []string{"v1", "v2"}, "status", "storedVersions"); err != nil {
		t.Fatal(err)
	}
	updated, err := c.Update(ctx, injected, cluster.WriteOptions{FieldManager: "cainjector"})
	if err != nil {
		t.Fatal(err)
	}
	if nestedString(t, updated, caPath...) != bundle || updated.GetGeneration() != 2 {
		t.Fatalf("after the update: caBundle %q, generation %d", nestedString(t, updated, caPath...), updated.GetGeneration())
	}
	if stored, _, _ := unstructured.NestedStringSlice(updated.Object, "status", "storedVersions"); len(stored) != 1 {
		t.Errorf("an update of the main resource changed status.storedVersions to %v", stored)
	}
	if got := owners(t, updated, caFields...); !got["cainjector"] || got["kubectl-create"] {
		t.Fatalf("caBundle owners after the update = %v", got)
	}

	// An update that changes nothing stores nothing.
	same, err := c.Update(ctx, updated.DeepCopy(), cluster.WriteOptions{FieldManager: "cainjector"})
	if err != nil {
		t.Fatal(err)
	}
	if same.GetResourceVersion() != updated.GetResourceVersion() {
		t.Errorf("a no-op update bumped resourceVersion %s -> %s", updated.GetResourceVersion(), same.GetResourceVersion())
	}

	// Server-side apply of the manifest by the GitOps tool: shared
	// ownership, the injected bundle stays.
	apply := cluster.ApplyOptions{FieldManager: "argocd-controller"}
	applied, err := c.Apply(ctx, object(t, crdWithWebhook), apply)
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(applied); got["argocd-controller"] != "Apply" || got["cainjector"] != "Update" {
		t.Fatalf("managers after apply = %v", got)
	}
	if nestedString(t, applied, caPath...) != bundle || applied.GetGeneration() != 2 {
		t.Fatalf("after the apply: caBundle %q, generation %d", nestedString(t, applied, caPath...), applied.GetGeneration())
	}
	again, err := c.Apply(ctx, object(t, crdWithWebhook), apply)
	if err != nil {
		t.Fatal(err)
	}
	if again.GetResourceVersion() != applied.GetResourceVersion() {
		t.Errorf("a no-op apply bumped resourceVersion %s -> %s", applied.GetResourceVersion(), again.GetResourceVersion())
	}

	// Applying another bundle conflicts with its owner...
	other := object(t, crdWithWebhook)
	otherBundle := caBundle(t)
	if err := unstructured.SetNestedField(other.Object, otherBundle, caPath...); err != nil {
		t.Fatal(err)
	}
	_, err = c.Apply(ctx, other, apply)
	if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), `conflict with "cainjector"`) ||
		!strings.Contains(err.Error(), ".spec.conversion.webhook.clientConfig.caBundle") {
		t.Fatalf("apply of a field another manager owns: err = %v, want a conflict with cainjector", err)
	}
	// ...a forced dry run shows the takeover and stores nothing...
	dry, err := c.Apply(ctx, other, cluster.ApplyOptions{FieldManager: "argocd-controller", Force: true, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	if nestedString(t, dry, caPath...) != otherBundle {
		t.Errorf("dry-run apply: caBundle not taken over")
	}
	ref := cluster.Ref{GroupVersionKind: schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}, Name: "widgets.example.com"}
	live, err := c.Get(ctx, ref)
	if err != nil {
		t.Fatal(err)
	}
	if nestedString(t, live, caPath...) != bundle || live.GetResourceVersion() != applied.GetResourceVersion() {
		t.Fatalf("a dry run changed the stored CRD")
	}
	// ...and force takes the field over.
	forced, err := c.Apply(ctx, other, cluster.ApplyOptions{FieldManager: "argocd-controller", Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if got := owners(t, forced, caFields...); !got["argocd-controller"] || got["cainjector"] {
		t.Fatalf("caBundle owners after a forced apply = %v", got)
	}
	if forced.GetGeneration() != 3 {
		t.Errorf("generation after a spec change = %d, want 3", forced.GetGeneration())
	}

	// The chain is rebuilt after an update too: the new schema applies.
	stricter := forced.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(stricter.Object, "spec", "versions")
	if err := unstructured.SetNestedField(versions[0].(map[string]any), int64(1),
		"schema", "openAPIV3Schema", "properties", "spec", "properties", "size", "minimum"); err != nil {
		t.Fatal(err)
	}
	if err := unstructured.SetNestedSlice(stricter.Object, versions, "spec", "versions"); err != nil {
		t.Fatal(err)
	}
	if forced, err = c.Update(ctx, stricter, cluster.WriteOptions{FieldManager: "kubectl-edit"}); err != nil {
		t.Fatal(err)
	}
	small := object(t, `{apiVersion: example.com/v1, kind: Widget, metadata: {name: small}, spec: {size: 0}}`)
	if _, err := c.Create(ctx, small, cluster.WriteOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("create of a Widget below the new minimum: err = %v, want Invalid", err)
	}

	// Validation of updates: the group is immutable.
	moved := forced.DeepCopy()
	if err := unstructured.SetNestedField(moved.Object, "example.org", "spec", "group"); err != nil {
		t.Fatal(err)
	}
	_, err = c.Update(ctx, moved, cluster.WriteOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `CustomResourceDefinition.apiextensions.k8s.io "widgets.example.com" is invalid`) ||
		!strings.Contains(err.Error(), `spec.group: Invalid value: "example.org": field is immutable`) {
		t.Fatalf("update of spec.group: err = %v", err)
	}
}

func TestCRDCreateValidation(t *testing.T) {
	ctx := context.Background()
	c := newCluster(t)
	wrong := object(t, crdWithWebhook)
	wrong.SetName("gadgets.example.com")
	_, err := c.Apply(ctx, wrong, cluster.ApplyOptions{FieldManager: "argocd-controller"})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), `metadata.name: Invalid value: "gadgets.example.com": must be spec.names.plural+"."+spec.group`) {
		t.Fatalf("apply of a CRD named unlike its plural: err = %v", err)
	}
	created, err := c.Apply(ctx, object(t, crdWithWebhook), cluster.ApplyOptions{FieldManager: "argocd-controller"})
	if err != nil {
		t.Fatal(err)
	}
	if got := managers(created); got["argocd-controller"] != "Apply" || len(got) != 1 {
		t.Fatalf("managers after an apply that creates = %v", got)
	}
	if port, _, _ := unstructured.NestedInt64(created.Object, "spec", "conversion", "webhook", "clientConfig", "service", "port"); port != 443 {
		t.Errorf("service port after an apply that creates = %d, want 443", port)
	}
	if owners(t, created, "f:status")["argocd-controller"] {
		t.Errorf("the applier owns status, which the strategy resets")
	}
}
