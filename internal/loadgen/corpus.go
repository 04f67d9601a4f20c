package loadgen

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/manifest"
)

// corpusFiles are the workloads the corpus writes, as their writers send
// them.
//
//go:embed corpus/*.yaml
var corpusFiles embed.FS

// The paths the corpus sends to, with the timeout parameter kube-apiserver
// adds (the default timeoutSeconds, 10).
const (
	MutatePath   = "/mutate?timeout=10s"
	ValidatePath = "/validate?timeout=10s"
)

// Requests returns the corpus: ten writes of Pods and apps/v1 Deployments
// (CREATE and UPDATE, one and three containers, namespaces "default" and
// "team-a", by a person with kubectl, by Argo CD and by the ReplicaSet
// controller), each once as kube-apiserver sends it to a mutating webhook
// (MutatePath) and once as it sends it to a validating webhook
// (ValidatePath): 20 requests, half to each path.
//
// The objects are what kube-apiserver 1.37 has made of the writes at that
// point: decoded, defaulted, with managedFields and the built-in admission
// plugins' changes (the ServiceAccount token volume, default tolerations,
// priority). They are computed with truce's admission chain, which the e2e
// suites hold to a real kube-apiserver. A validating webhook is called
// after mutation, so its objects are also mutated by the ten
// MutatingAdmissionPolicies of Policies, and an UPDATE's old object is
// what was stored under them: the cluster the corpus models runs those
// policies through the webhook.
//
// Every mutating request expects allowed; three validating requests
// expect a denial by the ValidatingAdmissionPolicies of Policies (an image
// by its latest tag, a Pod on the node's filesystem, too many replicas).
func Requests(ctx context.Context) ([]Request, error) {
	scenarios, err := buildCorpus(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]Request, 0, 2*len(scenarios))
	for _, s := range scenarios {
		out = append(out, s.mutate)
	}
	for _, s := range scenarios {
		out = append(out, s.validate)
	}
	return out, nil
}

// writer is who makes a write and how.
type writer struct {
	user authenticationv1.UserInfo
	// manager names the writer in managedFields.
	manager string
	// fieldManager and fieldValidation are the write's options, as the
	// client sets them (controllers set neither).
	fieldManager, fieldValidation string
	// lastApplied: the writer is client-side apply (kubectl apply, Argo
	// CD), which records the manifest in an annotation.
	lastApplied bool
}

func kubectlApply() writer {
	return writer{
		user:            authenticationv1.UserInfo{Username: "kubernetes-admin", Groups: []string{"kubeadm:cluster-admins", "system:authenticated"}},
		manager:         "kubectl-client-side-apply",
		fieldManager:    "kubectl-client-side-apply",
		fieldValidation: metav1.FieldValidationStrict,
		lastApplied:     true,
	}
}

func kubectlEdit(manager string) writer {
	w := kubectlApply()
	w.manager, w.fieldManager, w.lastApplied = manager, manager, false
	return w
}

func argoCD() writer {
	return writer{
		user: authenticationv1.UserInfo{
			Username: "system:serviceaccount:argocd:argocd-application-controller",
			UID:      "6f1f9c1e-1d0e-4c51-9a0f-3b9c2f7a8d41",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:argocd", "system:authenticated"},
			// A bound service account token says which Pod holds it.
			Extra: map[string]authenticationv1.ExtraValue{
				"authentication.kubernetes.io/credential-id": {"JTI=2d7c6f0e-8a43-4b9e-bb0f-5f6e1f3c9a27"},
				"authentication.kubernetes.io/node-name":     {"worker-1"},
				"authentication.kubernetes.io/node-uid":      {"0b6c9f5e-2f55-4d3c-8e8a-1c4e2b7d9f10"},
				"authentication.kubernetes.io/pod-name":      {"argocd-application-controller-0"},
				"authentication.kubernetes.io/pod-uid":       {"a3e5d1c2-7b8f-4e6a-9d0c-4f2b1e3a5c67"},
			},
		},
		manager:      "argocd-controller",
		fieldManager: "argocd-controller",
		lastApplied:  true,
	}
}

