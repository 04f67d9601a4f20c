package cli

import (
	"context"

	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
)

// clusterFlags describe an offline cluster, for admit and diff alike: its
// objects (-c) and how its kube-apiserver is configured.
type clusterFlags struct {
	cluster        []string
	endpoints      []string
	callWebhooks   bool
	enablePlugins  []string
	disablePlugins []string
	serviceRange   string
	// limits bound reading the files of -c; the command's --max-* flags.
	limits *limitFlags
}

func (c *clusterFlags) register(f *pflag.FlagSet) {
	f.StringSliceVarP(&c.cluster, "cluster", "c", nil, "files or directories describing the cluster: namespaces, CRDs, policies, bindings, webhook configurations, params, RBAC, existing objects")
	f.StringArrayVar(&c.endpoints, "webhook-endpoint", nil, "NAMESPACE/SERVICE=https://HOST:PORT: where a service-backed webhook is reachable from here (repeatable)")
	f.BoolVar(&c.callWebhooks, "call-webhooks", false, "call webhooks configured with a URL (they are only called when asked)")
	f.StringSliceVar(&c.enablePlugins, "enable-admission-plugins", nil, "admission plugins to enable in addition to kube-apiserver's defaults")
	f.StringSliceVar(&c.disablePlugins, "disable-admission-plugins", nil, "admission plugins to disable, as the cluster's kube-apiserver does")
	f.StringVar(&c.serviceRange, "service-cluster-ip-range", "10.0.0.0/24", "the cluster's --service-cluster-ip-range; a dry run answers with its network address as a Service's ClusterIP. Services given with -c keep the addresses and node ports their cluster gave them, inside the range or not")
}

// load reads the cluster's objects into a state and returns the admission
// options the flags describe; the objects are returned for error messages
// that name their files (withSource).
//
// extra objects join the state (CRDs the repository needs).
func (c *clusterFlags) load(ctx context.Context, extra ...*unstructured.Unstructured) (*admission.State, admission.Options, []manifest.Object, error) {
	lopts, err := c.limits.options()
	if err != nil {
		return nil, admission.Options{}, nil, err
	}
	objs, err := manifest.LoadPaths(ctx, c.cluster, lopts)
	if err != nil {
		return nil, admission.Options{}, nil, err
	}
	us := make([]*unstructured.Unstructured, len(objs), len(objs)+len(extra))
	for i, o := range objs {
		us[i] = o.Object
	}
	us = append(us, extra...)
	state, err := admission.NewState(us...)
	if err != nil {
		return nil, admission.Options{}, nil, err
	}
	endpoints, err := parseEndpoints(c.endpoints)
	if err != nil {
		return nil, admission.Options{}, nil, err
	}
	return state, admission.Options{
		EnablePlugins:         c.enablePlugins,
		DisablePlugins:        c.disablePlugins,
		WebhookEndpoints:      endpoints,
		CallURLWebhooks:       c.callWebhooks,
		ServiceClusterIPRange: c.serviceRange,
		// One cache per command: every chain it builds (check's
		// simulations and fix verifications, admit's rebuilds) compiles
		// each policy once.
		Cache: admission.NewCache(0),
	}, objs, nil
}
