package ignore

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// obj decodes a YAML fixture.
func obj(t testing.TB, doc string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	u := &unstructured.Unstructured{}
	b, err := yaml.YAMLToJSON([]byte(doc))
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
	if err := u.UnmarshalJSON(b); err != nil {
		t.Fatalf("fixture: %v", err)
	}
	return u
}

func mustCompile(t testing.TB, rules ...Rule) *Set {
	t.Helper()
	s, err := Compile(rules, Options{})
	if err != nil {
		t.Fatalf("Compile: %v", err)
	}
	return s
}

const deploymentYAML = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  namespace: shop
  labels:
    app: web
    tier: frontend
  annotations:
    example.com/config-hash: abc
    team: payments
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
      - name: web
        image: nginx:1.27
      - name: istio-proxy
        image: istio/proxyv2:1.22
`

const serviceYAML = `
apiVersion: v1
kind: Service
metadata:
  name: web
  namespace: shop
spec:
  clusterIP: 10.0.0.1
  ports:
  - port: 80
`

const configMapYAML = `
apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
  namespace: other
  labels:
    tier: backend
data:
  key: value
`
