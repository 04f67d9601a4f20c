package gatekeeper

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestReadFlags(t *testing.T) {
	deploy := func(name, labels, args string) string {
		return `{apiVersion: apps/v1, kind: Deployment, metadata: {name: ` + name + `, namespace: gatekeeper-system` + labels + `},
  spec: {template: {spec: {containers: [{name: manager, args: ` + args + `}]}}}}`
	}
	app := func(spec string) string {
		return `{apiVersion: argoproj.io/v1alpha1, kind: Application, metadata: {name: gatekeeper, namespace: argocd}, spec: ` + spec + `}`
	}
	const chart = `chart: gatekeeper, repoURL: https://open-policy-agent.github.io/gatekeeper/charts, targetRevision: 3.23.1`
	on := Flags{GeneratorExpansion: true, K8sNativeValidation: true, ReferentialRules: true, ExternalData: true}
	shipped := []string{"{http.send}"} // the chart's default, which names no built-in
	with := func(f func(*Flags)) Flags {
		out := on
		f(&out)
		return out
	}
	tests := []struct {
		name    string
		objs    []string
		want    Flags
		wantErr string
	}{{
		name: "nothing installs Gatekeeper: its manifests' defaults",
		want: DefaultFlags(),
	}, {
		name: "Gatekeeper's manifests",
		objs: []string{deploy("gatekeeper-controller-manager", "", `["--port=8443", "--logtostderr", "--exempt-namespace=gatekeeper-system", "--operation=webhook", "--operation=mutation-webhook", "--disable-opa-builtin={http.send}"]`)},
		want: DefaultFlags(),
	}, {
		name: "exempt namespaces, prefixes and suffixes; one dash, value as the next argument",
		objs: []string{deploy("gatekeeper-controller-manager", "", `["--exempt-namespace=gatekeeper-system", "-exempt-namespace", "kube-system", "--exempt-namespace-prefix=team-", "--exempt-namespace-suffix=-infra"]`)},
		want: with(func(f *Flags) {
			f.ExemptNamespaces = []string{"gatekeeper-system", "kube-system"}
			f.ExemptNamespacePrefixes = []string{"team-"}
			f.ExemptNamespaceSuffixes = []string{"-infra"}
		}),
	}, {
		name: "no --exempt-namespace: nothing is exempt",
		objs: []string{deploy("gatekeeper-controller-manager", "", `["--operation=webhook"]`)},
		want: on,
	}, {
		name: "features off; a boolean without a value is true",
		objs: []string{deploy("gatekeeper-controller-manager", "", `["--enable-generator-resource-expansion=false", "--enable-k8s-native-validation=false", "--enable-referential-rules=false", "--disable-enforcementaction-validation", "--enable-external-data=false", "--disable-opa-builtin=http.send", "-disable-opa-builtin", "net.lookup_ip_addr"]`)},
		want: Flags{DisableEnforcementActionValidation: true, DisabledBuiltins: []string{"http.send", "net.lookup_ip_addr"}},
	}, {
		name: "found by its label under another name",
		objs: []string{deploy("policy-webhook", ", labels: {gatekeeper.sh/operation: webhook}", `["--exempt-namespace=policy"]`)},
		want: with(func(f *Flags) { f.ExemptNamespaces = []string{"policy"} }),
	}, {
		name: "the audit Deployment is not the webhook's",
		objs: []string{deploy("gatekeeper-audit", ", labels: {gatekeeper.sh/operation: audit}", `["--exempt-namespace=audit-only"]`)},
		want: DefaultFlags(),
	}, {
		name:    "not a boolean",
		objs:    []string{deploy("gatekeeper-controller-manager", "", `["--enable-k8s-native-validation=maybe"]`)},
		wantErr: "reading Gatekeeper's Deployment gatekeeper-system/gatekeeper-controller-manager: flag --enable-k8s-native-validation=maybe",
	}, {
		name:    "a list flag without a value",
		objs:    []string{deploy("gatekeeper-controller-manager", "", `["--exempt-namespace"]`)},
		wantErr: "flag --exempt-namespace without a value",
	}, {
		name: "two controller managers that disagree",
		objs: []string{
			deploy("gatekeeper-controller-manager", "", `["--exempt-namespace=a"]`),
			deploy("gatekeeper-webhook-2", ", labels: {gatekeeper.sh/operation: webhook}", `["--exempt-namespace=b"]`),
		},
		wantErr: "have different flags",
	}, {
		name: "Argo CD Application of Gatekeeper's chart: the release namespace and the values",
		objs: []string{app(`{destination: {namespace: policy}, source: {` + chart + `, helm: {valuesObject: {
  controllerManager: {exemptNamespaces: [kube-system], exemptNamespacePrefixes: [team-], exemptNamespaceSuffixes: [-infra]},
  enableGeneratorResourceExpansion: false, enableK8sNativeValidation: "false"}}}}`)},
		want: Flags{ExemptNamespaces: []string{"policy", "kube-system"}, ExemptNamespacePrefixes: []string{"team-"},
			ExemptNamespaceSuffixes: []string{"-infra"}, ReferentialRules: true, ExternalData: true, DisabledBuiltins: shipped},
	}, {
		name: "the chart's disabledBuiltins and enableExternalData",
		objs: []string{app(`{destination: {namespace: gatekeeper-system}, source: {` + chart + `, helm: {valuesObject: {
  disabledBuiltins: [http.send], enableExternalData: false}}}}`)},
		want: with(func(f *Flags) {
			f.ExemptNamespaces = []string{"gatekeeper-system"}
			f.DisabledBuiltins = []string{"http.send"}
			f.ExternalData = false
		}),
	}, {
		name: "values as YAML text, a parameter overriding them",
		objs: []string{app(`{destination: {namespace: gatekeeper-system}, sources: [{` + chart + `, helm: {
  values: "enableReferentialRules: false\ndisableEnforcementActionValidation: true\n",
  parameters: [{name: enableReferentialRules, value: "true"}]}}]}`)},
		want: with(func(f *Flags) {
			f.ExemptNamespaces = []string{"gatekeeper-system"}
			f.DisableEnforcementActionValidation = true
			f.DisabledBuiltins = shipped
		}),
	}, {
		// Argo CD passes valuesObject instead of values, not merged with them.
		name: "valuesObject replaces values",
		objs: []string{app(`{destination: {namespace: gatekeeper-system}, source: {` + chart + `, helm: {
  values: "enableReferentialRules: false\n",
  valuesObject: {disableEnforcementActionValidation: true}}}}`)},
		want: with(func(f *Flags) {
			f.ExemptNamespaces = []string{"gatekeeper-system"}
			f.DisableEnforcementActionValidation = true
			f.DisabledBuiltins = shipped
		}),
	}, {
		name: "nested parameters as helm --set and --set-string read them",
		objs: []string{app(`{destination: {namespace: gatekeeper-system}, source: {` + chart + `, helm: {
  valuesObject: {controllerManager: {exemptNamespaces: [a, b]}},
  parameters: [{name: "controllerManager.exemptNamespaces[1]", value: c}, {name: enableK8sNativeValidation, value: "false", forceString: true}]}}}`)},
		want: with(func(f *Flags) {
			f.ExemptNamespaces = []string{"gatekeeper-system", "a", "c"}
			f.K8sNativeValidation = false
			f.DisabledBuiltins = shipped
		}),
	}, {
		name:    "a parameter Helm cannot parse",
		objs:    []string{app(`{destination: {namespace: x}, source: {` + chart + `, helm: {parameters: [{name: "a[x]", value: "1"}]}}}`)},
		wantErr: "spec.source.helm.parameters: --set a[x]=1",
	}, {
		name:    "helm values of the wrong type",
		objs:    []string{app(`{destination: {namespace: x}, source: {` + chart + `, helm: {values: {a: 1}}}}`)},
		wantErr: "spec.source.helm.values",
	}, {
		name: "the Deployment wins over an Application",
		objs: []string{
			app(`{destination: {namespace: policy}, source: {` + chart + `}}`),
			deploy("gatekeeper-controller-manager", "", `["--exempt-namespace=from-deployment"]`),
		},
		want: with(func(f *Flags) { f.ExemptNamespaces = []string{"from-deployment"} }),
	}, {
		name: "another chart",
		objs: []string{app(`{destination: {namespace: x}, source: {chart: kyverno, repoURL: https://kyverno.github.io/kyverno}}`)},
		want: DefaultFlags(),
	}, {
		name:    "disabledBuiltins that is not a list",
		objs:    []string{app(`{destination: {namespace: x}, source: {` + chart + `, helm: {valuesObject: {disabledBuiltins: http.send}}}}`)},
		wantErr: "disabledBuiltins: http.send is not a list",
	}, {
		name:    "values that are not YAML",
		objs:    []string{app(`{destination: {namespace: x}, source: {` + chart + `, helm: {values: "a: [b"}}}`)},
		wantErr: "reading Gatekeeper's flags from Argo CD Application argocd/gatekeeper: spec.source.helm.values",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []*unstructured.Unstructured
			for _, doc := range tt.objs {
				u := &unstructured.Unstructured{}
				if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
					t.Fatal(err)
				}
				objs = append(objs, u)
			}
			got, err := readFlags(objs)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(Flags{}, "From"), cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("flags (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExempt(t *testing.T) {
	f := Flags{ExemptNamespaces: []string{"kube-system"}, ExemptNamespacePrefixes: []string{"team-"}, ExemptNamespaceSuffixes: []string{"-infra"}}
	for ns, want := range map[string]bool{
		"kube-system": true, "team-a": true, "net-infra": true,
		"kube-public": false, "a-team-": false, "infra-net": false, "gatekeeper-system": false,
	} {
		if got := f.exempt(ns); got != want {
			t.Errorf("exempt(%q) = %v, want %v", ns, got, want)
		}
	}
}

// FuzzParseFlags: any container args parse without a panic, and a list
// flag given first as --name=value is read whatever follows it.
func FuzzParseFlags(f *testing.F) {
	for _, seed := range []string{"--exempt-namespace=a", "-exempt-namespace\x00b", "--enable-k8s-native-validation=false", "--", "-", "--exempt-namespace", "--disable-enforcementaction-validation"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, joined string) {
		args := append([]string{"--exempt-namespace=fuzz-first"}, strings.Split(joined, "\x00")...)
		var fl Flags
		_ = fl.parse(args)
		if len(fl.ExemptNamespaces) == 0 || fl.ExemptNamespaces[0] != "fuzz-first" {
			t.Fatalf("parse(%q): exempt namespaces %q, want fuzz-first first", args, fl.ExemptNamespaces)
		}
	})
}