func replicaSetController() writer {
	return writer{
		user: authenticationv1.UserInfo{
			Username: "system:serviceaccount:kube-system:replicaset-controller",
			UID:      "4c2b8e1f-93d7-4a6e-b5f0-7e1d2c3b4a59",
			Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:kube-system", "system:authenticated"},
		},
		manager: "kube-controller-manager",
	}
}

// scenario is one write of the corpus.
type scenario struct {
	op admission.Operation
	// client is the object the writer sends (for an UPDATE, the whole
	// new object), old the stored object an UPDATE replaces.
	client, old *unstructured.Unstructured
	writer      writer
	// deniedBy names the ValidatingAdmissionPolicies that deny the write
	// (the server names one of them); none when the policies allow it.
	deniedBy         []string
	mutate, validate Request
}

// corpusBuilder computes what kube-apiserver sends webhooks with two
// admission chains: plain has the built-in plugins only (what a mutating
// webhook sees), mutated adds the MutatingAdmissionPolicies (what a
// validating webhook sees, and what is stored).
type corpusBuilder struct {
	plain, mutated  *admission.Chain
	resourceVersion int
	scenarios       []*scenario
}

func buildCorpus(ctx context.Context) ([]*scenario, error) {
	cluster, err := clusterObjects()
	if err != nil {
		return nil, err
	}
	mutating, err := embeddedObjects(policyFiles, "policies/*.yaml", "mutating-")
	if err != nil {
		return nil, err
	}
	plain, err := newChain(ctx, cluster)
	if err != nil {
		return nil, err
	}
	defer plain.Close()
	mutated, err := newChain(ctx, append(cluster, mutating...))
	if err != nil {
		return nil, err
	}
	defer mutated.Close()
	b := &corpusBuilder{plain: plain, mutated: mutated, resourceVersion: 482113}
	if err := b.build(ctx); err != nil {
		return nil, fmt.Errorf("building the request corpus: %w", err)
	}
	return b.scenarios, nil
}

// clusterObjects are the namespace and ServiceAccount the corpus needs.
func clusterObjects() ([]*unstructured.Unstructured, error) {
	return embeddedObjects(corpusFiles, "corpus/cluster.yaml", "")
}

func newChain(ctx context.Context, objs []*unstructured.Unstructured) (*admission.Chain, error) {
	state, err := admission.NewState(objs...)
	if err != nil {
		return nil, fmt.Errorf("building the corpus's cluster: %w", err)
	}
	chain, err := admission.NewChain(ctx, state, admission.Options{})
	if err != nil {
		return nil, fmt.Errorf("building the corpus's admission chain: %w", err)
	}
	return chain, nil
}

