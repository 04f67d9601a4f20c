package reconcile

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/cluster"
)

// probedCluster answers Gets of the probe with the errors in turn (the
// last one for good) and the CRD as given.
type probedCluster struct {
	cluster.Cluster
	crd    *unstructured.Unstructured
	errs   []error
	probes []cluster.Ref
}

func (c *probedCluster) Get(_ context.Context, ref cluster.Ref) (*unstructured.Unstructured, error) {
	if ref.Kind == "CustomResourceDefinition" {
		return c.crd, nil
	}
	c.probes = append(c.probes, ref)
	err := c.errs[0]
	if len(c.errs) > 1 {
		c.errs = c.errs[1:]
	}
	return nil, err
}

func TestWaitReadyWaitsUntilTheCRDIsServed(t *testing.T) {
	crd := decode(t, `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata: {name: widgets.example.com}
spec:
  group: example.com
  names: {kind: Widget, plural: widgets}
  scope: Namespaced
  versions:
  - {name: v1, served: true, storage: true}
  - {name: v0, served: false, storage: false}
status:
  conditions:
  - {type: NamesAccepted, status: "True"}
  - {type: Established, status: "True"}
`)[0].Object
	gr := schema.GroupResource{Group: "example.com", Resource: "widgets"}
	bare404 := apierrors.NewGenericServerResponse(404, "get", gr, "truce-readiness-probe", "", 0, true)
	ref := cluster.RefOf(crd)

	c := &probedCluster{crd: crd, errs: []error{bare404, bare404, apierrors.NewNotFound(gr, "truce-readiness-probe")}}
	if err := waitReady(context.Background(), c, []cluster.Ref{ref}, DefaultOptions().WaitTimeout); err != nil {
		t.Fatal(err)
	}
	if len(c.probes) != 3 || c.probes[2].Version != "v1" || c.probes[2].Namespace != "default" {
		t.Fatalf("probes %v", c.probes)
	}

	c = &probedCluster{crd: crd, errs: []error{bare404}}
	err := waitReady(context.Background(), c, []cluster.Ref{ref}, 600*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "example.com/v1 not served yet") {
		t.Fatalf("err = %v", err)
	}
}
