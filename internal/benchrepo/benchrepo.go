// Package benchrepo writes the repository truce's benchmarks check: n
// objects (Deployments, ConfigMaps and Services in equal parts) and 20
// admission policies.
package benchrepo

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Write writes a repository of n objects (Deployments, ConfigMaps and
// Services in equal parts, in objects.yaml) and 20 admission policies (in
// policies.yaml) to dir: 10 mutating (one mirrors the images of team t0's
// Deployments, a field Git sets: those loop under Argo CD; the others add
// a label Git does not set) and 10 validating (all pass). No GitOps
// settings: both tools are simulated.
func Write(dir string, n int) error {
	var pol strings.Builder
	pol.WriteString("apiVersion: v1\nkind: Namespace\nmetadata: {name: bench}\n")
	for i := 0; i < 10; i++ {
		expr := fmt.Sprintf(`Object{metadata: Object.metadata{labels: {"policy-%d": "applied"}}}`, i)
		if i == 0 {
			expr = `Object{spec: Object.spec{template: Object.spec.template{spec: Object.spec.template.spec{containers: object.spec.template.spec.containers.filter(c, !c.image.startsWith("registry.internal/")).map(c, Object.spec.template.spec.containers{name: c.name, image: "registry.internal/" + c.image})}}}}`
		}
		fmt.Fprintf(&pol, `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicy
metadata: {name: mutate-%[1]d}
spec:
  failurePolicy: Fail
  reinvocationPolicy: Never
  matchConstraints:
    objectSelector: {matchLabels: {team: t%[1]d}}
    resourceRules:
    - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["deployments"]}
  mutations:
  - patchType: ApplyConfiguration
    applyConfiguration:
      expression: '%[2]s'
---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingAdmissionPolicyBinding
metadata: {name: mutate-%[1]d}
spec: {policyName: mutate-%[1]d}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: validate-%[1]d}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - {apiGroups: ["apps"], apiVersions: ["v1"], operations: ["CREATE", "UPDATE"], resources: ["deployments"]}
  validations:
  - expression: "object.spec.replicas <= %[3]d"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: validate-%[1]d}
spec: {policyName: validate-%[1]d, validationActions: [Deny]}
`, i, expr, 50+i)
	}
	if err := os.WriteFile(filepath.Join(dir, "policies.yaml"), []byte(pol.String()), 0o644); err != nil {
		return err
	}
	var objs strings.Builder
	for i := 0; i < n; i++ {
		if i > 0 {
			objs.WriteString("---\n")
		}
		team := i % 10
		switch i % 3 {
		case 0:
			fmt.Fprintf(&objs, "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app-%d, namespace: bench, labels: {team: t%d}}\nspec:\n  replicas: 2\n  selector: {matchLabels: {app: app-%d}}\n  template:\n    metadata: {labels: {app: app-%d}}\n    spec:\n      containers:\n      - {name: app, image: \"nginx:1.27\"}\n", i, team, i, i)
		case 1:
			fmt.Fprintf(&objs, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: config-%d, namespace: bench}\ndata: {key: value-%d}\n", i, i)
		case 2:
			fmt.Fprintf(&objs, "apiVersion: v1\nkind: Service\nmetadata: {name: svc-%d, namespace: bench}\nspec:\n  selector: {app: app-%d}\n  ports:\n  - {port: 80, targetPort: 8080}\n", i, i)
		}
	}
	return os.WriteFile(filepath.Join(dir, "objects.yaml"), []byte(objs.String()), 0o644)
}
