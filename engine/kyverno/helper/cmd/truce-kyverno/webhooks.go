package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"time"

	kyvernoapi "github.com/kyverno/kyverno/api/kyverno"
	"github.com/kyverno/kyverno/pkg/client/clientset/versioned"
	kyvernoinformers "github.com/kyverno/kyverno/pkg/client/informers/externalversions"
	"github.com/kyverno/kyverno/pkg/clients/dclient"
	"github.com/kyverno/kyverno/pkg/config"
	"github.com/kyverno/kyverno/pkg/controllers"
	genericwebhookcontroller "github.com/kyverno/kyverno/pkg/controllers/generic/webhook"
	webhookcontroller "github.com/kyverno/kyverno/pkg/controllers/webhook"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	kubeinformers "k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
)

// caSecretName is the Secret a default Helm install names in
// --caSecretName; the webhook controller reads the caBundle from it.
const caSecretName = "kyverno-svc.kyverno.svc.kyverno-tls-ca"

// kyvernoSystemObjects are what a running Kyverno finds in its namespace
// before it configures webhooks: the CA Secret its certificate controller
// wrote and the health Lease its watchdog keeps fresh (without it the
// controller publishes configurations with no rules).
func kyvernoSystemObjects(caBundle []byte) []runtime.Object {
	ns := config.KyvernoNamespace()
	return []runtime.Object{
		&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: caSecretName},
			Type:       corev1.SecretTypeTLS,
			Data:       map[string][]byte{corev1.TLSCertKey: caBundle},
		},
		&coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Namespace:   ns,
				Name:        "kyverno-health",
				Labels:      map[string]string{"app.kubernetes.io/name": "kyverno"},
				Annotations: map[string]string{webhookcontroller.AnnotationLastRequestTime: time.Now().Format(time.RFC3339)},
			},
		},
	}
}

// webhookBuilder runs Kyverno's webhook controller against the set's fake
// clients and collects the configurations it creates: the resource
// webhooks exactly as Kyverno generates them (rules from the policies'
// match blocks through discovery, one webhook per failure policy and per
// fine-grained policy, namespace selector and match conditions from its
// configuration).
type webhookBuilder struct {
	ctrls []controllers.Controller
	kube  kubernetes.Interface
}

// staticRuntime is a Kyverno that is up, ready and not rolling.
type staticRuntime struct{}

func (staticRuntime) IsDebug() bool                { return false }
func (staticRuntime) IsReady(context.Context) bool { return true }
func (staticRuntime) IsLive(context.Context) bool  { return true }
func (staticRuntime) IsRollingUpdate() bool        { return false }
func (staticRuntime) IsGoingDown() bool            { return false }

func newWebhookBuilder(client dclient.Interface, kube kubernetes.Interface, kyverno versioned.Interface, kubeInformer kubeinformers.SharedInformerFactory, kyvernoInformer kyvernoinformers.SharedInformerFactory, configuration config.Configuration) (*webhookBuilder, error) {
	ns := config.KyvernoNamespace()
	ctrl := webhookcontroller.NewController(
		client.Discovery(),
		kube.AdmissionregistrationV1().MutatingWebhookConfigurations(),
		kube.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
		kube.CoordinationV1().Leases(ns),
		kyverno,
		kubeInformer.Admissionregistration().V1().MutatingWebhookConfigurations(),
		kubeInformer.Admissionregistration().V1().ValidatingWebhookConfigurations(),
		kyvernoInformer.Kyverno().V1().ClusterPolicies(),
		kyvernoInformer.Kyverno().V1().Policies(),
		kyvernoInformer.Policies().V1beta1().ValidatingPolicies(),
		kyvernoInformer.Policies().V1beta1().NamespacedValidatingPolicies(),
		kyvernoInformer.Policies().V1beta1().GeneratingPolicies(),
		kyvernoInformer.Policies().V1beta1().NamespacedGeneratingPolicies(),
		kyvernoInformer.Policies().V1beta1().ImageValidatingPolicies(),
		kyvernoInformer.Policies().V1beta1().NamespacedImageValidatingPolicies(),
		kyvernoInformer.Policies().V1beta1().MutatingPolicies(),
		kyvernoInformer.Policies().V1beta1().NamespacedMutatingPolicies(),
		kubeInformer.Apps().V1().Deployments(),
		kubeInformer.Core().V1().Secrets(),
		kubeInformer.Coordination().V1().Leases(),
		kubeInformer.Rbac().V1().ClusterRoles(),
		"", // the service, not a URL
		webhookcontroller.DefaultWebhookTimeout,
		443,
		true,  // --autoUpdateWebhooks default
		false, // --excludeBootstrapResources default
		false, // admission reports are not written offline
		staticRuntime{},
		configuration,
		caSecretName,
		webhookcontroller.NewStateRecorder(nil),
	)
	// Kyverno's generic webhook controller, for a configuration of one
	// webhook on CREATE and UPDATE of rules' resources, as Kyverno's
	// mains configure it (serving on the Service, port 443).
	generic := func(controller, name, path string, selector *metav1.LabelSelector, groups, versions, resources []string, fp *admissionregistrationv1.FailurePolicyType) controllers.Controller {
		rules := []admissionregistrationv1.RuleWithOperations{{
			Rule:       admissionregistrationv1.Rule{APIGroups: groups, APIVersions: versions, Resources: resources},
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		}}
		return genericwebhookcontroller.NewController(controller, kube.AdmissionregistrationV1().ValidatingWebhookConfigurations(),
			kubeInformer.Admissionregistration().V1().ValidatingWebhookConfigurations(), kubeInformer.Core().V1().Secrets(),
			name, path, "", 443, selector, rules, fp, genericwebhookcontroller.None, configuration, caSecretName)
	}
	all := []string{"*"}
	ctrls := []controllers.Controller{ctrl,
		// The PolicyExceptions' webhooks (cmd/kyverno/main.go).
		generic("exception-webhook-controller", config.ExceptionValidatingWebhookConfigurationName, config.ExceptionValidatingWebhookServicePath, nil,
			[]string{"kyverno.io"}, []string{"v2alpha1", "v2beta1"}, []string{"policyexceptions"}, genericwebhookcontroller.Fail),
		generic("celexception-webhook-controller", config.CELExceptionValidatingWebhookConfigurationName, config.CELExceptionValidatingWebhookServicePath, nil,
			[]string{"policies.kyverno.io"}, []string{"v1alpha1", "v1beta1", "v1"}, []string{"policyexceptions"}, genericwebhookcontroller.Fail),
		// The cleanup controller's (cmd/cleanup-controller/main.go): its
		// cleanup policies' ("x/*" matches x and its subresources) and the
		// TTL label's (any object labelled cleanup.kyverno.io/ttl).
		generic("policy-webhook-controller", config.CleanupValidatingWebhookConfigurationName, config.CleanupValidatingWebhookServicePath, nil,
			[]string{"kyverno.io"}, []string{"v2beta1"}, []string{"cleanuppolicies/*", "clustercleanuppolicies/*"}, genericwebhookcontroller.Fail),
		generic("ttl-webhook-controller", config.TtlValidatingWebhookConfigurationName, config.TtlValidatingWebhookServicePath,
			&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: kyvernoapi.LabelCleanupTtl, Operator: metav1.LabelSelectorOpExists}}},
			all, all, all, genericwebhookcontroller.Ignore),
	}
	return &webhookBuilder{ctrls: ctrls, kube: kube}, nil
}

