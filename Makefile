# truce: the two commands a new contributor needs are `make test` (everything,
# including the real kube-apiserver suites) and `make unit` (the fast loop).

GO ?= go
STATICCHECK_VERSION := v0.8.2
TOOLS := $(CURDIR)/bin

.PHONY: test unit lint e2e build bench generate

test: lint unit e2e

build:
	$(GO) build -o bin/truce ./cmd/truce

unit:
	$(GO) test -count=1 ./...

lint: $(TOOLS)/staticcheck
	@test -z "$$(gofmt -l $$(git ls-files '*.go'))" || { echo "gofmt needed:"; gofmt -l $$(git ls-files '*.go'); exit 1; }
	$(GO) vet ./...
	$(GO) vet -tags e2e ./e2e/...
	$(TOOLS)/staticcheck ./...
	$(TOOLS)/staticcheck -tags e2e ./e2e/...

$(TOOLS)/staticcheck:
	GOBIN=$(TOOLS) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)

# The e2e suites start kube-apiserver v1.37.2 with etcd in-process; the first
# build compiles kube-apiserver (~12 minutes on 2 cores, cached afterwards).
e2e:
	$(GO) test -tags e2e -count=1 -timeout 80m ./e2e/...

bench:
	$(GO) test -run '^$$' -bench . -benchmem ./admission/
	$(GO) test -run '^$$' -bench BenchmarkCheck -benchtime 1x -benchmem ./internal/cli/
	$(GO) test -run '^$$' -bench BenchmarkDiffPredicted -benchtime 1x -benchmem ./internal/cli/
	$(GO) test -run '^$$' -bench 'Decode' -benchmem ./manifest/

generate:
	$(GO) generate ./schema ./schema/toolkit
