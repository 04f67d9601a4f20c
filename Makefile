# truce: the two commands a new contributor needs are `make test` (everything,
# including the real kube-apiserver suites) and `make unit` (the fast loop).

GO ?= go
STATICCHECK_VERSION := v0.8.2
TOOLS := $(CURDIR)/bin

# What a build says it is (`truce version`): the Git tag, else v0.0.0-<commit>.
VERSION ?= $(shell git describe --tags --match 'v*' --dirty 2>/dev/null || echo v0.0.0-$$(git rev-parse --short HEAD 2>/dev/null || echo unknown))
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null)
IMAGE ?= ghcr.io/truce-dev/truce
VERSION_PKG := github.com/truce-dev/truce/internal/version
LDFLAGS := -X $(VERSION_PKG).version=$(VERSION) -X $(VERSION_PKG).commit=$(COMMIT)

.PHONY: test unit lint e2e build helper kyverno-cli gator bench bench-e2e generate image release test-release

test: lint unit e2e test-release

# truce and its Kyverno helper (a module of its own: Kyverno builds on an
# older Kubernetes), side by side: truce finds the helper next to itself.
build: helper
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/truce ./cmd/truce

# The Kyverno helper, linked once: the tests take it from $$TRUCE_KYVERNO
# instead of building their own. Built as the release builds it (static,
# -trimpath, for this machine): Kyverno's ~17 CPU-minutes compile once, and
# test-release's snapshot (and kyverno-cli) only link again; -ldflags
# affect only the link.
HELPER_BUILD := CGO_ENABLED=0 $(GO) build -trimpath
helper:
	cd engine/kyverno/helper && $(HELPER_BUILD) -o $(CURDIR)/bin/truce-kyverno ./cmd/truce-kyverno

# Kyverno's own CLI, from the helper's module (a `tool` of its go.mod, so
# the same Kyverno and dependencies as the helper): the judge of
# engine/kyverno's TestCLICorpus, which asks it live through
# $$TRUCE_KYVERNO_CLI and otherwise compares with its recorded answers.
kyverno-cli:
	cd engine/kyverno/helper && $(HELPER_BUILD) -o $(CURDIR)/bin/kyverno github.com/kyverno/kyverno/cmd/cli/kubectl-kyverno

# OPA Gatekeeper's CLI at the version go.mod pins, built as its own module
# (with Gatekeeper's own dependencies, from the module proxy): the judge of
# engine/gatekeeper's TestGator, TestLibrary and TestGatorExpand, which compare with its
# recorded answers in unit and ask it live in e2e through $$TRUCE_GATOR.
# A cold build is about 13 CPU-minutes.
gator:
	sh hack/gator.sh $(CURDIR)/bin

# The image, without a Docker daemon or a base image to download:
# linux/amd64 and linux/arm64 static binaries (/truce, /truce-kyverno) on an
# empty base, user 65532.
# dist/image/layout is an OCI layout (crane push --index dist/image/layout
# $(IMAGE):$(VERSION)); dist/image/truce-linux-ARCH.tar load with docker load.
image:
	$(GO) run ./hack/release image -version $(VERSION) -commit $(COMMIT) -ref $(IMAGE):$(VERSION) -out dist/image

# Binaries for linux and darwin × amd64 and arm64 in dist/: archives of
# truce and the Kyverno helper truce-kyverno beside it, checksums.txt, an
# SPDX SBOM per binary and krew/truce.yaml. Nothing is published.
release:
	$(GO) run ./hack/release dist -version $(VERSION) -commit $(COMMIT) -out dist

# The release and image test: a snapshot for this machine's platform, built
# and checked as a release is, its image loaded and its binaries run (truce
# with the Kyverno helper beside it). Part of `test`, not of `unit`: truce's
# static -trimpath build shares no cache with the tests' (a cold compile,
# minutes on 2 cores); the helper's shares `make helper`'s and only links.
test-release: helper
	TRUCE_TEST_RELEASE=1 $(GO) test -count=1 -timeout 45m -run TestSnapshot -v ./internal/release/

# The modules beside the main one, which ./... leaves out: the Kyverno
# helper's (Kyverno's Kubernetes) and the protocol between truce and the
# helper (a module of its own that both require, so both build from one
# definition; its tests link nothing of Kyverno).
MODULES := engine/kyverno/helper engine/kyverno/helper/protocol

unit: helper
	TRUCE_KYVERNO=$(CURDIR)/bin/truce-kyverno $(GO) test -count=1 ./...
	for m in $(MODULES); do (cd $$m && $(GO) test -count=1 ./...) || exit 1; done

lint: $(TOOLS)/staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	for m in $(MODULES); do (cd $$m && $(GO) vet ./... && $(TOOLS)/staticcheck ./...) || exit 1; done
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/staticcheck -tags e2e ./e2e/...

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# The e2e suites start kube-apiserver v1.37.2 with etcd in-process; the first
# build compiles kube-apiserver (~12 minutes on 2 cores, cached afterwards).
# engine/kyverno's TestCLICorpus and engine/gatekeeper's TestGator,
# TestLibrary and TestGatorExpand (mutation, by gator expand) run in unit against the engines' CLIs' recorded answers; here
# they ask the CLIs themselves (bin/kyverno, built from the helper's module;
# bin/gator), so the recordings cannot go stale.
e2e: helper kyverno-cli gator
	TRUCE_KYVERNO=$(CURDIR)/bin/truce-kyverno $(GO) test -tags e2e -count=1 -timeout 80m ./e2e/...
	TRUCE_KYVERNO=$(CURDIR)/bin/truce-kyverno TRUCE_KYVERNO_CLI=$(CURDIR)/bin/kyverno $(GO) test -count=1 -timeout 30m -run TestCLICorpus ./engine/kyverno
	TRUCE_GATOR=$(CURDIR)/bin/gator $(GO) test -count=1 -timeout 30m -run 'TestGator|TestLibrary|TestGatorExpand' ./engine/gatekeeper

# bench runs the benchmarks of docs/BENCHMARKS.md that need no server;
# bench-e2e those against kube-apiserver v1.37.2 (build tag e2e).
bench:
	$(GO) test -run '^$$' -bench . -benchmem ./admission/
	$(GO) test -run '^$$' -bench BenchmarkAdmitOne -benchtime 20x -benchmem ./internal/cli/
	$(GO) test -run '^$$' -bench BenchmarkCheck -benchtime 1x -benchmem ./internal/cli/
	$(GO) test -run '^$$' -bench BenchmarkDiffPredicted -benchtime 1x -benchmem ./internal/cli/
	$(GO) test -run '^$$' -bench 'Decode' -benchmem ./manifest/
	$(GO) test -run '^$$' -bench 'CandidatesLargeFile' -benchmem ./fix/
	$(GO) test -run '^$$' -bench BenchmarkReview -benchtime 2000x -benchmem ./webhook/
	$(GO) run ./cmd/truce-loadgen -concurrency 16 -requests 20000

bench-e2e:
	$(GO) test -tags e2e -run '^$$' -bench AdmitVsServer -benchtime 1x ./e2e/differential/
	$(GO) test -tags e2e -run '^$$' -bench BenchmarkDriftLive -benchtime 300x ./e2e/drift/

generate:
	$(GO) generate ./schema ./schema/toolkit ./engine/kyverno
