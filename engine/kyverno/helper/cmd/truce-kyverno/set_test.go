package main

import "testing"

func TestServerVersion(t *testing.T) {
	tests := []struct {
		in           string
		major, minor string
		git          string
		none, err    bool
	}{
		{in: "", none: true},
		{in: "1.37.2", major: "1", minor: "37", git: "v1.37.2"},
		{in: "v1.37.2", major: "1", minor: "37", git: "v1.37.2"},
		{in: "1", err: true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			v, err := serverVersion(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("error %v, want one: %v", err, tt.err)
			}
			if tt.err {
				return
			}
			if (v == nil) != tt.none {
				t.Fatalf("version %v, want none: %v", v, tt.none)
			}
			if v != nil && (v.Major != tt.major || v.Minor != tt.minor || v.String() != tt.git) {
				t.Errorf("version %+v, want %s.%s (%s)", v, tt.major, tt.minor, tt.git)
			}
		})
	}
}
