//go:build e2e

package differential

import (
	"context"
	"fmt"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/admission/kubectl"
	"github.com/truce-dev/truce/e2e/apiserver"
)

// verbArgs are truce admit's flags for the case's verb and write.
func verbArgs(c *Case) []string {
	w := c.Write.Object
	switch c.Spec.Verb {
	case "exec":
		args := []string{"--exec", w.GetName(), "--namespace", namespaceOf(c)}
		if c.Spec.Container != "" {
			args = append(args, "--container", c.Spec.Container)
		}
		return append(append(args, "--"), c.Spec.Command...)
	case "replace":
		return []string{"-f", WriteFile, "--replace"}
	case "apply":
		return []string{"-f", WriteFile}
	case "server-side":
		args := []string{"-f", WriteFile, "--server-side"}
		if c.Spec.ForceConflicts {
			args = append(args, "--force-conflicts")
		}
		if c.Spec.FieldManager != "" {
			args = append(args, "--field-manager", c.Spec.FieldManager)
		}
		return args
	case "patch":
		return []string{"-f", WriteFile, "--patch", c.Spec.Patch, "--type", patchTypeOf(c)}
	case "delete":
		return []string{"-f", WriteFile, "--delete"}
	case "scale":
		return []string{"-f", WriteFile, "--scale", strconv.Itoa(int(c.Spec.Replicas))}
	}
	return nil
}

func namespaceOf(c *Case) string {
	if ns := c.Write.Object.GetNamespace(); ns != "" {
		return ns
	}
	return metav1.NamespaceDefault
}

func patchTypeOf(c *Case) string {
	if c.Spec.PatchType == "" {
		return "strategic"
	}
	return c.Spec.PatchType
}

// serverVerb sends the request kubectl sends for the case's verb (other
// than replace) to the server, as a dry run where the API has one.
func serverVerb(ctx context.Context, srv *apiserver.Server, c *Case) (*apiserver.DryRunResult, error) {
	w := c.Write.Object
	user, groups := c.Spec.User, c.Spec.Groups
	opts := []apiserver.DryRunOption{apiserver.WithFieldValidation(c.Spec.FieldValidation)}
	switch c.Spec.Verb {
	case "apply":
		live, err := srv.Get(ctx, w)
		if err != nil {
			return nil, err
		}
		a, err := kubectl.ClientSideApply(w, live)
		if err != nil {
			return nil, err
		}
		opts = append(opts, apiserver.WithFieldManager(kubectl.ClientSideApplyManager))
		switch {
		case a.Create:
			return srv.DryRunCreate(ctx, a.Object, user, groups, opts...)
		case a.Unchanged:
			return nil, fmt.Errorf("kubectl apply would send nothing: the case tests no request")
		}
		return srv.DryRunPatch(ctx, w, a.PatchType, a.Patch, "", user, groups, opts...)
	case "server-side":
		data, err := w.MarshalJSON()
		if err != nil {
			return nil, err
		}
		manager := c.Spec.FieldManager
		if manager == "" {
			manager = kubectl.ServerSideApplyManager
		}
		opts = append(opts, apiserver.WithFieldManager(manager), apiserver.WithForce(c.Spec.ForceConflicts))
		return srv.DryRunPatch(ctx, w, types.ApplyPatchType, data, "", user, groups, opts...)
	case "patch":
		pt, err := admission.ParsePatchType(patchTypeOf(c))
		if err != nil {
			return nil, err
		}
		data, err := yaml.YAMLToJSON([]byte(c.Spec.Patch))
		if err != nil {
			return nil, err
		}
		opts = append(opts, apiserver.WithFieldManager(kubectl.PatchManager))
		return srv.DryRunPatch(ctx, w, pt, data, "", user, groups, opts...)
	case "delete":
		return srv.DryRunDelete(ctx, w, metav1.DeletePropagationBackground, user, groups)
	case "scale":
		// kubectl scale sends no field manager; the harness's user agent
		// would be recorded, so the case names kubectl's.
		patch := fmt.Appendf(nil, `{"spec":{"replicas":%d}}`, c.Spec.Replicas)
		return srv.DryRunPatch(ctx, w, types.MergePatchType, patch, "scale", user, groups, apiserver.WithFieldManager(kubectl.ScaleManager))
	case "exec":
		container := c.Spec.Container
		if container == "" {
			if live, err := srv.Get(ctx, w); err == nil && live != nil {
				var pod corev1.Pod
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(live.Object, &pod); err == nil && len(pod.Spec.Containers) > 0 {
					container = pod.Spec.Containers[0].Name
				}
			}
		}
		res, err := srv.ConnectExec(ctx, namespaceOf(c), w.GetName(), &corev1.PodExecOptions{
			Container: container, Command: c.Spec.Command, Stdout: true, Stderr: true})
		if err == nil && apiserver.AdmittedConnect(res) {
			// Admission allowed it; the connecter's own refusal is not
			// admission's answer.
			res.Status = nil
		}
		return res, err
	}
	return nil, fmt.Errorf("unknown verb %q", c.Spec.Verb)
}