func (b *corpusBuilder) build(ctx context.Context) error {
	web, err := workload("deployment-web.yaml")
	if err != nil {
		return err
	}
	checkout, err := workload("deployment-checkout.yaml")
	if err != nil {
		return err
	}

	webStored, err := b.create(ctx, web, kubectlApply())
	if err != nil {
		return err
	}
	checkoutStored, err := b.create(ctx, checkout, argoCD())
	if err != nil {
		return err
	}
	// The ReplicaSet controller creates Pods from the stored templates.
	webPod, err := podFrom(webStored, "5d8c9f7b6", "x2x4k")
	if err != nil {
		return err
	}
	if _, err := b.create(ctx, webPod, replicaSetController()); err != nil {
		return err
	}
	checkoutPod, err := podFrom(checkoutStored, "6d9f8b7c4", "k7q2n")
	if err != nil {
		return err
	}
	checkoutPodStored, err := b.create(ctx, checkoutPod, replicaSetController())
	if err != nil {
		return err
	}

	// A new image with kubectl apply, a scale-up synced by Argo CD, and a
	// running Pod labelled by hand.
	setDeploymentStatus(webStored, "5d8c9f7b6", 3)
	if err := b.update(ctx, webStored, web, kubectlApply(), func(u *unstructured.Unstructured) error {
		return setImage(u, "docker.io/library/nginx:1.27.4")
	}); err != nil {
		return err
	}
	setDeploymentStatus(checkoutStored, "6d9f8b7c4", 4)
	if err := b.update(ctx, checkoutStored, checkout, argoCD(), func(u *unstructured.Unstructured) error {
		return unstructured.SetNestedField(u.Object, int64(6), "spec", "replicas")
	}); err != nil {
		return err
	}
	if err := setPodRunning(checkoutPodStored, "worker-2"); err != nil {
		return err
	}
	if err := b.update(ctx, checkoutPodStored, nil, kubectlEdit("kubectl-label"), func(u *unstructured.Unstructured) error {
		labels := u.GetLabels()
		labels["canary"] = "true"
		u.SetLabels(labels)
		return nil
	}); err != nil {
		return err
	}

	for _, d := range []struct {
		file     string
		deniedBy []string
	}{
		{"deployment-legacy-report.yaml", []string{"disallow-latest-tag"}},
		{"deployment-batch-worker.yaml", []string{"max-replicas"}},
		{"pod-node-debugger.yaml", []string{"disallow-host-path", "disallow-host-namespaces", "restrict-capabilities"}},
	} {
		obj, err := workload(d.file)
		if err != nil {
			return err
		}
		w := kubectlApply()
		if obj.GetKind() == "Pod" {
			w = kubectlEdit("kubectl-create")
		}
		if _, err := b.create(ctx, obj, w, d.deniedBy...); err != nil {
			return err
		}
	}
	return nil
}

// workload decodes one of the corpus's files.
func workload(name string) (*unstructured.Unstructured, error) {
	data, err := corpusFiles.ReadFile("corpus/" + name)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	objs, err := manifest.Decode(name, bytes.NewReader(data), manifest.DefaultOptions())
	if err != nil {
		return nil, fmt.Errorf("decoding %s: %w", name, err)
	}
	if len(objs) != 1 {
		return nil, fmt.Errorf("%s holds %d objects, want 1", name, len(objs))
	}
	return objs[0].Object, nil
}

// create adds a CREATE of client by w and returns the object stored.
func (b *corpusBuilder) create(ctx context.Context, client *unstructured.Unstructured, w writer, deniedBy ...string) (*unstructured.Unstructured, error) {
	client = client.DeepCopy()
	if w.lastApplied {
		if err := setLastApplied(client, client); err != nil {
			return nil, err
		}
	}
	seen, err := b.admit(ctx, b.plain, client, w)
	if err != nil {
		return nil, err
	}
	stored, err := b.admit(ctx, b.mutated, client, w)
	if err != nil {
		return nil, err
	}
	// A mutating webhook is called before the registry prepares the
	// object for storage: no uid, creation time, generation or status
	// yet, and no name when the server is to generate one.
	for _, f := range []string{"uid", "creationTimestamp", "generation", "resourceVersion"} {
		unstructured.RemoveNestedField(seen.Object, "metadata", f)
	}
	seen.Object["status"] = map[string]any{}
	name := client.GetName()
	if seen.GetGenerateName() != "" {
		seen.SetName("")
		name = ""
	}
	s := &scenario{op: admission.Create, client: client, writer: w, deniedBy: deniedBy}
	if s.mutate, err = b.request(s, true, name, seen, nil); err != nil {
		return nil, err
	}
	if s.validate, err = b.request(s, false, stored.GetName(), stored, nil); err != nil {
		return nil, err
	}
	b.scenarios = append(b.scenarios, s)
	b.resourceVersion += 17
	stored.SetResourceVersion(strconv.Itoa(b.resourceVersion))
	return stored, nil
}

