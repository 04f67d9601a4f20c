package ignore

import (
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"

	"github.com/truce-dev/truce/schema"
)

var (
	appsConverterOnce sync.Once
	appsConverter     managedfields.TypeConverter
	appsConverterErr  error
)

func appsTypeConverter(t *testing.T) managedfields.TypeConverter {
	t.Helper()
	appsConverterOnce.Do(func() {
		reg, err := schema.NewRegistry()
		if err != nil {
			appsConverterErr = err
			return
		}
		appsConverter, appsConverterErr = reg.TypeConverter(k8sschema.GroupVersion{Group: "apps", Version: "v1"})
	})
	if appsConverterErr != nil {
		t.Fatalf("type converter: %v", appsConverterErr)
	}
	return appsConverter
}

// liveDeploymentYAML is what the cluster stores after an HPA scaled the
// Deployment and a policy engine rewrote the image of one container, each
// as its own field manager.
const liveDeploymentYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels:
    app: web
  managedFields:
  - manager: argocd-controller
    operation: Apply
    apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1:
      f:metadata:
        f:labels:
          f:app: {}
      f:spec:
        f:selector: {}
        f:template:
          f:metadata:
            f:labels:
              f:app: {}
          f:spec:
            f:containers:
              k:{"name":"istio-proxy"}:
                .: {}
                f:image: {}
                f:name: {}
              k:{"name":"web"}:
                .: {}
                f:name: {}
  - manager: kube-controller-manager
    operation: Update
    apiVersion: apps/v1
    subresource: scale
    fieldsType: FieldsV1
    fieldsV1:
      f:spec:
        f:replicas: {}
  - manager: kyverno
    operation: Update
    apiVersion: apps/v1
    fieldsType: FieldsV1
    fieldsV1:
      f:spec:
        f:template:
          f:spec:
            f:containers:
              k:{"name":"web"}:
                f:image: {}
spec:
  replicas: 5
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: istio-proxy
        image: istio/proxyv2:1.22
      - name: web
        image: registry.internal/nginx:1.27
`

const desiredDeploymentYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels:
    app: web
spec:
  replicas: 2
  selector:
    matchLabels:
      app: web
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - name: istio-proxy
        image: istio/proxyv2:1.23
      - name: web
        image: nginx:1.27
`

func TestNormalizeManaged(t *testing.T) {
	tc := appsTypeConverter(t)
	tests := []struct {
		name         string
		rule         Rule
		wantMatches  []string
		wantReplicas int64
		wantImages   []string // web, istio-proxy in desired order
	}{
		{
			name:         "hpa owns replicas",
			rule:         Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"}, ManagedFieldsManagers: []string{"kube-controller-manager"}},
			wantMatches:  []string{"/spec/replicas"},
			wantReplicas: 5,
			wantImages:   []string{"istio/proxyv2:1.23", "nginx:1.27"},
		},
		{
			name:         "policy engine owns one container image",
			rule:         Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"}, ManagedFieldsManagers: []string{"kyverno"}},
			wantMatches:  []string{"/spec/template/spec/containers/1/image"},
			wantReplicas: 2,
			// Only the owned image follows live; istio-proxy's differs but is
			// owned by Argo CD itself and stays as in Git.
			wantImages: []string{"istio/proxyv2:1.23", "registry.internal/nginx:1.27"},
		},
		{
			name:         "unknown manager changes nothing",
			rule:         Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"}, ManagedFieldsManagers: []string{"nobody"}},
			wantReplicas: 2,
			wantImages:   []string{"istio/proxyv2:1.23", "nginx:1.27"},
		},
		{
			name:         "rule for another object changes nothing",
			rule:         Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment", Name: "api"}, ManagedFieldsManagers: []string{"kube-controller-manager"}},
			wantReplicas: 2,
			wantImages:   []string{"istio/proxyv2:1.23", "nginx:1.27"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := mustCompile(t, tt.rule)
			config, live := obj(t, desiredDeploymentYAML), obj(t, liveDeploymentYAML)
			liveBefore := live.DeepCopy()
			ms, err := s.NormalizeManaged(config, live, tc)
			if err != nil {
				t.Fatalf("NormalizeManaged: %v", err)
			}
			if diff := cmp.Diff(tt.wantMatches, pointers(ms)); diff != "" {
				t.Errorf("matches (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(liveBefore.Object, live.Object); diff != "" {
				t.Errorf("live changed (-before +after):\n%s", diff)
			}
			replicas, _, _ := unstructured.NestedInt64(config.Object, "spec", "replicas")
			if replicas != tt.wantReplicas {
				t.Errorf("desired replicas = %d, want %d", replicas, tt.wantReplicas)
			}
			containers, _, _ := unstructured.NestedSlice(config.Object, "spec", "template", "spec", "containers")
			var images []string
			for _, c := range containers {
				images = append(images, c.(map[string]any)["image"].(string))
			}
			if diff := cmp.Diff(tt.wantImages, images); diff != "" {
				t.Errorf("desired images (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNormalizeManagedErrors(t *testing.T) {
	s := mustCompile(t, Rule{Tool: ArgoCD, Target: Target{Group: "apps", Kind: "Deployment"}, ManagedFieldsManagers: []string{"kyverno"}})
	config, live := obj(t, desiredDeploymentYAML), obj(t, liveDeploymentYAML)
	if _, err := s.NormalizeManaged(config, live, nil); err == nil {
		t.Error("want an error without a type converter")
	}
	if ms, err := s.NormalizeManaged(nil, live, nil); err != nil || ms != nil {
		t.Errorf("nil desired: %v %v", ms, err)
	}
	bad := obj(t, desiredDeploymentYAML)
	_ = unstructured.SetNestedField(bad.Object, "two", "spec", "replicas")
	if _, err := s.NormalizeManaged(bad, live, appsTypeConverter(t)); err == nil {
		t.Error("want an error for a desired object that does not fit the schema")
	}
}