// cleanupService is the Service of Kyverno's cleanup controller (its
// chart's kyverno-cleanup-controller, which the controller reads from
// $KYVERNO_SVC); this process, which runs the admission controller's code
// too, has the admission controller's.
const cleanupService = "kyverno-cleanup-controller"

// cleanupConfigurations are the webhook configurations the cleanup
// controller creates.
var cleanupConfigurations = []string{
	config.CleanupValidatingWebhookConfigurationName,
	config.TtlValidatingWebhookConfigurationName,
}

// asCleanupController names the webhooks of c, a configuration of
// cleanupConfigurations, and the Service they call, as the cleanup
// controller's process names them (generic webhook controller's build:
// "<service>.<namespace>.svc").
func asCleanupController(c *admissionregistrationv1.ValidatingWebhookConfiguration) {
	for i := range c.Webhooks {
		w := &c.Webhooks[i]
		w.Name = cleanupService + "." + config.KyvernoNamespace() + ".svc"
		if w.ClientConfig.Service != nil {
			w.ClientConfig.Service.Name = cleanupService
		}
	}
}

// configurations are the webhook configurations build collects, by name.
var configurations = []string{
	config.MutatingWebhookConfigurationName,
	config.ValidatingWebhookConfigurationName,
	config.PolicyValidatingWebhookConfigurationName,
	config.ExceptionValidatingWebhookConfigurationName,
	config.CELExceptionValidatingWebhookConfigurationName,
	config.CleanupValidatingWebhookConfigurationName,
	config.TtlValidatingWebhookConfigurationName,
}

// build runs the controllers until they have created the resource
// webhook configurations, the policies' validating one, the
// PolicyExceptions' ones and the cleanup controller's, and returns them (configurations' order), as JSON
// objects with their kinds. The policies' mutating configuration is left
// out: its handler admits every request unchanged (pkg/webhooks/policy's
// Mutate).
func (b *webhookBuilder) build(ctx context.Context) ([]json.RawMessage, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	mw, err := b.kube.AdmissionregistrationV1().MutatingWebhookConfigurations().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	defer mw.Stop()
	vw, err := b.kube.AdmissionregistrationV1().ValidatingWebhookConfigurations().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	defer vw.Stop()
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, c := range b.ctrls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Run(runCtx, 1)
		}()
	}
	defer func() { stop(); wg.Wait() }()

	got := map[string]any{}
	for len(got) < len(configurations) {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kyverno's webhook controllers did not create all of %v: %w", configurations, ctx.Err())
		case ev = <-mw.ResultChan():
		case ev = <-vw.ResultChan():
		}
		switch o := ev.Object.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			if o.Name == config.MutatingWebhookConfigurationName {
				o = o.DeepCopy()
				o.TypeMeta = metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"}
				got[o.Name] = o
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			if slices.Contains(configurations, o.Name) {
				o = o.DeepCopy()
				o.TypeMeta = metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"}
				if slices.Contains(cleanupConfigurations, o.Name) {
					asCleanupController(o)
				}
				got[o.Name] = o
			}
		}
	}
	out := make([]json.RawMessage, 0, len(configurations))
	for _, name := range configurations {
		raw, err := json.Marshal(got[name])
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}
