package kyverno

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func TestInstallFlags(t *testing.T) {
	helm := AdmissionPolicyFlags{GenerateValidatingAdmissionPolicy: true}
	tests := []struct {
		name     string
		args     string // the Deployment's container args; empty: no Deployment
		explicit *AdmissionPolicyFlags
		want     AdmissionPolicyFlags
		wantErr  string
	}{
		{name: "no Kyverno Deployment: the Helm chart's defaults", want: helm},
		{name: "other flags", args: `["--autoUpdateWebhooks=true"]`, want: helm},
		{name: "VAP off", args: `["--generateValidatingAdmissionPolicy=false"]`, want: AdmissionPolicyFlags{}},
		{name: "MAP on, one dash", args: `["-generateMutatingAdmissionPolicy=true"]`,
			want: AdmissionPolicyFlags{GenerateValidatingAdmissionPolicy: true, GenerateMutatingAdmissionPolicy: true}},
		{name: "value as the next argument", args: `["--generateValidatingAdmissionPolicy", "false"]`, want: AdmissionPolicyFlags{}},
		{name: "explicit wins", args: `["--generateValidatingAdmissionPolicy=false"]`, explicit: &helm, want: helm},
		{name: "not a boolean", args: `["--generateMutatingAdmissionPolicy=yes please"]`,
			wantErr: "the Kyverno installation (Deployment kyverno/kyverno-admission-controller): flag --generateMutatingAdmissionPolicy=yes please"},
		{name: "no value", args: `["--generateMutatingAdmissionPolicy"]`, wantErr: "without a value"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var objs []*unstructured.Unstructured
			if tt.args != "" {
				u := &unstructured.Unstructured{}
				doc := `{apiVersion: apps/v1, kind: Deployment, metadata: {name: kyverno-admission-controller, namespace: kyverno},
  spec: {template: {spec: {containers: [{name: kyverno, args: ` + tt.args + `}]}}}}`
				if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
					t.Fatal(err)
				}
				objs = append(objs, u)
			}
			got, err := installFlags(objs, tt.explicit)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got != tt.want {
				t.Fatalf("flags %+v, want %+v", got, tt.want)
			}
		})
	}
}
