package world

import "testing"

func TestNormalizeRepoURL(t *testing.T) {
	want := "github.com/argoproj/argocd-example-apps"
	for _, in := range []string{
		"https://github.com/argoproj/argocd-example-apps.git",
		"https://github.com/argoproj/argocd-example-apps",
		"https://GitHub.com/argoproj/argocd-example-apps/",
		"git@github.com:argoproj/argocd-example-apps.git",
		"ssh://git@github.com/argoproj/argocd-example-apps",
		"ssh://git@github.com:22/argoproj/argocd-example-apps.git",
	} {
		if got := NormalizeRepoURL(in); got != want {
			t.Errorf("NormalizeRepoURL(%q) = %q, want %q", in, got, want)
		}
	}
	for _, in := range []string{"https://github.com/argoproj/other", "https://gitlab.com/argoproj/argocd-example-apps"} {
		if NormalizeRepoURL(in) == want {
			t.Errorf("NormalizeRepoURL(%q) names the example repository", in)
		}
	}
	if s := newRepoSet("", "  "); len(s) != 0 {
		t.Errorf("empty URLs name a repository: %v", s)
	}
}
