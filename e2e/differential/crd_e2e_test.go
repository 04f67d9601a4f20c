//go:build e2e

package differential

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"sort"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/live"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/e2e/apiserver"
)

// crdManifest is the CustomResourceDefinition of TestCustomResourceDefinitionWrites:
// converted by a webhook whose CA bundle another writer injects, as with
// cert-manager's cainjector.
const crdManifest = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: doohickeys.example.truce.dev
  labels: {app: doohickeys}
spec:
  group: example.truce.dev
  scope: Namespaced
  names: {plural: doohickeys, kind: Doohickey, shortNames: [dh]}
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
              size: {type: integer, default: 1}
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: [v1]
      clientConfig:
        service: {namespace: default, name: doohickey-conversion, path: /convert}
`

var caBundlePath = []string{"spec", "conversion", "webhook", "clientConfig", "caBundle"}

// TestCustomResourceDefinitionWrites sends a history of writes of one
// CustomResourceDefinition to the real server (through cluster/live) and to
// cluster/memory holding the same state, and compares every answer: the
// create, updates (a CA bundle injected by another writer, status sent
// through the main resource, a no-op, changes validation refuses) and
// server-side applies by a GitOps manager (shared ownership, a no-op, a
// conflict, a forced dry run, force, a new version). The corpus's cases are
// one write each and cannot express these.
//
// After the create, the server's controllers accept the CRD's names and
// establish it, which a write path does not do; the memory cluster for the
// rest of the history is built from the server's object at that point, as
// truce is given a live cluster's objects.
func TestCustomResourceDefinitionWrites(t *testing.T) {
	ctx := context.Background()
	srv := serverFor(ctx, t, &Case{})
	useCleanServer(ctx, t, srv)
	lc, err := live.New(srv.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	manifest := parseObject(t, crdManifest)
	ref := cluster.RefOf(manifest)
	injected := base64.StdEncoding.EncodeToString(webhooks.CABundle)
	otherCA := selfSignedCA(t)

	// The create, on a memory cluster that holds nothing else either.
	mc := newMemory(ctx, t)
	pair := &clusterPair{t: t, live: lc, mem: mc}
	created := pair.write("create", "", func(c cluster.Cluster) (*unstructured.Unstructured, error) {
		return c.Create(ctx, manifest.DeepCopy(), cluster.WriteOptions{FieldManager: "kubectl-create"})
	})
	if created == nil {
		t.FailNow()
	}

	// The server's controllers establish the CRD; memory starts again from
	// the server's object.
	established := waitEstablished(ctx, t, lc, ref)
	state, err := admission.NewState(established)
	if err != nil {
		t.Fatal(err)
	}
	pair.mem = newMemoryFrom(ctx, t, state)
	pair.sameIdentity = true
	pair.compareStored("the established CRD", ref)

	// Updates: another writer injects the CA bundle, and tries to write
	// status through the main resource.
	update := func(manager string, change func(u *unstructured.Unstructured)) func(c cluster.Cluster) (*unstructured.Unstructured, error) {
		return func(c cluster.Cluster) (*unstructured.Unstructured, error) {
			cur, err := c.Get(ctx, ref)
			if err != nil {
				return nil, err
			}
			change(cur)
			return c.Update(ctx, cur, cluster.WriteOptions{FieldManager: manager})
		}
	}
	setField := func(value any, path ...string) func(u *unstructured.Unstructured) {
		return func(u *unstructured.Unstructured) {
			if err := unstructured.SetNestedField(u.Object, value, path...); err != nil {
				t.Fatal(err)
			}
		}
	}
	pair.write("update: inject the CA bundle, status ignored", "", update("cainjector", func(u *unstructured.Unstructured) {
		setField(injected, caBundlePath...)(u)
		setField([]any{"v1", "v0"}, "status", "storedVersions")(u)
	}))
	pair.noop("update: nothing changes", update("cainjector", func(*unstructured.Unstructured) {}))
	pair.write("update: scope is immutable once established", metav1.StatusReasonInvalid, update("kubectl-edit", setField("Cluster", "spec", "scope")))
	pair.write("update: kind is immutable once established", metav1.StatusReasonInvalid, update("kubectl-edit", setField("Thingamajig", "spec", "names", "kind")))
	pair.write("update: an invalid CA bundle replaces a valid one", metav1.StatusReasonInvalid, update("kubectl-edit", setField("Tk9UIEEgQ0VSVElGSUNBVEU=", caBundlePath...)))

	// Server-side apply by the GitOps tool.
	apply := func(obj *unstructured.Unstructured, opts cluster.ApplyOptions) func(c cluster.Cluster) (*unstructured.Unstructured, error) {
		return func(c cluster.Cluster) (*unstructured.Unstructured, error) {
			return c.Apply(ctx, obj.DeepCopy(), opts)
		}
	}
	gitops := cluster.ApplyOptions{FieldManager: "argocd-controller"}
	pair.write("apply: the manifest, shared with the injector", "", apply(manifest, gitops))
	pair.noop("apply: again", apply(manifest, gitops))
	withOtherCA := manifest.DeepCopy()
	setField(otherCA, caBundlePath...)(withOtherCA)
	pair.write("apply: a CA bundle the injector owns conflicts", metav1.StatusReasonConflict, apply(withOtherCA, gitops))
	pair.write("apply: forced dry run", "", apply(withOtherCA, cluster.ApplyOptions{FieldManager: "argocd-controller", Force: true, DryRun: true}))
	pair.compareStored("after the dry run", ref)
	pair.write("apply: force takes the CA bundle over", "", apply(withOtherCA, cluster.ApplyOptions{FieldManager: "argocd-controller", Force: true}))
	twoVersions := withOtherCA.DeepCopy()
	versions, _, _ := unstructured.NestedSlice(twoVersions.Object, "spec", "versions")
	v2 := runtime.DeepCopyJSONValue(versions[0]).(map[string]any)
	v2["name"], v2["storage"] = "v2", false
	setField(append(versions, v2), "spec", "versions")(twoVersions)
	pair.write("apply: a second version conflicts with the list's owner", metav1.StatusReasonConflict, apply(twoVersions, gitops))
	force := cluster.ApplyOptions{FieldManager: "argocd-controller", Force: true}
	pair.write("apply: a second version, forced", "", apply(twoVersions, force))
	dropped := twoVersions.DeepCopy()
	onlyV2 := runtime.DeepCopyJSONValue(v2).(map[string]any)
	onlyV2["storage"] = true
	setField([]any{onlyV2}, "spec", "versions")(dropped)
	pair.write("apply: dropping the stored version is invalid", metav1.StatusReasonInvalid, apply(dropped, force))
	pair.compareStored("at the end", ref)
}

// clusterPair runs each write on the server and on memory and compares.
type clusterPair struct {
	t    *testing.T
	live *live.Cluster
	mem  *memory.Cluster
	// sameIdentity: memory holds the server's object (same uid and
	// creationTimestamp).
	sameIdentity bool
}

// write runs do on both clusters and reports any difference in the answer:
// the stored object (but for resourceVersion, managedFields times and,
// unless sameIdentity, uid and creationTimestamp) or the error status. The
// server must answer with want (a reason; "" for success), so that the
// history tests what it says. It returns the server's object (nil if
// refused).
func (p *clusterPair) write(name string, want metav1.StatusReason, do func(c cluster.Cluster) (*unstructured.Unstructured, error)) *unstructured.Unstructured {
	p.t.Helper()
	srvObj, srvErr := do(p.live)
	memObj, memErr := do(p.mem)
	if got := apierrors.ReasonForError(srvErr); got != want {
		p.t.Errorf("%s: the server answered %q (%v), the history expects %q", name, got, srvErr, want)
	}
	if d := cmp.Diff(statusOf(srvErr), statusOf(memErr)); d != "" {
		p.t.Errorf("%s: error differs (-server +memory):\n%s", name, d)
		return srvObj
	}
	if srvErr != nil {
		p.t.Logf("%s: both refused: %v", name, srvErr)
		return nil
	}
	if d := cmp.Diff(comparableCRD(srvObj, p.sameIdentity), comparableCRD(memObj, p.sameIdentity)); d != "" {
		p.t.Errorf("%s: stored object differs (-server +memory):\n%s", name, d)
	}
	return srvObj
}

// noop runs do on both clusters, which must store nothing: the
// resourceVersion stays.
func (p *clusterPair) noop(name string, do func(c cluster.Cluster) (*unstructured.Unstructured, error)) {
	p.t.Helper()
	for _, side := range []struct {
		name string
		c    cluster.Cluster
	}{{"server", p.live}, {"memory", p.mem}} {
		ref := cluster.RefOf(parseObject(p.t, crdManifest))
		before, err := side.c.Get(context.Background(), ref)
		if err != nil {
			p.t.Fatal(err)
		}
		after, err := do(side.c)
		if err != nil {
			p.t.Errorf("%s on %s: %v", name, side.name, err)
			continue
		}
		if after.GetResourceVersion() != before.GetResourceVersion() {
			p.t.Errorf("%s: %s stored a new resourceVersion (%s -> %s)", name, side.name, before.GetResourceVersion(), after.GetResourceVersion())
		}
	}
}

// compareStored compares what both clusters store.
func (p *clusterPair) compareStored(name string, ref cluster.Ref) {
	p.t.Helper()
	p.write("stored "+name, "", func(c cluster.Cluster) (*unstructured.Unstructured, error) {
		return c.Get(context.Background(), ref)
	})
}

// apiStatus is the comparable part of an API error.
type apiStatus struct {
	Code    int32
	Reason  metav1.StatusReason
	Message string
	Details *metav1.StatusDetails
}

func statusOf(err error) *apiStatus {
	if err == nil {
		return nil
	}
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return &apiStatus{Message: "not an API error: " + err.Error()}
	}
	s := se.Status()
	return &apiStatus{Code: s.Code, Reason: s.Reason, Message: s.Message, Details: s.Details}
}

// comparableCRD is obj without what storage assigns (resourceVersion; uid
// and creationTimestamp unless both sides share the object's identity) and
// with managedFields sorted by manager and their times reduced to whether
// they are set.
func comparableCRD(obj *unstructured.Unstructured, sameIdentity bool) map[string]any {
	if obj == nil {
		return nil
	}
	u := obj.DeepCopy()
	unstructured.RemoveNestedField(u.Object, "metadata", "resourceVersion")
	if !sameIdentity {
		unstructured.RemoveNestedField(u.Object, "metadata", "uid")
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	}
	mfs := u.GetManagedFields()
	for i := range mfs {
		if mfs[i].Time != nil {
			mfs[i].Time = &metav1.Time{}
		}
	}
	sort.SliceStable(mfs, func(i, j int) bool {
		return fmt.Sprint(mfs[i].Manager, mfs[i].Operation) < fmt.Sprint(mfs[j].Manager, mfs[j].Operation)
	})
	u.SetManagedFields(mfs)
	return NormalizeObject(u.Object).(map[string]any)
}

// waitEstablished polls the server until the CRD is Established and
// returns it.
func waitEstablished(ctx context.Context, t *testing.T, lc *live.Cluster, ref cluster.Ref) *unstructured.Unstructured {
	t.Helper()
	var obj *unstructured.Unstructured
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
		var err error
		if obj, err = lc.Get(ctx, ref); err != nil {
			return false, nil
		}
		return crdConditionTrue(obj, "Established") && crdConditionTrue(obj, "NamesAccepted"), nil
	})
	if err != nil {
		t.Fatalf("%s not established: %v", ref, err)
	}
	return obj
}

func crdConditionTrue(obj *unstructured.Unstructured, condType string) bool {
	conds, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, c := range conds {
		m, _ := c.(map[string]any)
		if m["type"] == condType && m["status"] == "True" {
			return true
		}
	}
	return false
}

// newMemory returns an empty memory cluster configured like the server.
func newMemory(ctx context.Context, t *testing.T) *memory.Cluster {
	t.Helper()
	state, err := admission.NewState()
	if err != nil {
		t.Fatal(err)
	}
	return newMemoryFrom(ctx, t, state)
}

func newMemoryFrom(ctx context.Context, t *testing.T, state *admission.State) *memory.Cluster {
	t.Helper()
	mc, err := memory.New(ctx, state, admission.Options{
		DisablePlugins: apiserver.DefaultDisabledAdmissionPlugins,
		// What the server applies for clients that send no fieldValidation,
		// as cluster/live's do not.
		FieldValidation:       "Warn",
		ServiceClusterIPRange: apiserver.ServiceClusterIPRange,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(mc.Close)
	return mc
}

func parseObject(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	data, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{}
	if err := u.UnmarshalJSON(data); err != nil {
		t.Fatal(err)
	}
	return u
}

// selfSignedCA returns a base64 PEM bundle with a fresh CA certificate.
func selfSignedCA(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(2),
		Subject:               pkix.Name{CommonName: "truce-e2e-other-ca"},
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
