package main

import (
	"context"
	"fmt"
	"testing"

	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	kyvernofake "github.com/kyverno/kyverno/pkg/client/clientset/versioned/fake"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestFakeWatchBurst writes the status of a policy library's worth of
// ClusterPolicies while a watch is open and not yet read, as Kyverno's
// admission policy generator does while the informer lags: client-go's
// fake panics past watch.DefaultChanSize unread events.
func TestFakeWatchBurst(t *testing.T) {
	setupOnce.Do(setupGlobals)
	const policies = 1000
	var objs []*kyvernov1.ClusterPolicy
	for i := range policies {
		objs = append(objs, &kyvernov1.ClusterPolicy{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i)}})
	}
	client := kyvernofake.NewSimpleClientset() //lint:ignore SA1019 the only constructor Kyverno generates
	ctx := context.Background()
	w, err := client.KyvernoV1().ClusterPolicies().Watch(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	for _, p := range objs {
		if _, err := client.KyvernoV1().ClusterPolicies().Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		p.Status.ValidatingAdmissionPolicy.Generated = true
		if _, err := client.KyvernoV1().ClusterPolicies().UpdateStatus(ctx, p, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for range 2 * policies {
		<-w.ResultChan()
	}
}
