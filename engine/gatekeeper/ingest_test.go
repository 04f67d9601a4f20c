package gatekeeper_test

import (
	"context"
	"strings"
	"testing"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/engine/gatekeeper"
)

// regoTemplate is a ConstraintTemplate K8sProbe whose Rego violation body
// is body, and a constraint of it matching ConfigMaps.
func regoTemplate(body string) string {
	return `
---
apiVersion: templates.gatekeeper.sh/v1
kind: ConstraintTemplate
metadata: {name: k8sprobe}
spec:
  crd:
    spec:
      names: {kind: K8sProbe}
  targets:
  - target: admission.k8s.gatekeeper.sh
    rego: |
      package k8sprobe
      violation[{"msg": msg}] {
        ` + body + `
      }
---
apiVersion: constraints.gatekeeper.sh/v1beta1
kind: K8sProbe
metadata: {name: probe}
spec:
  match:
    kinds: [{apiGroups: [""], kinds: [ConfigMap]}]
`
}

// TestTemplateIngestion: Gatekeeper creates a template's CRD only once its
// constraint framework ingests the template (constrainttemplate
// controller, handleUpdate), with the built-ins its flags allow; truce
// evaluates the templates it can run offline and names the others.
func TestTemplateIngestion(t *testing.T) {
	const (
		httpSend     = `response := http.send({"method": "get", "url": "https://example.com/"}); msg := response.body`
		externalData = `response := external_data({"provider": "p", "keys": ["a"]}); msg := sprintf("%v", [response])`
	)
	tests := []struct {
		name     string
		cluster  string
		crd      bool   // the constraint CRD is installed
		note     string // a substring of the engine's notes, "" for none
		wantUnpr string // for a ConfigMap the constraint matches
		denied   bool
	}{{
		name:    "Rego that compiles: evaluated",
		cluster: regoTemplate(`msg := "probed"`),
		crd:     true, denied: true,
	}, {
		name:    "Rego that does not parse: no CRD",
		cluster: regoTemplate(`msg := "probed" +`),
		note:    "ConstraintTemplate k8sprobe cannot be ingested, so no CRD is created for K8sProbe: ",
	}, {
		name:    "a CEL-only template with --enable-k8s-native-validation=false: no driver, no CRD",
		cluster: controllerManagerDeployment(`["--enable-k8s-native-validation=false"]`) + celTemplate(false),
		note:    "ConstraintTemplate k8scelrequiredowner cannot be ingested, so no CRD is created for K8sCELRequiredOwner: ",
	}, {
		// The manifests' --disable-opa-builtin={http.send} names no
		// built-in: Gatekeeper runs http.send, which truce does not.
		name:     "http.send under the manifests' flags: ingested, not evaluated",
		cluster:  controllerManagerDeployment(`["--disable-opa-builtin={http.send}"]`) + regoTemplate(httpSend),
		crd:      true,
		wantUnpr: "K8sProbe probe not evaluated: its ConstraintTemplate k8sprobe calls what truce does not call offline",
	}, {
		// A v1beta1 template's parameters schema without "type: object"
		// is fine: the API server stores it with legacySchema defaulted
		// to true (Gatekeeper's test/bats use_http_send_template.yaml).
		name: "a v1beta1 template relying on its CRD's defaults",
		cluster: strings.Replace(strings.Replace(regoTemplate(`msg := "probed"`), "templates.gatekeeper.sh/v1", "templates.gatekeeper.sh/v1beta1", 1),
			"      names: {kind: K8sProbe}\n", "      names: {kind: K8sProbe}\n      validation: {openAPIV3Schema: {properties: {invalidName: {type: string}}}}\n", 1),
		crd: true, denied: true,
	}, {
		name:    "http.send disabled: no CRD",
		cluster: controllerManagerDeployment(`["--disable-opa-builtin=http.send"]`) + regoTemplate(httpSend),
		note:    "undefined function http.send",
	}, {
		name:     "external_data: ingested, not evaluated",
		cluster:  regoTemplate(externalData),
		crd:      true,
		wantUnpr: "K8sProbe probe not evaluated",
	}, {
		name:    "external_data with --enable-external-data=false: no CRD",
		cluster: controllerManagerDeployment(`["--enable-external-data=false"]`) + regoTemplate(externalData),
		note:    "undefined function external_data",
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e, err := gatekeeper.New()
			if err != nil {
				t.Fatal(err)
			}
			objs := objects(t, namespaces+tc.cluster)
			inst, err := e.Install(context.Background(), objs)
			if err != nil {
				t.Fatal(err)
			}
			crd := false
			for _, o := range inst.Objects {
				if o.GetKind() == "CustomResourceDefinition" && strings.HasSuffix(o.GetName(), ".constraints.gatekeeper.sh") {
					crd = true
				}
			}
			if crd != tc.crd {
				t.Errorf("constraint CRD installed = %v, want %v", crd, tc.crd)
			}
			notes := strings.Join(e.Notes(), "\n")
			if tc.note == "" && notes != "" || !strings.Contains(notes, tc.note) {
				t.Errorf("notes = %q, want %q", notes, tc.note)
			}
			if !tc.crd {
				return // the constraint cannot be in a cluster: the chain refuses it
			}
			state, err := admission.NewState(objs...)
			if err != nil {
				t.Fatal(err)
			}
			chain, err := admission.NewChain(context.Background(), state, admission.Options{Engines: []admission.PolicyEngine{e}})
			if err != nil {
				t.Fatal(err)
			}
			defer chain.Close()
			res, err := chain.Admit(context.Background(), admission.Request{Object: objects(t, strings.ReplaceAll(configMap, "%s", "apps"))[0]})
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed == tc.denied {
				t.Errorf("allowed = %v (%s), want %v", res.Allowed, res.Message, !tc.denied)
			}
			unpr := strings.Join(res.Unpredictable, "; ")
			if tc.wantUnpr == "" && unpr != "" || !strings.Contains(unpr, tc.wantUnpr) {
				t.Errorf("unpredictable = %q, want %q", unpr, tc.wantUnpr)
			}
		})
	}
}
