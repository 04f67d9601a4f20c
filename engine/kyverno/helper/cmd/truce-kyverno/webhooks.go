package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/kyverno/kyverno/pkg/client/clientset/versioned"
	kyvernoinformers "github.com/kyverno/kyverno/pkg/client/informers/externalversions"
	"github.com/kyverno/kyverno/pkg/clients/dclient"
	"github.com/kyverno/kyverno/pkg/config"
	"github.com/kyverno/kyverno/pkg/controllers"
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
	ctrl controllers.Controller
	kube kubernetes.Interface
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
	return &webhookBuilder{ctrl: ctrl, kube: kube}, nil
}

// build runs the controller until it has created both resource webhook
// configurations and the policies' validating one, and returns them, as
// JSON objects with their kinds. The policies' mutating configuration is
// left out: its handler admits every request unchanged
// (pkg/webhooks/policy's Mutate).
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
	defer stop()
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.ctrl.Run(runCtx, 1)
	}()
	defer func() { stop(); <-done }()

	var mwc *admissionregistrationv1.MutatingWebhookConfiguration
	var vwc, pvwc *admissionregistrationv1.ValidatingWebhookConfiguration
	for mwc == nil || vwc == nil || pvwc == nil {
		var ev watch.Event
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("kyverno's webhook controller did not create its resource and policy webhook configurations: %w", ctx.Err())
		case ev = <-mw.ResultChan():
		case ev = <-vw.ResultChan():
		}
		switch o := ev.Object.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			if o.Name == config.MutatingWebhookConfigurationName {
				mwc = o
			}
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			switch o.Name {
			case config.ValidatingWebhookConfigurationName:
				vwc = o
			case config.PolicyValidatingWebhookConfigurationName:
				pvwc = o
			}
		}
	}
	mwc = mwc.DeepCopy()
	mwc.TypeMeta = metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "MutatingWebhookConfiguration"}
	var out []json.RawMessage
	for _, o := range []any{mwc, validating(vwc), validating(pvwc)} {
		raw, err := json.Marshal(o)
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// validating is a copy of c with its kind.
func validating(c *admissionregistrationv1.ValidatingWebhookConfiguration) *admissionregistrationv1.ValidatingWebhookConfiguration {
	c = c.DeepCopy()
	c.TypeMeta = metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingWebhookConfiguration"}
	return c
}
