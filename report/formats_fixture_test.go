package report

import (
	"fmt"
	"strings"
	"time"
)

// sampleCheckReport is a realistic `truce check` report for the SARIF,
// JUnit and HTML tests: the image-mirror loop under Argo CD self-heal (16
// writes at the backoff 0s, 0s, 2s, 8s, 26s, 80s, 242s, then every 5m), an
// HPA fighting Flux over /spec/replicas, a rejected Deployment, a webhook
// that could not be called, a generated Secret pruned by label tracking,
// two Synced Services and one ineffective ignore rule.
func sampleCheckReport() *Report {
	const (
		mirror = "MutatingAdmissionPolicy/mirror (binding mirror)"
		argo   = "argocd-controller"
		kc     = "kustomize-controller"
		hpa    = "kube-controller-manager"
	)

	// Argo CD's self-heal backoff: 2s, x3, capped at 5m.
	var webTimeline []Event
	at := []time.Duration{0, 0, 2 * time.Second, 8 * time.Second, 26 * time.Second, 80 * time.Second, 242 * time.Second}
	for len(at) < 16 {
		at = append(at, at[len(at)-1]+5*time.Minute)
	}
	for i, t := range at {
		e := Event{At: t, Writer: argo, ByTool: true, Verb: "apply", Admission: []string{mirror}}
		if i == 0 {
			e.Verb = "apply (create)"
			e.Changes = []string{
				"/spec/replicas: (none) → 3",
				"/spec/template/spec/containers/0/image: (none) → registry.internal/nginx:1.27",
			}
		}
		webTimeline = append(webTimeline, e)
	}

	var apiTimeline []Event
	for i := 0; i < 6; i++ {
		t := time.Duration(i) * 10 * time.Minute
		e := Event{At: t, Writer: kc, ByTool: true, Verb: "apply", Changes: []string{"/spec/replicas: 5 → 2"}}
		if i == 0 {
			e.Verb = "apply (create)"
			e.Changes = []string{"/spec/replicas: (none) → 2", "/spec/template/spec/containers/0/image: (none) → ghcr.io/acme/api:2.4.1"}
		}
		apiTimeline = append(apiTimeline, e, Event{
			At: t + 15*time.Second, Writer: hpa, Verb: "update", Changes: []string{"/spec/replicas: 2 → 5"},
		})
	}

	return &Report{
		Repository: "examples/image-mirror",
		Runs: []Run{
			{
				Tool: "argocd", Unit: "shop",
				Settings:  "legacy three-way diff, automated sync with self-heal and prune, self-heal backoff 2s ×3 capped at 5m",
				Window:    time.Hour,
				Simulated: 50 * time.Minute,
				Objects: []Object{
					{
						Object:  "Deployment.apps shop/web",
						Source:  "apps/shop/web.yaml:1",
						Verdict: "Loop",
						Reason: "Argo CD applies image nginx:1.27 from Git; " + mirror + " rewrites it to " +
							"registry.internal/nginx:1.27 in the same request, so the next comparison shows drift " +
							"again and self-heal applies again, every 5m once its backoff is capped",
						Loop: &Loop{
							Fields: []string{"/spec/template/spec/containers/0/image"},
							Tool:   argo, Other: mirror, OtherKind: "admission",
							Period: 5 * time.Minute, WritesPerHour: 12,
						},
						Fields: []Field{{
							Pointer: "/spec/template/spec/containers/0/image",
							Desired: "nginx:1.27", Live: "registry.internal/nginx:1.27", Origin: mirror,
						}},
						Writes:   18,
						Timeline: webTimeline,
						Desired:  webYAML("nginx:1.27"),
						Live:     webYAML("registry.internal/nginx:1.27"),
						Fix: &Fix{
							Kind:        "git-value",
							Title:       "Put registry.internal/nginx:1.27 in Git",
							Description: "Rewrite the image in apps/shop/web.yaml to the value the policy stores, so Git and the cluster agree and the policy has nothing left to change.",
							Verified:    true, Verdict: "Synced",
							Edits: []Edit{{Path: "apps/shop/web.yaml", Diff: webFixDiff}},
						},
						Alternatives: []Fix{
							{
								Kind:        "validating-policy",
								Title:       "Validate the mirror instead of mutating to it",
								Description: "A ValidatingAdmissionPolicy (bound in Warn first) that requires images from registry.internal, replacing the mutation.",
								Verified:    true, Verdict: "Synced",
								Edits: []Edit{{Path: "policies/require-mirror.yaml", New: true, Diff: newFileDiff("policies/require-mirror.yaml", requireMirrorYAML)}},
							},
							{
								Kind:        "argocd-server-side-diff",
								Title:       "Compare with server-side diff including mutation webhooks",
								Description: "Argo CD then compares against what the API server would store, admission included.",
								Verified:    true, Verdict: "Synced",
								Edits: []Edit{{Path: "argocd/shop.yaml", Diff: ssdDiff}},
							},
							{
								Kind:        "ignore-rule",
								Title:       "Ignore the image of Deployment shop/web",
								Description: "ignoreDifferences scoped to this Deployment's first container image, with RespectIgnoreDifferences=true.",
								Warning:     "Real drift in this image becomes invisible to Argo CD.",
								Verified:    true, Verdict: "Synced",
								Edits: []Edit{{Path: "argocd/shop.yaml", Diff: ignoreDiff}},
							},
						},
					},
					{
						Object:  "Deployment.apps shop/batch",
						Source:  "apps/shop/batch.yaml:1",
						Verdict: "Rejected",
						Reason:  "ValidatingAdmissionPolicy replica-limit denies the write: replicas must be at most 10 (Git has 25)",
						Writes:  1,
						Timeline: []Event{{
							At: 0, Writer: argo, ByTool: true, Verb: "apply (create)",
							Error: `deployments.apps "batch" is forbidden: ValidatingAdmissionPolicy 'replica-limit' with binding 'replica-limit' denied request: replicas must be at most 10`,
						}},
						Fix: &Fix{
							Kind: "git-value", Title: "Set replicas to 10 in Git",
							Description: "The largest value the policy admits.",
							Verified:    true, Verdict: "Synced",
							Edits: []Edit{{Path: "apps/shop/batch.yaml", Diff: batchFixDiff}},
						},
					},
					{
						Object:  "Deployment.apps shop/worker",
						Source:  "apps/shop/worker.yaml:1",
						Verdict: "Unpredictable",
						Reason:  "Mutating webhook sidecar-injector.istio.io (service istio-system/istiod) could not be called offline; pass --webhook-endpoint to include it",
						Writes:  1,
					},
					{
						Object:  "Secret team-a/registry-creds",
						Verdict: "Pruned",
						Reason:  "Kyverno generate copies the label app.kubernetes.io/instance=shop onto the Secret; with label tracking Argo CD takes the copy for its own and prunes it, and Kyverno creates it again",
						Writes:  24,
						Timeline: []Event{
							{At: 5 * time.Second, Writer: "kyverno-generate", Verb: "create", Changes: []string{"/: created (copy of shop/registry-creds)"}},
							{At: 3 * time.Minute, Writer: argo, ByTool: true, Verb: "delete", Changes: []string{"/: deleted (prune)"}},
							{At: 3*time.Minute + 5*time.Second, Writer: "kyverno-generate", Verb: "create", Changes: []string{"/: created (copy of shop/registry-creds)"}},
							{At: 6 * time.Minute, Writer: argo, ByTool: true, Verb: "delete", Changes: []string{"/: deleted (prune)"}},
						},
						Fix: &Fix{
							Kind: "tracking-annotation", Title: "Track resources by annotation",
							Description: "With application.resourceTrackingMethod: annotation, a copied label no longer makes Argo CD believe it owns the copy.",
							Verified:    true, Verdict: "Synced",
							Edits: []Edit{{Path: "argocd/argocd-cm.yaml", Diff: trackingDiff}},
						},
					},
					{
						Object: "Service shop/web", Source: "apps/shop/web.yaml:34", Verdict: "Synced",
						Reason: "Applied once; the comparison shows no drift", Writes: 1,
					},
				},
			},
			{
				Tool: "flux", Unit: "app",
				Settings:  "server-side apply, interval 10m, drift detection on, no ignore rules",
				Window:    time.Hour,
				Simulated: time.Hour,
				Objects: []Object{
					{
						Object:  "Deployment.apps app/api",
						Source:  "clusters/prod/app/api.yaml:1",
						Verdict: "Loop",
						Reason:  "Git sets replicas: 2 and the HorizontalPodAutoscaler api scales to 5; Flux resets it on every reconciliation, the HPA scales again",
						Loop: &Loop{
							Fields: []string{"/spec/replicas"}, Tool: kc, Other: hpa, OtherKind: "controller",
							Period: 10 * time.Minute, WritesPerHour: 12,
						},
						Fields:   []Field{{Pointer: "/spec/replicas", Desired: "2", Live: "5", Origin: hpa}},
						Writes:   12,
						Timeline: apiTimeline,
						Desired:  apiYAML(2),
						Live:     apiYAML(5),
						Fix: &Fix{
							Kind: "git-value", Title: "Remove spec.replicas from Git: the HPA owns it",
							Description: "Without replicas in the manifest, Flux's apply no longer sets the field and the HPA's value stays.",
							Verified:    true, Verdict: "Synced",
							Edits: []Edit{{Path: "clusters/prod/app/api.yaml", Diff: apiFixDiff}},
						},
						Alternatives: []Fix{{
							Kind: "ignore-rule", Title: "Ignore /spec/replicas of Deployment app/api in Flux",
							Warning:  "A replicas value set by hand is no longer corrected.",
							Verified: false,
						}},
					},
					{
						Object: "Service app/api", Source: "clusters/prod/app/api.yaml:27", Verdict: "Synced",
						Reason: "Applied once; the comparison shows no drift", Writes: 1,
					},
				},
			},
		},
		Findings: []Finding{{
			Source:  "argocd/argocd-cm.yaml:14",
			Message: "ignore rule for /spec/replicas of apps/Deployment matches no object of Application shop",
		}},
	}
}

