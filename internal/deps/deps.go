//go:build tools

package deps

import (
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "k8s.io/apiextensions-apiserver/pkg/apiserver"
	_ "k8s.io/apiextensions-apiserver/pkg/controller/openapi/builder"
	_ "k8s.io/apiserver/pkg/admission/plugin/policy/mutating"
	_ "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	_ "k8s.io/apiserver/pkg/admission/plugin/webhook/mutating"
	_ "k8s.io/apiserver/pkg/admission/plugin/webhook/validating"
	_ "k8s.io/client-go/kubernetes/fake"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app/testing"
	_ "k8s.io/kubernetes/pkg/api/legacyscheme"
	_ "k8s.io/kubernetes/pkg/controlplane"
	_ "k8s.io/kubernetes/pkg/generated/openapi"
	_ "k8s.io/kubernetes/pkg/kubeapiserver/options"
	_ "k8s.io/kubernetes/plugin/pkg/admission/security/podsecurity"
	_ "sigs.k8s.io/yaml"
)
