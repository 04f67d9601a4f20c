package argocd

import (
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientscheme "k8s.io/client-go/kubernetes/scheme"
	admissioninstall "k8s.io/kubernetes/pkg/apis/admission/install"
	admissionregistrationinstall "k8s.io/kubernetes/pkg/apis/admissionregistration/install"
	appsinstall "k8s.io/kubernetes/pkg/apis/apps/install"
	authenticationinstall "k8s.io/kubernetes/pkg/apis/authentication/install"
	authorizationinstall "k8s.io/kubernetes/pkg/apis/authorization/install"
	autoscalinginstall "k8s.io/kubernetes/pkg/apis/autoscaling/install"
	batchinstall "k8s.io/kubernetes/pkg/apis/batch/install"
	certificatesinstall "k8s.io/kubernetes/pkg/apis/certificates/install"
	coordinationinstall "k8s.io/kubernetes/pkg/apis/coordination/install"
	coreinstall "k8s.io/kubernetes/pkg/apis/core/install"
	discoveryinstall "k8s.io/kubernetes/pkg/apis/discovery/install"
	eventsinstall "k8s.io/kubernetes/pkg/apis/events/install"
	extensionsinstall "k8s.io/kubernetes/pkg/apis/extensions/install"
	flowcontrolinstall "k8s.io/kubernetes/pkg/apis/flowcontrol/install"
	imagepolicyinstall "k8s.io/kubernetes/pkg/apis/imagepolicy/install"
	networkinginstall "k8s.io/kubernetes/pkg/apis/networking/install"
	nodeinstall "k8s.io/kubernetes/pkg/apis/node/install"
	policyinstall "k8s.io/kubernetes/pkg/apis/policy/install"
	rbacinstall "k8s.io/kubernetes/pkg/apis/rbac/install"
	schedulinginstall "k8s.io/kubernetes/pkg/apis/scheduling/install"
	storageinstall "k8s.io/kubernetes/pkg/apis/storage/install"
)

// Argo CD uses two schemes, and so do we:
//
//   - typesScheme (client-go's kubernetes/scheme, as gitops-engine's
//     pkg/diff/diff.go imports it) decides whether a kind is a built-in type,
//     which selects strategic merge patch over JSON merge patch, and supplies
//     the Go struct whose tags carry the patch strategies and merge keys;
//   - defaultsScheme mirrors gitops-engine's pkg/utils/kube/scheme/scheme.go:
//     k8s.io/kubernetes' legacy scheme with exactly the API groups that file
//     installs, so that Default runs the same defaulting functions. A private
//     scheme, rather than legacyscheme.Scheme itself, keeps the set of
//     defaulted groups independent of what else is linked into the binary.
var (
	typesScheme    = newTypesScheme()
	defaultsScheme = newDefaultsScheme()
)

// newTypesScheme is client-go's scheme as its own registration builds it.
// Libraries linked into truce register more kinds in the shared
// clientscheme.Scheme (Helm adds CustomResourceDefinition), which would
// make those kinds look built-in here.
func newTypesScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientscheme.AddToScheme(s); err != nil {
		panic(fmt.Sprintf("client-go's scheme: %v", err))
	}
	return s
}

func newDefaultsScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, install := range []func(*runtime.Scheme){
		admissioninstall.Install,
		admissionregistrationinstall.Install,
		appsinstall.Install,
		authenticationinstall.Install,
		authorizationinstall.Install,
		autoscalinginstall.Install,
		batchinstall.Install,
		certificatesinstall.Install,
		coordinationinstall.Install,
		coreinstall.Install,
		discoveryinstall.Install,
		eventsinstall.Install,
		extensionsinstall.Install,
		flowcontrolinstall.Install,
		imagepolicyinstall.Install,
		networkinginstall.Install,
		nodeinstall.Install,
		policyinstall.Install,
		rbacinstall.Install,
		schedulinginstall.Install,
		storageinstall.Install,
	} {
		install(s)
	}
	return s
}

// newVersioned returns an empty Go struct for a built-in kind, or an error
// when the kind is not a built-in type (custom resources, unknown versions).
func newVersioned(gvk schema.GroupVersionKind) (runtime.Object, error) {
	obj, err := typesScheme.New(gvk)
	if err != nil {
		return nil, fmt.Errorf("%s is not a built-in type: %w", gvk, err)
	}
	return obj, nil
}
