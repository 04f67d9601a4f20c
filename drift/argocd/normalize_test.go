package argocd

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNormalize(t *testing.T) {
	tests := []struct {
		name, in, want string
		opts           Options
	}{
		{
			name: "creationTimestamp dropped",
			in:   "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, creationTimestamp: null}\n",
			want: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n",
		},
		{
			name: "secret stringData folded into data",
			in:   "apiVersion: v1\nkind: Secret\nstringData: {a: s3cr3t}\ndata: {b: Yg==}\n",
			want: "apiVersion: v1\nkind: Secret\ndata: {a: czNjcjN0, b: Yg==}\n",
		},
		{
			name: "secret stringData wins over data",
			in:   "apiVersion: v1\nkind: Secret\nstringData: {a: x}\ndata: {a: eQ==}\n",
			want: "apiVersion: v1\nkind: Secret\ndata: {a: eA==}\n",
		},
		{
			name: "secret null data value becomes empty",
			in:   "apiVersion: v1\nkind: Secret\ndata: {a: null}\n",
			want: "apiVersion: v1\nkind: Secret\ndata: {a: ''}\n",
		},
		{
			name: "secret non-string stringData kept as is, invalid secret left alone",
			in:   "apiVersion: v1\nkind: Secret\nstringData: {a: 1}\n",
			want: "apiVersion: v1\nkind: Secret\ndata: {a: 1}\n",
		},
		{
			name: "role empty rules become null",
			in:   "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nrules: []\n",
			want: "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nrules: null\n",
		},
		{
			name: "aggregated role rules kept by default",
			in:   "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\naggregationRule: {}\nrules: [{verbs: [get]}]\n",
			want: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\naggregationRule: {}\nrules: [{verbs: [get]}]\n",
		},
		{
			name: "aggregated role rules dropped with IgnoreAggregatedRoles",
			in:   "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\naggregationRule: {}\nrules: [{verbs: [get]}]\n",
			want: "apiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\naggregationRule: {}\nrules: null\n",
			opts: Options{IgnoreAggregatedRoles: true},
		},
		{
			name: "other groups untouched",
			in:   "apiVersion: example.com/v1\nkind: Secret\nstringData: {a: b}\n",
			want: "apiVersion: example.com/v1\nkind: Secret\nstringData: {a: b}\n",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := obj(t, tt.in)
			if err := Normalize(u, tt.opts); err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(obj(t, tt.want).Object, plainJSON(u.Object)); d != "" {
				t.Errorf("Normalize (-want +got):\n%s", d)
			}
		})
	}
	if err := Normalize(nil, Options{}); err != nil {
		t.Errorf("Normalize(nil) = %v", err)
	}
}

// Endpoints are compared independent of subset order, with the default
// protocol filled in.
func TestNormalizeEndpoints(t *testing.T) {
	const a = `
apiVersion: v1
kind: Endpoints
metadata: {name: web}
subsets:
- addresses: [{ip: 10.0.0.2}]
  ports: [{port: 80}]
- addresses: [{ip: 10.0.0.1}]
  ports: [{port: 81, protocol: TCP}]
`
	const b = `
apiVersion: v1
kind: Endpoints
metadata: {name: web}
subsets:
- addresses: [{ip: 10.0.0.1}]
  ports: [{port: 81}]
- addresses: [{ip: 10.0.0.2}]
  ports: [{port: 80, protocol: TCP}]
`
	ua, ub := obj(t, a), obj(t, b)
	if err := Normalize(ua, Options{}); err != nil {
		t.Fatal(err)
	}
	if err := Normalize(ub, Options{}); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(plainJSON(ua.Object), plainJSON(ub.Object)); d != "" {
		t.Errorf("normalized Endpoints differ (-a +b):\n%s", d)
	}
}
