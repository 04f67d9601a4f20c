#!/bin/sh
# Builds gator, OPA Gatekeeper's CLI, at the version go.mod pins, into DIR
# (default ./bin): the judge of engine/gatekeeper's TestGator, TestLibrary
# and TestGatorExpand.
#   hack/gator.sh /tmp/bin && TRUCE_GATOR=/tmp/bin/gator go test ./engine/gatekeeper -run TestGator
set -eu
v=$(go list -m -f '{{.Version}}' github.com/open-policy-agent/gatekeeper/v3)
dir=${1:-$PWD/bin}
mkdir -p "$dir"
GOBIN=$(cd "$dir" && pwd) go install "github.com/open-policy-agent/gatekeeper/v3/cmd/gator@$v"
