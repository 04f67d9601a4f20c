// Package schema holds the type information truce needs to behave like
// kube-apiserver 1.37.2: which resources exist (built-ins a default server
// serves, plus CRDs), their scope and subresources, which resources are
// equivalent for matchPolicy, and the OpenAPI v3 documents from which
// server-side-apply type converters are built.
//
// Built-in documents are copied, gzipped, from the pinned k8s.io/kubernetes
// module by `go generate ./schema`; nothing is deduced from Go types.
package schema