// update adds an UPDATE by w of the stored object old: edit applied to it
// (and, for client-side apply, to the manifest the writer applies).
func (b *corpusBuilder) update(ctx context.Context, old, applied *unstructured.Unstructured, w writer, edit func(*unstructured.Unstructured) error) error {
	for _, c := range []*admission.Chain{b.plain, b.mutated} {
		if err := c.State().Put(old.DeepCopy()); err != nil {
			return fmt.Errorf("storing %s %s: %w", old.GetKind(), old.GetName(), err)
		}
	}
	client := old.DeepCopy()
	if err := edit(client); err != nil {
		return err
	}
	if w.lastApplied {
		applied = applied.DeepCopy()
		if err := edit(applied); err != nil {
			return err
		}
		if err := setLastApplied(client, applied); err != nil {
			return err
		}
	}
	seen, err := b.admit(ctx, b.plain, client, w)
	if err != nil {
		return err
	}
	stored, err := b.admit(ctx, b.mutated, client, w)
	if err != nil {
		return err
	}
	// A mutating webhook is called before the registry bumps the
	// generation.
	seen.SetGeneration(old.GetGeneration())
	s := &scenario{op: admission.Update, client: client, old: old, writer: w}
	if s.mutate, err = b.request(s, true, old.GetName(), seen, old); err != nil {
		return err
	}
	if s.validate, err = b.request(s, false, old.GetName(), stored, old); err != nil {
		return err
	}
	b.scenarios = append(b.scenarios, s)
	return nil
}

// admit runs a write through chain and returns the object it would store.
func (b *corpusBuilder) admit(ctx context.Context, chain *admission.Chain, obj *unstructured.Unstructured, w writer) (*unstructured.Unstructured, error) {
	res, err := chain.Admit(ctx, admission.Request{
		Object: obj.DeepCopy(),
		User:   w.user.Username,
		// The writers' own permissions are not the corpus's subject.
		Groups:       append(append([]string{}, w.user.Groups...), "system:masters"),
		FieldManager: w.manager,
		Persist:      true,
	})
	if err != nil {
		return nil, fmt.Errorf("%s %s/%s: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
	}
	if !res.Allowed {
		return nil, fmt.Errorf("%s %s/%s: denied before the policies under test: %s", obj.GetKind(), obj.GetNamespace(), obj.GetName(), res.Message)
	}
	return &unstructured.Unstructured{Object: res.Object}, nil
}

// request builds the AdmissionReview kube-apiserver sends for s.
func (b *corpusBuilder) request(s *scenario, mutate bool, name string, obj, old *unstructured.Unstructured) (Request, error) {
	gvk := obj.GroupVersionKind()
	resource, err := b.plain.Registry().ForKind(gvk)
	if err != nil {
		return Request{}, err
	}
	var options runtime.Object
	meta := metav1.TypeMeta{APIVersion: "meta.k8s.io/v1"}
	switch s.op {
	case admission.Create:
		meta.Kind = "CreateOptions"
		options = &metav1.CreateOptions{TypeMeta: meta, FieldManager: s.writer.fieldManager, FieldValidation: s.writer.fieldValidation}
	case admission.Update:
		meta.Kind = "UpdateOptions"
		options = &metav1.UpdateOptions{TypeMeta: meta, FieldManager: s.writer.fieldManager, FieldValidation: s.writer.fieldValidation}
	default:
		return Request{}, fmt.Errorf("operation %s is not in the corpus", s.op)
	}
	raw := func(o any) (runtime.RawExtension, error) {
		data, err := json.Marshal(o)
		return runtime.RawExtension{Raw: data}, err
	}
	objRaw, err := raw(obj)
	if err != nil {
		return Request{}, err
	}
	var oldRaw runtime.RawExtension // none on CREATE
	if old != nil {
		if oldRaw, err = raw(old); err != nil {
			return Request{}, err
		}
	}
	optionsRaw, err := raw(options)
	if err != nil {
		return Request{}, err
	}
	kind := metav1.GroupVersionKind{Group: gvk.Group, Version: gvk.Version, Kind: gvk.Kind}
	gvr := metav1.GroupVersionResource{Group: resource.GVR.Group, Version: resource.GVR.Version, Resource: resource.GVR.Resource}
	dryRun := false
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: admissionv1.SchemeGroupVersion.String(), Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:             UIDPlaceholder,
			Kind:            kind,
			Resource:        gvr,
			RequestKind:     &kind,
			RequestResource: &gvr,
			Name:            name,
			Namespace:       obj.GetNamespace(),
			Operation:       admissionv1.Operation(s.op),
			UserInfo:        s.writer.user,
			Object:          objRaw,
			OldObject:       oldRaw,
			DryRun:          &dryRun,
			Options:         optionsRaw,
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		return Request{}, err
	}
	what := fmt.Sprintf("%s %s %s/%s", s.op, gvk.Kind, obj.GetNamespace(), obj.GetName())
	if obj.GetName() == "" {
		what = fmt.Sprintf("%s %s %s/%s*", s.op, gvk.Kind, obj.GetNamespace(), obj.GetGenerateName())
	}
	allowed := true
	r := Request{Path: MutatePath, Body: body, Mutating: true, ExpectAllowed: &allowed, Name: "mutate " + what}
	if !mutate {
		allowed = len(s.deniedBy) == 0
		r.Path, r.Mutating, r.Name = ValidatePath, false, "validate "+what
	}
	return r, nil
}

