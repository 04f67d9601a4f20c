// Package manifest loads Kubernetes manifests from files, directories,
// kustomizations, Git revisions and streams, and remembers where every
// object came from.
//
// truce reports drift and admission problems against the files a user keeps
// in Git, so an object is only useful to it together with the file and line
// it was written on. The decoding itself deliberately mirrors kubectl
// (k8s.io/apimachinery's YAMLOrJSONDecoder followed by sigs.k8s.io/yaml): a
// scalar such as `yes`, `0x1F` or `1e3` becomes the same JSON value here as
// it does when the file is applied with kubectl, so the objects truce
// compares are the objects the API server would have received.
//
// Positions come from a separate pass with the go.yaml.in/yaml/v3 node API,
// which never expands aliases; that pass is also where hostile input (alias
// bombs, absurd nesting, duplicate keys) is rejected before the
// alias-expanding kubectl decoder ever sees it.
//
// Directories with a kustomization are rendered in process with
// sigs.k8s.io/kustomize/api/krusty, as kustomize-controller and Argo CD do,
// confined to the repository, offline and without plugins; origin tracking
// maps each rendered object back to its resource file and line. LoadGit
// reads the same from any commit of a Git repository with go-git, without
// touching a work tree. See docs/sources.md for the rules.
//
// Where this package is stricter than kubectl it is on purpose: duplicate
// mapping keys, several YAML documents in one "---" section (kubectl silently
// drops all but the first) and directories without any manifest are errors,
// because each of them would otherwise make truce compare against a desired
// state the user did not write.
package manifest
