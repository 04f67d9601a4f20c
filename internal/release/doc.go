// Package release builds what a truce release ships: static binaries of
// truce and its Kyverno helper (truce-kyverno, from its own module) for
// linux and darwin, archives holding both with sha256 checksums, an SPDX
// SBOM read from each binary's build information, a krew plugin manifest,
// and a multi-arch OCI image made with go-containerregistry (no Docker
// daemon, no base image to download). hack/release is its command; `make
// release` and `make image` run it.
package release