// setLastApplied records applied as obj's last-applied configuration, as
// client-side apply does.
func setLastApplied(obj, applied *unstructured.Unstructured) error {
	m := applied.DeepCopy()
	ann := m.GetAnnotations()
	delete(ann, "kubectl.kubernetes.io/last-applied-configuration")
	m.SetAnnotations(ann)
	data, err := json.Marshal(m.Object)
	if err != nil {
		return err
	}
	ann = obj.GetAnnotations()
	if ann == nil {
		ann = map[string]string{}
	}
	ann["kubectl.kubernetes.io/last-applied-configuration"] = string(data) + "\n"
	obj.SetAnnotations(ann)
	return nil
}

// podFrom is the Pod the ReplicaSet controller creates from a stored
// Deployment's template: ReplicaSet NAME-HASH, Pod NAME-HASH-SUFFIX.
func podFrom(d *unstructured.Unstructured, hash, suffix string) (*unstructured.Unstructured, error) {
	tmpl, ok, err := unstructured.NestedMap(d.Object, "spec", "template")
	if err != nil || !ok {
		return nil, fmt.Errorf("deployment %s has no template: %v", d.GetName(), err)
	}
	meta, _ := tmpl["metadata"].(map[string]any)
	labels := map[string]any{}
	if l, ok := meta["labels"].(map[string]any); ok {
		maps.Copy(labels, l)
	}
	labels["pod-template-hash"] = hash
	rs := d.GetName() + "-" + hash
	podMeta := map[string]any{
		"name":         rs + "-" + suffix,
		"generateName": rs + "-",
		"namespace":    d.GetNamespace(),
		"labels":       labels,
		"ownerReferences": []any{map[string]any{
			"apiVersion":         "apps/v1",
			"kind":               "ReplicaSet",
			"name":               rs,
			"uid":                fakeUID(rs),
			"controller":         true,
			"blockOwnerDeletion": true,
		}},
	}
	if a, ok := meta["annotations"].(map[string]any); ok {
		podMeta["annotations"] = a
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1",
		"kind":       "Pod",
		"metadata":   podMeta,
		"spec":       tmpl["spec"],
	}}, nil
}

