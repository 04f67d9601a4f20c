// Package release builds what a truce release ships: static binaries for
// linux and darwin, archives with sha256 checksums, an SPDX SBOM read from
// each binary's build information, a krew plugin manifest, and a multi-arch
// OCI image made with go-containerregistry (no Docker daemon, no base image
// to download). hack/release is its command; `make release` and `make image`
// run it.
package release
