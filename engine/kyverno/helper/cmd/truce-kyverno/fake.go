package main

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	kyvernov1 "github.com/kyverno/kyverno/api/kyverno/v1"
	"github.com/kyverno/kyverno/pkg/clients/dclient"
	"github.com/truce-dev/truce/engine/kyverno/helper/protocol"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	fakediscovery "k8s.io/client-go/discovery/fake"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// fakeCluster is the cluster Kyverno's background controllers see for
// one request: the trigger (none for a scheduled controller) and the
// objects truce sent, behind fake clients with the cluster's discovery.
// What the controllers write lands here and is read back as the answer's
// writes.
type fakeCluster struct {
	client  dclient.Interface
	kube    *kubefake.Clientset
	trigger *unstructured.Unstructured
	// sent are the objects as truce sent them, by kind and
	// namespace/name.
	sent map[schema.GroupVersionKind]map[[2]string]*unstructured.Unstructured
}

func newFakeCluster(ctx context.Context, req *protocol.BackgroundRequest) (*fakeCluster, error) {
	fc := &fakeCluster{sent: map[schema.GroupVersionKind]map[[2]string]*unstructured.Unstructured{}}
	if len(req.Trigger) > 0 {
		fc.trigger = &unstructured.Unstructured{}
		if err := fc.trigger.UnmarshalJSON(req.Trigger); err != nil {
			return nil, fmt.Errorf("the trigger: %w", err)
		}
	}
	objects := make([]runtime.Object, 0, len(req.Objects)+1)
	keep := func(u *unstructured.Unstructured) {
		gvk := u.GroupVersionKind()
		if fc.sent[gvk] == nil {
			fc.sent[gvk] = map[[2]string]*unstructured.Unstructured{}
		}
		key := [2]string{u.GetNamespace(), u.GetName()}
		if _, dup := fc.sent[gvk][key]; dup {
			return
		}
		fc.sent[gvk][key] = u
		objects = append(objects, u.DeepCopy())
	}
	if fc.trigger != nil {
		keep(fc.trigger)
	}
	for i, raw := range req.Objects {
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(raw); err != nil {
			return nil, fmt.Errorf("object %d: %w", i, err)
		}
		keep(u)
	}
	listKinds := map[schema.GroupVersionResource]string{}
	for _, l := range req.Resources {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		if err != nil {
			continue
		}
		for _, r := range l.APIResources {
			if !strings.Contains(r.Name, "/") {
				listKinds[gv.WithResource(r.Name)] = r.Kind + "List"
			}
		}
	}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), listKinds, objects...)
	// Namespaces also go to the typed client, which Kyverno's CEL namespace
	// resolver reads for namespaceSelectors.
	var namespaces []runtime.Object
	for _, o := range objects {
		u := o.(*unstructured.Unstructured)
		if u.GroupVersionKind() == corev1.SchemeGroupVersion.WithKind("Namespace") {
			ns := &corev1.Namespace{}
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, ns); err == nil {
				namespaces = append(namespaces, ns)
			}
		}
	}
	fc.kube = kubefake.NewClientset(namespaces...)
	fc.kube.Discovery().(*fakediscovery.FakeDiscovery).Resources = req.Resources
	client, err := dclient.NewClient(ctx, dyn, fc.kube, time.Hour, false, nil)
	if err != nil {
		return nil, fmt.Errorf("kyverno client: %w", err)
	}
	fc.client = client
	return fc, nil
}

// readBack adds to resp the writes the controllers made: the objects of
// created (creates, or updates of objects sent) and every other object
// sent that changed.
func (fc *fakeCluster) readBack(ctx context.Context, created []kyvernov1.ResourceSpec, resp *protocol.BackgroundResponse) error {
	seen := map[string]bool{}
	for _, spec := range created {
		obj, err := fc.client.GetResource(ctx, spec.APIVersion, spec.Kind, spec.Namespace, spec.Name)
		if err != nil {
			return fmt.Errorf("reading back what Kyverno generated (%s): %w", spec.String(), err)
		}
		key := obj.GroupVersionKind().String() + "|" + obj.GetNamespace() + "/" + obj.GetName()
		if seen[key] {
			continue
		}
		seen[key] = true
		before, existed := fc.sent[obj.GroupVersionKind()][[2]string{obj.GetNamespace(), obj.GetName()}]
		op := "create"
		if existed {
			if equality.Semantic.DeepEqual(obj.Object, before.Object) {
				continue
			}
			op = "update"
		}
		if err := appendWrite(resp, op, obj); err != nil {
			return err
		}
	}
	gvks := make([]schema.GroupVersionKind, 0, len(fc.sent))
	for gvk := range fc.sent {
		gvks = append(gvks, gvk)
	}
	sort.Slice(gvks, func(i, j int) bool { return gvks[i].String() < gvks[j].String() })
	for _, gvk := range gvks {
		keys := make([][2]string, 0, len(fc.sent[gvk]))
		for k := range fc.sent[gvk] {
			keys = append(keys, k)
		}
		sort.Slice(keys, func(i, j int) bool { return keys[i][0]+"/"+keys[i][1] < keys[j][0]+"/"+keys[j][1] })
		for _, k := range keys {
			if seen[gvk.String()+"|"+k[0]+"/"+k[1]] {
				continue
			}
			after, err := fc.client.GetResource(ctx, gvk.GroupVersion().String(), gvk.Kind, k[0], k[1])
			if err != nil {
				// Kyverno deletes nothing here; an object it cannot read
				// back is one it did not write.
				continue
			}
			if !equality.Semantic.DeepEqual(after.Object, fc.sent[gvk][k].Object) {
				if err := appendWrite(resp, "update", after); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func appendWrite(resp *protocol.BackgroundResponse, op string, obj *unstructured.Unstructured) error {
	raw, err := obj.MarshalJSON()
	if err != nil {
		return err
	}
	resp.Writes = append(resp.Writes, protocol.Write{Op: op, Object: raw})
	return nil
}