func webYAML(image string) string {
	return `apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    app.kubernetes.io/instance: shop
  name: web
  namespace: shop
spec:
  progressDeadlineSeconds: 600
  replicas: 3
  revisionHistoryLimit: 10
  selector:
    matchLabels:
      app: web
  strategy:
    rollingUpdate:
      maxSurge: 25%
      maxUnavailable: 25%
    type: RollingUpdate
  template:
    metadata:
      labels:
        app: web
    spec:
      containers:
      - image: ` + image + `
        imagePullPolicy: IfNotPresent
        name: web
        ports:
        - containerPort: 80
          protocol: TCP
        resources: {}
      dnsPolicy: ClusterFirst
      restartPolicy: Always
      schedulerName: default-scheduler
      terminationGracePeriodSeconds: 30
`
}

func apiYAML(replicas int) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: api
  namespace: app
spec:
  replicas: %d
  selector:
    matchLabels:
      app: api
  template:
    metadata:
      labels:
        app: api
    spec:
      containers:
      - image: ghcr.io/acme/api:2.4.1
        name: api
`, replicas)
}

const webFixDiff = `--- a/apps/shop/web.yaml
+++ b/apps/shop/web.yaml
@@ -17,7 +17,7 @@ spec:
       containers:
         - name: web
           # mirrored by the cluster's policy
