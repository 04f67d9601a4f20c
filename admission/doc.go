// Package admission is kube-apiserver 1.37's write path, offline: a Chain
// built from a State (the cluster's namespaces, CRDs, admission
// configuration, RBAC and objects) answers a write as the server would,
// with the stored object or the rejection, the warnings, the audit
// annotations, and which admission step changed which field.
//
// The steps are the server's own code, called in the order of its handlers
// (k8s.io/apiserver/pkg/endpoints/handlers/create.go and update.go) and its
// generic registry store: decoding with the scheme's or the CRD's defaults,
// authorization (RBAC), managedFields (k8s.io/apimachinery's field
// manager), mutating admission with reinvocation (the built-in plugins,
// MutatingAdmissionPolicy, mutating webhooks), the resource's registry
// strategy (package builtin), and validating admission. truce only wires
// them: it records what each mutating step changed (Change, Step) and
// which webhooks it could not call (Result.Unpredictable).
//
// Beside Admit: AdmitDelete for deletes, Mutate and Validate for a webhook
// serving the chain's policies (Review), and Commit to add an admitted
// object to the state.
package admission
