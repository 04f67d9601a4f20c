package memory

import (
	"context"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/cluster"
)

// A Service read from a cluster whose service range is wider than the
// default (kubeadm's 10.96.0.0/12) was allocated by that cluster: it is part
// of the cluster, its address and node port are taken, and writes are still
// checked against the range (issue 21 item 6).
func TestExistingServicesKeepTheirAddresses(t *testing.T) {
	ctx := context.Background()
	existing := object(t, `
apiVersion: v1
kind: Service
metadata: {name: dns, namespace: default, resourceVersion: "7"}
spec:
  type: NodePort
  clusterIP: 10.96.0.10
  clusterIPs: [10.96.0.10]
  selector: {app: dns}
  ports: [{port: 53, nodePort: 30053}]
`)
	c := newCluster(t, existing)
	stored, err := c.Get(ctx, cluster.RefOf(existing))
	if err != nil {
		t.Fatal(err)
	}
	if ip, _, _ := unstructured.NestedString(stored.Object, "spec", "clusterIP"); ip != "10.96.0.10" {
		t.Errorf("existing Service's clusterIP = %q, want 10.96.0.10", ip)
	}

	tests := []struct {
		name, spec string
		wantErr    string // empty: the write is allowed
		wantIP     string
		// dryRun asks as kubectl --dry-run=server does: the server's
		// dry-run allocator checks the range only.
		dryRun bool
	}{
		{name: "new Service gets an address of the range", spec: `{selector: {app: web}, ports: [{port: 80}]}`, wantIP: "10.0.0.0"},
		{name: "address outside the range", spec: `{clusterIP: 10.96.0.20, selector: {app: web}, ports: [{port: 80}]}`,
			wantErr: `spec.clusterIPs: Invalid value: ["10.96.0.20"]: failed to allocate IP 10.96.0.20: the provided IP (10.96.0.20) is not in the valid range. The range of valid IPs is 10.0.0.0/24`},
		{name: "the existing Service's address", spec: `{clusterIP: 10.96.0.10, selector: {app: web}, ports: [{port: 80}]}`,
			wantErr: "failed to allocate IP 10.96.0.10: provided IP is already allocated"},
		{name: "the existing Service's address, dry run", spec: `{clusterIP: 10.96.0.10, selector: {app: web}, ports: [{port: 80}]}`,
			dryRun: true, wantIP: "10.96.0.10"},
		{name: "the existing Service's node port", spec: `{type: NodePort, selector: {app: web}, ports: [{port: 80, nodePort: 30053}]}`,
			wantErr: "30053: provided port is already allocated"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			svc := object(t, `{apiVersion: v1, kind: Service, metadata: {name: web-`+string(rune('a'+i))+`, namespace: default}, spec: `+tt.spec+`}`)
			got, err := c.Create(ctx, svc, cluster.WriteOptions{DryRun: tt.dryRun})
			if tt.wantErr != "" {
				if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("create: %v, want Invalid containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if ip, _, _ := unstructured.NestedString(got.Object, "spec", "clusterIP"); ip != tt.wantIP {
				t.Errorf("clusterIP = %q, want %q", ip, tt.wantIP)
			}
		})
	}
	after, err := c.Get(ctx, cluster.RefOf(existing))
	if err != nil {
		t.Fatal(err)
	}
	if ips, _, _ := unstructured.NestedStringSlice(after.Object, "spec", "clusterIPs"); len(ips) != 1 || ips[0] != "10.96.0.10" {
		t.Errorf("existing Service's clusterIPs after the writes = %v", ips)
	}
}
