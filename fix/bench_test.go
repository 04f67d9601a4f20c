package fix

import (
	"fmt"
	"strings"
	"testing"
)

// BenchmarkCandidatesLargeFile proposes the fixes of one Deployment of a
// file of 10,000, as truce check does for every loop of a repository
// rendered into one file: the file is parsed once (NewSnapshot), and each
// problem's candidates should cost what its edit costs, not what the file
// does.
//
//	go test -run '^$' -bench CandidatesLargeFile -benchmem ./fix/
func BenchmarkCandidatesLargeFile(b *testing.B) {
	const docs = 10000
	var file strings.Builder
	lines := strings.Count(web, "\n")
	for i := range docs {
		if i > 0 {
			file.WriteString("---\n")
		}
		file.WriteString(strings.Replace(web, "name: web ", fmt.Sprintf("name: web-%d ", i), 1))
	}
	files := map[string]string{"app/web.yaml": file.String(), "argocd/app.yaml": app, "cluster/policy.yaml": policy}
	read := func(p string) ([]byte, error) {
		if s, ok := files[p]; ok {
			return []byte(s), nil
		}
		return nil, errNotExist
	}
	shared := NewSnapshot(read)
	problem := func(i int) Problem {
		return imageLoop(b, fmt.Sprintf("web-%d", i), 1+i*(lines+1))
	}
	if c, skipped := CandidatesFrom(problem(docs/2), shared); len(c) == 0 {
		b.Fatalf("no candidates (skipped %v)", skipped)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		CandidatesFrom(problem(i%docs), shared)
		i += 37
	}
}
