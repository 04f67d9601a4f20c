package protocol

import (
	"strings"
	"testing"
)

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name, line, wantErr string
	}{
		{name: "hello", line: `{"v":9,"id":1,"op":"hello"}`},
		{name: "load", line: `{"v":9,"id":2,"op":"load","load":{"objects":[]}}`},
		{name: "review", line: `{"v":9,"id":3,"op":"review","review":{"set":"s","path":"/mutate","review":{}}}`},
		{name: "unload", line: `{"v":9,"id":4,"op":"unload","set":"s"}`},
		{name: "other version", line: `{"v":1,"op":"hello"}`, wantErr: "protocol version 1, this helper speaks 9"},
		{name: "no version", line: `{"op":"hello"}`, wantErr: "protocol version 0"},
		{name: "unknown op", line: `{"v":9,"op":"apply"}`, wantErr: `unknown operation "apply"`},
		{name: "load without body", line: `{"v":9,"op":"load"}`, wantErr: "no load field"},
		{name: "review without set", line: `{"v":9,"op":"review","review":{"path":"/mutate","review":{}}}`, wantErr: "set, path and review are required"},
		{name: "unload without set", line: `{"v":9,"op":"unload"}`, wantErr: "no set"},
		{name: "generate rules", line: `{"v":9,"id":5,"op":"generate","generate":{"policies":[]}}`},
		{name: "generate for a trigger", line: `{"v":9,"id":6,"op":"generate","generate":{"policies":[],"trigger":{"kind":"Namespace"},"operation":"CREATE"}}`},
		{name: "generate without body", line: `{"v":9,"op":"generate"}`, wantErr: "no generate field"},
		{name: "generate for a deletion", line: `{"v":9,"op":"generate","generate":{"trigger":{},"operation":"DELETE"}}`, wantErr: `operation "DELETE", want CREATE or UPDATE`},
		{name: "mutate existing", line: `{"v":9,"id":7,"op":"mutateExisting","generate":{"policies":[],"trigger":{"kind":"ConfigMap"},"operation":"UPDATE"}}`},
		{name: "mutate existing without body", line: `{"v":9,"op":"mutateExisting"}`, wantErr: "mutateExisting: no generate field"},
		{name: "version 2", line: `{"v":2,"op":"hello"}`, wantErr: "protocol version 2, this helper speaks 9"},
		{name: "version 3", line: `{"v":3,"op":"hello"}`, wantErr: "protocol version 3, this helper speaks 9"},
		{name: "version 4", line: `{"v":4,"op":"deleting","generate":{}}`, wantErr: "protocol version 4, this helper speaks 9"},
		{name: "version 6", line: `{"v":6,"op":"deleting","generate":{}}`, wantErr: "protocol version 6, this helper speaks 9"},
		{name: "version 7", line: `{"v":7,"op":"load","load":{"objects":[]}}`, wantErr: "protocol version 7, this helper speaks 9"},
		{name: "version 8", line: `{"v":8,"op":"load","load":{"objects":[]}}`, wantErr: "protocol version 8, this helper speaks 9"},
		{name: "cleanup policy", line: `{"v":9,"id":10,"op":"deleting","generate":{"policies":[],"policy":"ns/old","policyKind":"CleanupPolicy","objects":[]}}`},
		{name: "admission policies", line: `{"v":9,"id":8,"op":"admissionPolicies","admissionPolicies":{"objects":[],"generateValidatingAdmissionPolicy":true}}`},
		{name: "admission policies without body", line: `{"v":9,"op":"admissionPolicies"}`, wantErr: "no admissionPolicies field"},
		{name: "deleting policies", line: `{"v":9,"id":8,"op":"deleting","generate":{"policies":[]}}`},
		{name: "deleting for a policy", line: `{"v":9,"id":9,"op":"deleting","generate":{"policies":[],"policy":"cleanup","objects":[]}}`},
		{name: "deleting without body", line: `{"v":9,"op":"deleting"}`, wantErr: "deleting: no generate field"},
		{name: "not JSON", line: `hello`, wantErr: "decoding a request"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := DecodeRequest([]byte(tt.line))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("error %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("error %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func FuzzDecodeRequest(f *testing.F) {
	for _, s := range []string{
		`{"v":9,"id":1,"op":"hello"}`,
		`{"v":9,"id":2,"op":"load","load":{"objects":[{"kind":"Namespace"}],"caBundle":"AA=="}}`,
		`{"v":9,"id":3,"op":"review","review":{"set":"s","path":"/mutate","review":{}}}`,
		`{"v":9,"op":"unload","set":"x"}`,
		`{"v":9,"op":"load","load":null}`,
		`{"v":9,"op":"generate","generate":{"policies":[],"trigger":{"kind":"Namespace"},"operation":"CREATE"}}`,
		`{"v":9,"op":"admissionPolicies","admissionPolicies":{"objects":[{"kind":"MutatingPolicy"}]}}`,
		`{"v":9,"op":"deleting","generate":{"policies":[],"policy":"cleanup"}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		req, err := DecodeRequest(line)
		if err != nil {
			return
		}
		// A request that decodes is one handle can act on without
		// dereferencing nil.
		switch req.Op {
		case OpLoad:
			if req.Load == nil {
				t.Fatal("load without a load field accepted")
			}
		case OpReview:
			if req.Review == nil || req.Review.Set == "" {
				t.Fatal("review without a set accepted")
			}
		case OpGenerate, OpMutateExisting, OpDeleting:
			if req.Generate == nil {
				t.Fatal("generate without a generate field accepted")
			}
		case OpAdmissionPolicies:
			if req.AdmissionPolicies == nil {
				t.Fatal("admissionPolicies without a body accepted")
			}
		case OpHello, OpUnload:
		default:
			t.Fatalf("unknown op %q accepted", req.Op)
		}
	})
}
