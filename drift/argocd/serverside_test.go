package argocd

import (
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/truce-dev/truce/schema"
)

var appsV1Converter = sync.OnceValues(func() (managedfields.TypeConverter, error) {
	reg, err := schema.NewRegistry()
	if err != nil {
		return nil, err
	}
	return reg.TypeConverter(k8sschema.GroupVersion{Group: "apps", Version: "v1"})
})

func appsV1(t *testing.T) managedfields.TypeConverter {
	t.Helper()
	tc, err := appsV1Converter()
	if err != nil {
		t.Fatalf("type converter: %v", err)
	}
	return tc
}

// The live Deployment after a server-side apply by Argo CD. managedFields are
// written by hand as kube-apiserver records them: argocd-controller owns what
// the manifest sets (deployConfigYAML), the controller manager the revision
// annotation and status. Defaulted fields have no owner.
const ssdLiveYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  uid: 9c1b6f0e-3a55-4a53-a7f4-7d3c0a1f2b11
  resourceVersion: "4711"
  generation: 1
  creationTimestamp: "2026-05-01T10:00:00Z"
  labels:
    app: web
  annotations:
    deployment.kubernetes.io/revision: "1"
  managedFields:
  - manager: argocd-controller
    operation: Apply
    apiVersion: apps/v1
    time: "2026-05-01T10:00:00Z"
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:labels:
          f:app: {}
      f:spec:
        f:replicas: {}
        f:selector: {}
        f:template:
          f:metadata:
            f:labels:
              f:app: {}
          f:spec:
            f:containers:
              k:{"name":"web"}:
                .: {}
                f:args: {}
                f:image: {}
                f:name: {}
                f:ports:
                  k:{"containerPort":8080,"protocol":"TCP"}:
                    .: {}
                    f:containerPort: {}
                f:resources:
                  f:limits:
                    f:cpu: {}
                    f:memory: {}
  - manager: kube-controller-manager
    operation: Update
    apiVersion: apps/v1
    time: "2026-05-01T10:00:05Z"
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:annotations:
          .: {}
          f:deployment.kubernetes.io/revision: {}
  - manager: kube-controller-manager
    operation: Update
    apiVersion: apps/v1
    time: "2026-05-01T10:00:05Z"
    fieldsType: FieldsV1
    subresource: status
    fieldsV1:
      f:status:
        f:observedGeneration: {}
        f:readyReplicas: {}
        f:replicas: {}
spec:
  replicas: 2
  revisionHistoryLimit: 10
  progressDeadlineSeconds: 600
  selector:
    matchLabels:
      app: web
  strategy:
    type: RollingUpdate
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 25%
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: web
        image: nginx:1.27
        args: ["--port=8080"]
        imagePullPolicy: IfNotPresent
        ports:
        - containerPort: 8080
          protocol: TCP
        resources:
          limits:
            cpu: "1"
            memory: 128Mi
          requests:
            cpu: "1"
            memory: 128Mi
        terminationMessagePath: /dev/termination-log
        terminationMessagePolicy: File
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      securityContext: {}
      terminationGracePeriodSeconds: 30
status:
  observedGeneration: 1
  replicas: 2
  readyReplicas: 2
