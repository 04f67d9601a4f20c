package ignore

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePointer(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr string
	}{
		{in: "", want: nil},
		{in: "/", want: []string{""}},
		{in: "/spec/replicas", want: []string{"spec", "replicas"}},
		{in: "/metadata/annotations/example.com~1config-hash", want: []string{"metadata", "annotations", "example.com/config-hash"}},
		{in: "/a~0b", want: []string{"a~b"}},
		{in: "/a~01", want: []string{"a~1"}},
		{in: "/a~10", want: []string{"a/0"}},
		{in: "/spec/containers/0", want: []string{"spec", "containers", "0"}},
		{in: "//", want: []string{"", ""}},
		{in: "spec/replicas", wantErr: `must start with "/"`},
		{in: "/a~2", wantErr: `"~" must be written "~0"`},
		{in: "/a~", wantErr: `"~" must be written "~0"`},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := ParsePointer(tt.in)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParsePointer(%q) error = %v, want %q", tt.in, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("ParsePointer(%q): %v", tt.in, err)
			}
			if !slices.Equal(got, tt.want) {
				t.Fatalf("ParsePointer(%q) = %q, want %q", tt.in, got, tt.want)
			}
			if back := FormatPointer(got); back != tt.in {
				t.Fatalf("FormatPointer(%q) = %q, want %q", got, back, tt.in)
			}
		})
	}
}
