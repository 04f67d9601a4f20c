package lint

import (
	"context"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// RuleKubewardenNotEvaluated names the Kubewarden policies of the input
// whose PolicyServer webhook is not in it either: truce cannot run their
// WebAssembly modules, and without the webhook the writes they judge are
// predicted without them. Said once per policy rather than never.
const RuleKubewardenNotEvaluated = "kubewarden-policy-not-evaluated"

const (
	kubewardenGroup = "policies.kubewarden.io"
	// kubewardenServicePrefix is how kubewarden-controller names the
	// Service of a PolicyServer: policy-server-<name>.
	kubewardenServicePrefix = "policy-server-"

	whyKubewardenNotEvaluated = "Kubewarden policies are WebAssembly modules that only a PolicyServer runs: kubewarden-controller turns each " +
		"policy into a webhook of its PolicyServer at run time. truce calls that webhook when its configuration is in the input " +
		"(-c, --kubeconfig) and --webhook-endpoint says where the PolicyServer is reachable; without the configuration the writes " +
		"the policy judges are predicted as if it did not exist."
	fixKubewardenNotEvaluated = "Give truce the cluster's webhook configurations (kubectl get validatingwebhookconfigurations," +
		"mutatingwebhookconfigurations -o yaml > webhooks.yaml; -c webhooks.yaml) and the PolicyServer's address " +
		"(kubectl -n kubewarden port-forward svc/policy-server-%[1]s 8443:PORT; --webhook-endpoint kubewarden/policy-server-%[1]s=https://127.0.0.1:8443); " +
		"see docs/policy-engines.md."
)

var kubewardenPolicyKinds = []string{"ClusterAdmissionPolicy", "AdmissionPolicy", "ClusterAdmissionPolicyGroup", "AdmissionPolicyGroup"}

// checkKubewardenNotEvaluated: a Kubewarden policy whose PolicyServer
// (spec.policyServer, "default" when unset) no webhook configuration of
// the input calls.
func checkKubewardenNotEvaluated(_ context.Context, in *Input) ([]Finding, error) {
	cfgs, err := webhookConfigs(in)
	if err != nil {
		return nil, err
	}
	served := map[string]bool{}
	for _, c := range cfgs {
		for _, w := range c.hooks {
			if w.service != nil {
				served[w.service.Name] = true
			}
		}
	}
	var out []Finding
	for _, o := range in.Objects {
		gvk := o.Object.GroupVersionKind()
		if gvk.Group != kubewardenGroup || !slices.Contains(kubewardenPolicyKinds, gvk.Kind) {
			continue
		}
		server, _, _ := unstructured.NestedString(o.Object.Object, "spec", "policyServer")
		if server == "" {
			server = "default"
		}
		if served[kubewardenServicePrefix+server] {
			continue
		}
		what := fmt.Sprintf("Kubewarden %s %q", gvk.Kind, o.Object.GetName())
		if module, _, _ := unstructured.NestedString(o.Object.Object, "spec", "module"); module != "" {
			what += " (" + module + ")"
		}
		msg := fmt.Sprintf("%s is not evaluated: no webhook configuration of the input calls its PolicyServer %q", what, server)
		out = append(out, finding(o, msg, whyKubewardenNotEvaluated, fmt.Sprintf(fixKubewardenNotEvaluated, server)))
	}
	return out, nil
}
