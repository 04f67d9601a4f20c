package protocol

import (
	"strings"
	"testing"
)

func TestDecodeRequest(t *testing.T) {
	tests := []struct {
		name, line, wantErr string
	}{
		{name: "hello", line: `{"v":2,"id":1,"op":"hello"}`},
		{name: "load", line: `{"v":2,"id":2,"op":"load","load":{"objects":[]}}`},
		{name: "review", line: `{"v":2,"id":3,"op":"review","review":{"set":"s","path":"/mutate","review":{}}}`},
		{name: "unload", line: `{"v":2,"id":4,"op":"unload","set":"s"}`},
		{name: "other version", line: `{"v":1,"op":"hello"}`, wantErr: "protocol version 1, this helper speaks 2"},
		{name: "no version", line: `{"op":"hello"}`, wantErr: "protocol version 0"},
		{name: "unknown op", line: `{"v":2,"op":"apply"}`, wantErr: `unknown operation "apply"`},
		{name: "load without body", line: `{"v":2,"op":"load"}`, wantErr: "no load field"},
		{name: "review without set", line: `{"v":2,"op":"review","review":{"path":"/mutate","review":{}}}`, wantErr: "set, path and review are required"},
		{name: "unload without set", line: `{"v":2,"op":"unload"}`, wantErr: "no set"},
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
		`{"v":2,"id":1,"op":"hello"}`,
		`{"v":2,"id":2,"op":"load","load":{"objects":[{"kind":"Namespace"}],"caBundle":"AA=="}}`,
		`{"v":2,"id":3,"op":"review","review":{"set":"s","path":"/mutate","review":{}}}`,
		`{"v":2,"op":"unload","set":"x"}`,
		`{"v":2,"op":"load","load":null}`,
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
		case OpHello, OpUnload:
		default:
			t.Fatalf("unknown op %q accepted", req.Op)
		}
	})
}