// setDeploymentStatus gives a stored Deployment the status its controller
// writes once all replicas of its ReplicaSet NAME-HASH are available.
func setDeploymentStatus(d *unstructured.Unstructured, hash string, replicas int64) {
	since := time.Now().Add(-26 * time.Hour).UTC().Format(time.RFC3339)
	d.Object["status"] = map[string]any{
		"observedGeneration": d.GetGeneration(),
		"replicas":           replicas,
		"updatedReplicas":    replicas,
		"readyReplicas":      replicas,
		"availableReplicas":  replicas,
		"conditions": []any{
			map[string]any{
				"type": "Available", "status": "True", "reason": "MinimumReplicasAvailable",
				"message":        "Deployment has minimum availability.",
				"lastUpdateTime": since, "lastTransitionTime": since,
			},
			map[string]any{
				"type": "Progressing", "status": "True", "reason": "NewReplicaSetAvailable",
				"message":        fmt.Sprintf("ReplicaSet %q has successfully progressed.", d.GetName()+"-"+hash),
				"lastUpdateTime": since, "lastTransitionTime": since,
			},
		},
	}
}

// setPodRunning makes a stored Pod scheduled to node and running, with
// the status the kubelet reports.
func setPodRunning(pod *unstructured.Unstructured, node string) error {
	if err := unstructured.SetNestedField(pod.Object, node, "spec", "nodeName"); err != nil {
		return err
	}
	containers, _, err := unstructured.NestedSlice(pod.Object, "spec", "containers")
	if err != nil {
		return err
	}
	started := time.Now().Add(-3 * time.Hour).UTC().Format(time.RFC3339)
	var statuses []any
	for _, c := range containers {
		c, ok := c.(map[string]any)
		if !ok {
			return errors.New("a container is not an object")
		}
		image, _ := c["image"].(string)
		name, _ := c["name"].(string)
		statuses = append(statuses, map[string]any{
			"name":         name,
			"image":        image,
			"imageID":      image + "@sha256:" + fakeHex(image, 64),
			"containerID":  "containerd://" + fakeHex(pod.GetName()+name, 64),
			"ready":        true,
			"started":      true,
			"restartCount": int64(0),
			"state":        map[string]any{"running": map[string]any{"startedAt": started}},
			"lastState":    map[string]any{},
		})
	}
	var conditions []any
	for _, t := range []string{"PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady", "PodScheduled"} {
		conditions = append(conditions, map[string]any{
			"type": t, "status": "True", "lastProbeTime": nil, "lastTransitionTime": started,
		})
	}
	status, _, _ := unstructured.NestedMap(pod.Object, "status")
	if status == nil {
		status = map[string]any{}
	}
	maps.Copy(status, map[string]any{
		"phase":             "Running",
		"conditions":        conditions,
		"hostIP":            "10.0.3.17",
		"hostIPs":           []any{map[string]any{"ip": "10.0.3.17"}},
		"podIP":             "10.244.3.42",
		"podIPs":            []any{map[string]any{"ip": "10.244.3.42"}},
		"startTime":         started,
		"containerStatuses": statuses,
	})
	pod.Object["status"] = status
	return nil
}

// setImage sets the image of a workload's first container.
func setImage(u *unstructured.Unstructured, image string) error {
	path := []string{"spec", "template", "spec", "containers"}
	if u.GetKind() == "Pod" {
		path = []string{"spec", "containers"}
	}
	containers, ok, err := unstructured.NestedSlice(u.Object, path...)
	if err != nil || !ok || len(containers) == 0 {
		return fmt.Errorf("%s %s has no containers: %v", u.GetKind(), u.GetName(), err)
	}
	first, ok := containers[0].(map[string]any)
	if !ok {
		return fmt.Errorf("%s %s: a container is not an object", u.GetKind(), u.GetName())
	}
	first["image"] = image
	return unstructured.SetNestedSlice(u.Object, containers, path...)
}

// fakeHex is a stable hex string of n digits derived from seed, for ids
// the corpus needs to look real (image digests, container ids).
func fakeHex(seed string, n int) string {
	sum := sha256.Sum256([]byte(seed))
	return hex.EncodeToString(sum[:])[:n]
}

// fakeUID is a stable UUID-shaped id derived from seed.
func fakeUID(seed string) string {
	h := fakeHex(seed, 32)
	return h[0:8] + "-" + h[8:12] + "-4" + h[13:16] + "-8" + h[17:20] + "-" + h[20:32]
}
