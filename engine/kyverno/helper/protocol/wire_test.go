package protocol

import (
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestWireFormat pins the JSON of each message with every field set (and
// with none): the field names both sides read. truce and the helper share
// these types, so a renamed tag would not break either side's tests, only
// a truce and a helper built from different commits: the version must
// change with it, and this test says so.
func TestWireFormat(t *testing.T) {
	raw := json.RawMessage(`{"kind":"X"}`)
	resources := []*metav1.APIResourceList{{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Kind: "Pod", Namespaced: true}}}}
	tests := []struct {
		name string
		msg  any
		want string
	}{
		{
			name: "empty request",
			msg:  &Request{},
			want: `{"v":0,"id":0,"op":""}`,
		},
		{
			name: "load",
			msg: &Request{V: ProtocolVersion, ID: 1, Op: OpLoad, Load: &LoadRequest{
				Objects: []json.RawMessage{raw}, Resources: resources, CABundle: []byte("ca"), ServerVersion: "1.37.2", OpenAPI: map[string][]byte{"api/v1": []byte("d")},
			}},
			want: `{"v":9,"id":1,"op":"load","load":{"objects":[{"kind":"X"}],"resources":[{"groupVersion":"v1","resources":[{"name":"pods","singularName":"","namespaced":true,"kind":"Pod","verbs":null}]}],"caBundle":"Y2E=","serverVersion":"1.37.2","openAPI":{"api/v1":"ZA=="}}}`,
		},
		{
			name: "empty load",
			msg:  &LoadRequest{},
			want: `{"objects":null,"resources":null,"caBundle":null}`,
		},
		{
			name: "review and unload",
			msg:  &Request{V: ProtocolVersion, Op: OpReview, Set: "s", Review: &ReviewRequest{Set: "s", Path: "/mutate", Review: raw}},
			want: `{"v":9,"id":0,"op":"review","review":{"set":"s","path":"/mutate","review":{"kind":"X"}},"set":"s"}`,
		},
		{
			name: "background",
			msg: &Request{V: ProtocolVersion, Op: OpDeleting, Generate: &BackgroundRequest{
				Policies: []json.RawMessage{raw}, Resources: resources, Trigger: raw, Operation: "CREATE",
				NamespaceLabels: map[string]string{"a": "b"}, Objects: []json.RawMessage{raw}, OpenAPI: map[string][]byte{"p": []byte("d")},
				Policy: "ns/p", Rule: "r", PolicyKind: "CleanupPolicy",
			}},
			want: `{"v":9,"id":0,"op":"deleting","generate":{"policies":[{"kind":"X"}],"resources":[{"groupVersion":"v1","resources":[{"name":"pods","singularName":"","namespaced":true,"kind":"Pod","verbs":null}]}],"trigger":{"kind":"X"},"operation":"CREATE","namespaceLabels":{"a":"b"},"objects":[{"kind":"X"}],"openAPI":{"p":"ZA=="},"policy":"ns/p","rule":"r","policyKind":"CleanupPolicy"}}`,
		},
		{
			name: "empty background",
			msg:  &BackgroundRequest{},
			want: `{"policies":null,"resources":null}`,
		},
		{
			name: "admission policies",
			msg: &Request{V: ProtocolVersion, Op: OpAdmissionPolicies, AdmissionPolicies: &AdmissionPoliciesRequest{
				Objects: []json.RawMessage{raw}, GenerateValidatingAdmissionPolicy: true,
			}},
			want: `{"v":9,"id":0,"op":"admissionPolicies","admissionPolicies":{"objects":[{"kind":"X"}],"resources":null,"generateValidatingAdmissionPolicy":true,"generateMutatingAdmissionPolicy":false}}`,
		},
		{
			name: "response",
			msg: &Response{
				V: ProtocolVersion, ID: 2, Error: "e", Kyverno: "v1.19.1", Set: "s", Webhooks: []json.RawMessage{raw}, Warnings: []string{"w"},
				Review: raw, Unpredictable: []string{"u"},
				Generate: &BackgroundResponse{
					Rules: []BackgroundRule{{
						Policy: "p", Rule: "r", PolicyKind: "ClusterCleanupPolicy", Kinds: []string{"Pod"}, Synchronize: true, APIVersion: "v1", Kind: "ConfigMap",
						Namespace: "n", Name: "m", Clone: "n/c", CloneList: []string{"Secret"}, CloneNamespace: "cn",
						Targets: []string{"apps/v1/Deployment"}, Schedule: "* * * * *", CEL: true, Unpredictable: "why",
					}},
					Writes: []Write{{Op: "delete", Object: raw}},
					Errors: []string{"err"},
				},
				AdmissionPolicies: &AdmissionPoliciesResponse{
					Objects:  []json.RawMessage{raw},
					Statuses: []AdmissionPolicyStatus{{Kind: "ClusterPolicy", Name: "c", Generated: true, Message: "m"}},
					Warnings: []string{"w"},
				},
			},
			want: `{"v":9,"id":2,"error":"e","kyverno":"v1.19.1","set":"s","webhooks":[{"kind":"X"}],"warnings":["w"],"review":{"kind":"X"},"unpredictable":["u"],` +
				`"generate":{"rules":[{"policy":"p","rule":"r","policyKind":"ClusterCleanupPolicy","kinds":["Pod"],"synchronize":true,"apiVersion":"v1","kind":"ConfigMap","namespace":"n","name":"m","clone":"n/c","cloneList":["Secret"],"cloneNamespace":"cn","targets":["apps/v1/Deployment"],"schedule":"* * * * *","cel":true,"unpredictable":"why"}],"writes":[{"op":"delete","object":{"kind":"X"}}],"errors":["err"]},` +
				`"admissionPolicies":{"objects":[{"kind":"X"}],"statuses":[{"kind":"ClusterPolicy","name":"c","generated":true,"message":"m"}],"warnings":["w"]}}`,
		},
		{
			name: "empty response",
			msg:  &Response{},
			want: `{"v":0,"id":0}`,
		},
		{
			name: "empty rule",
			msg:  &BackgroundRule{},
			want: `{"policy":"","rule":"","kinds":null}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.msg)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tt.want {
				t.Fatalf("encoded\n %s\nwant\n %s", got, tt.want)
			}
		})
	}
}