`

func TestServerSideDiff(t *testing.T) {
	live := obj(t, ssdLiveYAML)
	tc := appsV1(t)
	ignore := DefaultSSDOptions(tc)
	include := SSDOptions{TypeConverter: tc}

	// A mutating webhook installed after the last sync adds a label; the dry
	// run of the unchanged manifest returns it, unowned.
	labelled := edit(live, func(m map[string]any) {
		mapAt(m, "metadata", "labels")["policy.example.com/team"] = "shop"
	})
	withSidecar := edit(live, func(m map[string]any) {
		s := mapAt(m, "spec", "template", "spec")
		s["containers"] = append(s["containers"].([]any), map[string]any{
			"name": "proxy", "image": "envoy:1.34", "imagePullPolicy": "IfNotPresent",
			"terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File", "resources": map[string]any{},
		})
	})
	liveLabelled := edit(live, func(m map[string]any) {
		mapAt(m, "metadata", "labels")["policy.example.com/team"] = "payments"
	})
	mirrored := edit(live, func(m map[string]any) { container0(m)["image"] = "registry.internal/nginx:1.27" })
	scaled := edit(live, func(m map[string]any) { mapAt(m, "spec")["replicas"] = int64(3) })
	noManagedFields := edit(labelled, func(m map[string]any) { delete(mapAt(m, "metadata"), "managedFields") })
	otherManager := edit(labelled, func(m map[string]any) {
		mapAt(m, "metadata", "managedFields", 0)["manager"] = "kubectl"
	})

	tests := []struct {
		name            string
		predicted, live *unstructured.Unstructured
		opts            SSDOptions
		wantModified    bool
		wantFields      []FieldChange
		wantErr         string
	}{
		{name: "in sync", predicted: live, live: live, opts: ignore},
		{
			// Argo CD's server-side diff leaves webhook changes out by default...
			name: "label added by a webhook is ignored", predicted: labelled, live: live, opts: ignore,
		},
		{
			// ...and includes them with IncludeMutationWebhook=true.
			name: "label added by a webhook is included", predicted: labelled, live: live, opts: include,
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/metadata/labels/policy.example.com~1team", Desired: "shop", DesiredPresent: true,
			}},
		},
		{
			name: "label changed by a webhook is reverted to live", predicted: labelled, live: liveLabelled, opts: ignore,
		},
		{
			name: "label changed by a webhook is included", predicted: labelled, live: liveLabelled, opts: include,
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/metadata/labels/policy.example.com~1team", Desired: "shop", Live: "payments", DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name: "sidecar added by a webhook is ignored", predicted: withSidecar, live: live, opts: ignore,
		},
		{
			name: "sidecar added by a webhook is included, containers reported whole", predicted: withSidecar, live: live, opts: include,
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer:        "/spec/template/spec/containers",
				Desired:        at(withSidecar.Object, "spec", "template", "spec", "containers"),
				Live:           at(live.Object, "spec", "template", "spec", "containers"),
				DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			// A webhook rewriting a field Argo CD applies is recorded under
			// Argo CD's manager, so it is kept even when webhooks are ignored.
			name: "image rewritten by a webhook in a field Git sets shows", predicted: mirrored, live: live, opts: ignore,
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/spec/template/spec/containers/0/image",
				Desired: "registry.internal/nginx:1.27", Live: "nginx:1.27", DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name: "change in Git shows", predicted: scaled, live: live, opts: ignore,
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/spec/replicas", Desired: int64(3), Live: int64(2), DesiredPresent: true, LivePresent: true,
			}},
		},
		{
			name: "custom manager name", predicted: otherManager, live: live,
			opts: SSDOptions{IgnoreMutationWebhook: true, Manager: "kubectl", TypeConverter: tc},
		},
		{
			name: "missing managedFields is an error", predicted: noManagedFields, live: live, opts: ignore,
			wantErr: "must have managedFields",
		},
		{
			name: "missing managedFields is fine when webhooks are included", predicted: noManagedFields, live: live, opts: include,
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "/metadata/labels/policy.example.com~1team", Desired: "shop", DesiredPresent: true,
			}},
		},
		{
			name: "no managedFields for the manager is an error", predicted: otherManager, live: live, opts: ignore,
			wantErr: `no managed fields found for manager "argocd-controller"`,
		},
		{
			name: "no type converter is an error", predicted: labelled, live: live,
			opts:    SSDOptions{IgnoreMutationWebhook: true},
			wantErr: "type converter",
		},
		{
			name: "not in the cluster: modified", predicted: obj(t, deployConfigYAML), opts: ignore,
			wantModified: true,
			wantFields: []FieldChange{{
				Pointer: "", Desired: normalized(t, obj(t, deployConfigYAML)).Object, DesiredPresent: true,
			}},
		},
		{
			name: "not in Git: not modified", live: live, opts: ignore,
			wantFields: []FieldChange{{Pointer: "", Live: normalized(t, live).Object, LivePresent: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var before *unstructured.Unstructured
			if tt.predicted != nil {
				before = tt.predicted.DeepCopy()
			}
			res, err := ServerSideDiff(tt.predicted, tt.live, tt.opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ServerSideDiff: %v", err)
			}
			if before != nil && !cmp.Equal(before.Object, tt.predicted.Object) {
				t.Error("ServerSideDiff changed its predictedLive argument")
			}
			got := Fields(res.PredictedLive, res.Live)
			if res.Modified != tt.wantModified {
				t.Errorf("Modified = %v, want %v; fields %v", res.Modified, tt.wantModified, got)
			}
			if d := cmp.Diff(tt.wantFields, got); d != "" {
				t.Errorf("Fields mismatch (-want +got):\n%s", d)
			}
			if res.PredictedLive != nil {
				if _, ok, _ := unstructured.NestedFieldNoCopy(res.PredictedLive.Object, "metadata", "managedFields"); ok {
					t.Error("predicted live still has managedFields")
				}
			}
		})
	}
}

// RemoveWebhookMutation keeps list-map key fields Argo CD does not own
// (protocol of a container port): removing them would break the item.
func TestRemoveWebhookMutationKeepsKeys(t *testing.T) {
	live := obj(t, ssdLiveYAML)
	predicted := edit(live, func(m map[string]any) {
		mapAt(m, "metadata", "labels")["policy.example.com/team"] = "shop"
	})
	got, err := RemoveWebhookMutation(predicted, live, appsV1(t), ServerSideDiffManager)
	if err != nil {
		t.Fatal(err)
	}
	ports := at(got.Object, "spec", "template", "spec", "containers", 0, "ports")
	want := []any{map[string]any{"containerPort": int64(8080), "protocol": "TCP"}}
	if d := cmp.Diff(want, ports); d != "" {
		t.Errorf("ports (-want +got):\n%s", d)
	}
	if _, ok := mapAt(got.Object, "metadata", "labels")["policy.example.com/team"]; ok {
		t.Error("webhook label survived")
	}
}

func TestRemoveWebhookMutationErrors(t *testing.T) {
	live := obj(t, ssdLiveYAML)
	tc := appsV1(t)
	bad := edit(live, func(m map[string]any) {
		mapAt(m, "metadata", "managedFields", 0)["fieldsV1"] = map[string]any{"x": 1}
	})
	unknownField := edit(live, func(m map[string]any) { mapAt(m, "spec")["bogus"] = true })
	for _, tt := range []struct {
		name            string
		predicted, live *unstructured.Unstructured
		want            string
	}{
		{"nil live", live, nil, "needs"},
		{"bad fieldsV1", bad, live, "decoding managedFields[0]"},
		{"field unknown to the schema", unknownField, live, "typing predicted live"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RemoveWebhookMutation(tt.predicted, tt.live, tc, ServerSideDiffManager)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
		})
	}
}
