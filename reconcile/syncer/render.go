package syncer

import (
	"fmt"
	"strings"

	chartutil "helm.sh/helm/v4/pkg/chart/v2/util"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/truce-dev/truce/reconcile"
	"github.com/truce-dev/truce/render"
	"github.com/truce-dev/truce/render/helm"
	"github.com/truce-dev/truce/render/jsonnet"
)

// RenderOptions say how a Helm chart or a Jsonnet directory at the path
// is rendered (the --helm-* and --jsonnet-* flags and --cache-dir).
type RenderOptions struct {
	// HelmReleaseName is .Release.Name; empty is the sync's Name.
	HelmReleaseName string
	// HelmNamespace is .Release.Namespace and where the chart's namespaced
	// objects that name none go; empty is the sync's Namespace.
	HelmNamespace string
	// HelmValues are values files relative to the chart directory, as
	// Argo CD's helm.valueFiles; HelmSet are key=value (--set).
	HelmValues, HelmSet []string
	// JsonnetExtVars and JsonnetTLAs are name=value, passed as strings;
	// JsonnetLibs are library directories from the repository's top.
	JsonnetExtVars, JsonnetTLAs, JsonnetLibs []string
	// CacheDir keeps pulled chart dependencies; empty is truce check's
	// default, render.DefaultCacheDir().
	CacheDir string
	// RegistryConfig and RepositoryConfig are Helm's credentials files
	// for chart dependencies (--registry-config, --repository-config).
	RegistryConfig, RepositoryConfig string
}

// render checks the flags and turns them into reconcile.Render for the
// sync named name in namespace.
func (o RenderOptions) render(name, namespace string) (reconcile.Render, error) {
	r := reconcile.Render{
		Options: render.Options{CacheDir: o.CacheDir},
		Helm: reconcile.HelmRender{
			ReleaseName: o.HelmReleaseName, Namespace: o.HelmNamespace, ValueFiles: o.HelmValues,
			RegistryConfig: o.RegistryConfig, RepositoryConfig: o.RepositoryConfig,
		},
		Jsonnet: reconcile.JsonnetRender{Libs: o.JsonnetLibs},
	}
	if r.Helm.ReleaseName == "" {
		r.Helm.ReleaseName = name
	} else if err := chartutil.ValidateReleaseName(r.Helm.ReleaseName); err != nil {
		return r, fmt.Errorf("--helm-release-name %q: %w", r.Helm.ReleaseName, err)
	}
	if r.Helm.Namespace == "" {
		r.Helm.Namespace = namespace
	} else if errs := validation.IsDNS1123Label(r.Helm.Namespace); len(errs) > 0 {
		return r, fmt.Errorf("--helm-namespace %q: %s", r.Helm.Namespace, strings.Join(errs, "; "))
	}
	for _, kv := range o.HelmSet {
		k, v, err := keyValue("--helm-set", kv)
		if err != nil {
			return r, err
		}
		r.Helm.Set = append(r.Helm.Set, helm.Parameter{Name: k, Value: v})
	}
	var err error
	if r.Jsonnet.ExtVars, err = jsonnetVars("--jsonnet-ext-var", o.JsonnetExtVars); err != nil {
		return r, err
	}
	if r.Jsonnet.TLAs, err = jsonnetVars("--jsonnet-tla", o.JsonnetTLAs); err != nil {
		return r, err
	}
	return r, nil
}

func jsonnetVars(flag string, in []string) ([]jsonnet.Var, error) {
	var out []jsonnet.Var
	for _, kv := range in {
		k, v, err := keyValue(flag, kv)
		if err != nil {
			return nil, err
		}
		out = append(out, jsonnet.Var{Name: k, Value: v})
	}
	return out, nil
}

// keyValue splits "key=value" at the first "=".
func keyValue(flag, kv string) (string, string, error) {
	k, v, ok := strings.Cut(kv, "=")
	if !ok || k == "" {
		return "", "", fmt.Errorf("%s %q: want key=value", flag, kv)
	}
	return k, v, nil
}