-          image: nginx:1.27
+          image: registry.internal/nginx:1.27
           ports:
             - containerPort: 80
 ---
`

const batchFixDiff = `--- a/apps/shop/batch.yaml
+++ b/apps/shop/batch.yaml
@@ -5,3 +5,3 @@ metadata:
 spec:
-  replicas: 25
+  replicas: 10
   selector:
`

const ssdDiff = `--- a/argocd/shop.yaml
+++ b/argocd/shop.yaml
@@ -3,6 +3,8 @@ kind: Application
 metadata:
   name: shop
   namespace: argocd
+  annotations:
+    argocd.argoproj.io/compare-options: ServerSideDiff=true,IncludeMutationWebhook=true
 spec:
   project: default
   source:
`

const ignoreDiff = `--- a/argocd/shop.yaml
+++ b/argocd/shop.yaml
@@ -14,2 +14,9 @@ spec:
   syncPolicy:
     automated: {selfHeal: true, prune: true}
+    syncOptions:
+      - RespectIgnoreDifferences=true
+  ignoreDifferences:
+    - group: apps
+      kind: Deployment
+      name: web
+      jsonPointers: [/spec/template/spec/containers/0/image]
`

const trackingDiff = `--- a/argocd/argocd-cm.yaml
+++ b/argocd/argocd-cm.yaml
@@ -5,0 +6 @@ metadata:
+  application.resourceTrackingMethod: annotation
`

const apiFixDiff = `--- a/clusters/prod/app/api.yaml
+++ b/clusters/prod/app/api.yaml
@@ -5,5 +5,4 @@ metadata:
   namespace: app
 spec:
-  replicas: 2
   selector:
     matchLabels:
`

const requireMirrorYAML = `apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: require-mirror
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
    - apiGroups: [apps]
      apiVersions: [v1]
      operations: [CREATE, UPDATE]
      resources: [deployments]
  validations:
  - expression: object.spec.template.spec.containers.all(c, c.image.startsWith('registry.internal/'))
    message: images must come from registry.internal
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: require-mirror
spec:
  policyName: require-mirror
  validationActions: [Warn]
`

func newFileDiff(path, content string) string {
	lines := strings.Split(strings.TrimSuffix(content, "\n"), "\n")
	var b strings.Builder
	fmt.Fprintf(&b, "--- /dev/null\n+++ b/%s\n@@ -0,0 +1,%d @@\n", path, len(lines))
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	return b.String()
}
