package toolkit

import "testing"

func BenchmarkCRDs(b *testing.B) {
	for b.Loop() {
		if _, err := CRDs(); err != nil {
			b.Fatal(err)
		}
	}
}
