package ignore

import "testing"

func TestGlob(t *testing.T) {
	tests := []struct {
		pattern, text string
		want          bool
	}{
		{"", "", true},
		{"", "apps", false},
		{"*", "", true},
		{"*", "apps", true},
		{"*", "cert-manager.io", true},
		{"apps", "apps", true},
		{"apps", "apps2", false},
		{"*.k8s.io", "admissionregistration.k8s.io", true},
		{"*.k8s.io", "k8s.io", false},
		{"Deploy*", "Deployment", true},
		{"Deploy", "Deployment", false},
		{"?ob", "Job", true},
		{"{Deployment,StatefulSet}", "StatefulSet", true},
		{"{Deployment,StatefulSet}", "DaemonSet", false},
		{"[CD]ronJob", "CronJob", true},
		{"[!C]ronJob", "CronJob", false},
		{"[a-c]pps", "apps", true},
		{`a\*`, "a*", true},
		{`a\*`, "ab", false},
		{"a.b", "axb", false},
		{"a,b", "a,b", true},
	}
	for _, tt := range tests {
		re, err := compileGlob(tt.pattern)
		if err != nil {
			t.Fatalf("compileGlob(%q): %v", tt.pattern, err)
		}
		if got := re.MatchString(tt.text); got != tt.want {
			t.Errorf("glob %q on %q = %v, want %v", tt.pattern, tt.text, got, tt.want)
		}
	}
	for _, bad := range []string{"[abc", "{a,b", "a}", `a\`, "[]", "[z-a]"} {
		if _, err := compileGlob(bad); err == nil {
			t.Errorf("compileGlob(%q) succeeded, want error", bad)
		}
	}
}
