//go:build !e2e

// Command localcluster needs the e2e build tag: it links kube-apiserver,
// which plain builds leave out to stay fast. See main.go.
package main

import (
	"fmt"
	"os"
)

func main() {
	fmt.Fprintln(os.Stderr, "localcluster is built with the e2e tag: go run -tags e2e ./e2e/cmd/localcluster")
	os.Exit(2)
}
