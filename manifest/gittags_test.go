package manifest

import (
	"context"
	"slices"
	"testing"
)

func TestGitTags(t *testing.T) {
	r := newTestRepo(t)
	for _, tc := range []struct {
		name string
		url  string
	}{
		{"local", r.dir},
		{"remote", fileURL(t, r.dir)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := GitTags(context.Background(), GitSource{URL: tc.url, Ref: "feature"})
			if err != nil {
				t.Fatal(err)
			}
			if want := []string{"v1", "v1-light"}; !slices.Equal(got, want) {
				t.Errorf("tags = %q, want %q", got, want)
			}
		})
	}
	if _, err := GitTags(context.Background(), GitSource{URL: t.TempDir()}); err == nil {
		t.Error("a directory that is no repository: no error")
	}
}
