package gatekeeper_test

import "strings"

// judgeNamespaces are stored in every own case's cluster.
const judgeNamespaces = `
apiVersion: v1
kind: Namespace
metadata: {name: team-a, labels: {team: a}}
---
apiVersion: v1
kind: Namespace
metadata: {name: ignored, labels: {admission.gatekeeper.sh/ignore: "yes"}}
---
apiVersion: v1
kind: Namespace
metadata: {name: gatekeeper-system}
`

// judgePod and judgeDeployment are objects of the own cases; NS is
// replaced by the namespace.
const judgePod = `
apiVersion: v1
kind: Pod
metadata: {name: web-pod, namespace: NS, labels: {app: web}}
spec:
  initContainers:
  - name: init
    image: busybox:1.36
  containers:
  - name: web
    image: nginx:1.27
    args: ["--a"]
  - name: log
    image: registry.example.com:5000/team/log@sha256:0123456789012345678901234567890123456789012345678901234567890123
`

const judgeDeployment = `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web-deployment, namespace: NS, labels: {app: web}}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`

func pod(ns string) string    { return strings.ReplaceAll(judgePod, "NS", ns) }
func deploy(ns string) string { return strings.ReplaceAll(judgeDeployment, "NS", ns) }

// assignPod is an Assign on Pods at location with value (YAML) and extra
// spec fields (YAML lines, indented by two).
func assignPod(name, location, value, extra string) string {
	return `
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: ` + name + `}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "` + location + `"
  parameters:
    assign: {value: ` + value + `}
` + extra
}

func with(docs ...string) string { return judgeNamespaces + "\n---\n" + strings.Join(docs, "\n---\n") }

// gatorClusterScoped: gator expand mutates a cluster-scoped object with an
// empty Namespace (pkg/gator/expand/expand.go NamespaceForResource), which
// Gatekeeper's matcher takes for a namespaced object (pkg/mutation/match/
// match.go: hasNamespace is true when the Namespace is not nil); the
// webhook passes none for a request without a namespace
// (pkg/webhook/mutation.go).
const gatorClusterScoped = "gator expand matches a cluster-scoped object as namespaced: scope Cluster does not match it"

// ownMutationCases are truce's own cases for TestGatorExpand.
var ownMutationCases = []mutationCase{
	// Assign.
	{name: "assign/deployment replicas", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: replicas}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: spec.replicas
  parameters: {assign: {value: 3}}
`), object: deploy("team-a")},
	{name: "assign/MustNotExist keeps a set field", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: replicas}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: spec.replicas
  parameters:
    pathTests: [{subPath: spec.replicas, condition: MustNotExist}]
    assign: {value: 3}
`), object: deploy("default")},
	{name: "assign/MustExist of an absent parent", mutators: with(assignPod("seccomp", "spec.securityContext.seccompProfile.type", "Localhost",
		"    pathTests: [{subPath: spec.securityContext.seccompProfile, condition: MustExist}]\n")), object: pod("default")},
	{name: "assign/a keyed list entry is created", mutators: with(assignPod("sidecar", "spec.containers[name: sidecar].image", "busybox:1.36", "")), object: pod("default")},
	{name: "assign/glob over containers", mutators: with(assignPod("pull", "spec.containers[name: *].imagePullPolicy", "Always", "")), object: pod("default")},
	{name: "assign/glob over init containers", mutators: with(assignPod("init-pull", "spec.initContainers[name: *].imagePullPolicy", "Never", "")), object: pod("default")},
	{name: "assign/an object value", mutators: with(assignPod("sc", "spec.securityContext", "{runAsNonRoot: true, runAsUser: 1000}", "")), object: pod("default")},
	{name: "assign/fromMetadata namespace", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: env-ns}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: web].env[name: NAMESPACE].value"
  parameters: {assign: {fromMetadata: {field: namespace}}}
`), object: pod("team-a")},
	{name: "assign/fromMetadata name", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: env-name}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: web].env[name: POD].value"
  parameters: {assign: {fromMetadata: {field: name}}}
`), object: pod("default")},
	{name: "assign/match.namespaces matches", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "  match: {namespaces: [team-a]}\n")), object: pod("team-a")},
	{name: "assign/match.namespaces does not match", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "  match: {namespaces: [team-a]}\n")), object: pod("default")},
	{name: "assign/namespaceSelector", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "  match: {namespaceSelector: {matchLabels: {team: a}}}\n")), object: pod("team-a")},
	{name: "assign/namespaceSelector on the label the API server sets", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default",
		"  match: {namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: default}}}\n")), object: pod("default")},
	{name: "assign/excludedNamespaces", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "  match: {excludedNamespaces: [\"team-*\"]}\n")), object: pod("team-a")},
	{name: "assign/labelSelector", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "  match: {labelSelector: {matchLabels: {app: web}}}\n")), object: pod("default")},
	{name: "assign/name glob", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "  match: {name: \"web-*\"}\n")), object: pod("default")},
	{name: "assign/scope Cluster does not match a Pod", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "  match: {scope: Cluster}\n")), object: pod("default")},
	{name: "assign/match.kinds", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "  match: {kinds: [{apiGroups: [\"\"], kinds: [Pod]}]}\n")), object: pod("default")},
	{name: "assign/cluster-scoped object", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: describe}
spec:
  applyTo: [{groups: [scheduling.k8s.io], kinds: [PriorityClass], versions: [v1]}]
  location: description
  parameters: {assign: {value: set by Gatekeeper}}
`), object: `
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-priorityclass}
value: 1000
`},
	{name: "assign/scope Cluster on a cluster-scoped object", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: describe}
spec:
  applyTo: [{groups: [scheduling.k8s.io], kinds: [PriorityClass], versions: [v1]}]
  match: {scope: Cluster}
  location: description
  parameters: {assign: {value: set by Gatekeeper}}
`), object: `
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: high-priorityclass}
value: 1000
`, gatorDiffers: gatorClusterScoped},
	{name: "assign/a path through a list as an object fails the write", mutators: with(assignPod("wrong", "spec.containers.image", "busybox", "")), object: pod("default")},
	{name: "assign/a path through a string fails the write", mutators: with(assignPod("wrong", "spec.dnsPolicy.value", "x", "")), object: pod("default")},
	{name: "assign/service", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: affinity}
spec:
  applyTo: [{groups: [""], kinds: [Service], versions: [v1]}]
  location: spec.sessionAffinity
  parameters: {assign: {value: ClientIP}}
`), object: `
apiVersion: v1
kind: Service
metadata: {name: web-service, namespace: default}
spec:
  selector: {app: web}
  ports: [{port: 80}]
`},
	{name: "assign/configmap data", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: data}
spec:
  applyTo: [{groups: [""], kinds: [ConfigMap], versions: [v1]}]
  location: data.level
  parameters: {assign: {value: debug}}
`), object: `
apiVersion: v1
kind: ConfigMap
metadata: {name: settings-configmap, namespace: team-a}
data: {level: info}
`},
	{name: "assign/v1beta1 mutator", mutators: with(strings.Replace(assignPod("dns", "spec.dnsPolicy", "Default", ""), "mutations.gatekeeper.sh/v1", "mutations.gatekeeper.sh/v1beta1", 1)), object: pod("default")},
	{name: "assign/applyTo operations CREATE", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: Assign
metadata: {name: dns}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1], operations: [CREATE]}]
  location: spec.dnsPolicy
  parameters: {assign: {value: Default}}
`), object: pod("default"),
		gatorDiffers: "gator mutates without an operation, which matches only applyTo entries naming every operation the webhook supports (pkg/mutation/match/apply_to.go MatchesOperation); the webhook's CREATE matches"},
	{name: "assign/match.source Original", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "  match: {source: Original}\n")), object: pod("default"),
		gatorDiffers: "gator expand mutates resultants as source Generated (pkg/expansion/system.go expand); the webhook's objects are Original (pkg/webhook/mutation.go)"},
	{name: "assign/namespace labelled admission.gatekeeper.sh/ignore", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "")), object: pod("ignored"),
		gatorDiffers: "the namespaceSelector of Gatekeeper's MutatingWebhookConfiguration (deploy/gatekeeper.yaml) keeps the webhook from being called; gator has no webhook configuration"},
	{name: "assign/gatekeeper-system", mutators: with(assignPod("dns", "spec.dnsPolicy", "Default", "")), object: pod("gatekeeper-system"),
		gatorDiffers: "gatekeeper-system is excluded by the webhook configuration's namespaceSelector (deploy/gatekeeper.yaml, admission.gatekeeper.sh/ignore on the namespace Helm installs; --exempt-namespace); gator mutates it"},

	// AssignMetadata.
	{name: "assignmetadata/label", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: owner}
spec:
  location: metadata.labels.owner
  parameters: {assign: {value: platform}}
`), object: pod("default")},
	{name: "assignmetadata/annotation", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: note}
spec:
  location: metadata.annotations.note
  parameters: {assign: {value: "checked"}}
`), object: deploy("team-a")},
	{name: "assignmetadata/an existing label is kept", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: app}
spec:
  location: metadata.labels.app
  parameters: {assign: {value: other}}
`), object: pod("default")},
	{name: "assignmetadata/fromMetadata namespace", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: ns-label}
spec:
  location: metadata.labels.namespace
  parameters: {assign: {fromMetadata: {field: namespace}}}
`), object: pod("team-a")},
	{name: "assignmetadata/namespaceSelector", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: team}
spec:
  match: {scope: Namespaced, namespaceSelector: {matchExpressions: [{key: team, operator: In, values: [a, b]}]}}
  location: metadata.labels.team
  parameters: {assign: {value: a}}
`), object: deploy("team-a")},
	{name: "assignmetadata/cluster-scoped object", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: tier}
spec:
  match: {kinds: [{apiGroups: [scheduling.k8s.io], kinds: [PriorityClass]}]}
  location: metadata.labels.tier
  parameters: {assign: {value: gold}}
`), object: `
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gold-priorityclass}
value: 100
`},
	{name: "assignmetadata/scope Cluster on a cluster-scoped object", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: tier}
spec:
  match: {scope: Cluster, kinds: [{apiGroups: [scheduling.k8s.io], kinds: [PriorityClass]}]}
  location: metadata.labels.tier
  parameters: {assign: {value: gold}}
`), object: `
apiVersion: scheduling.k8s.io/v1
kind: PriorityClass
metadata: {name: gold-priorityclass}
value: 100
`, gatorDiffers: gatorClusterScoped},

	// ModifySet.
	{name: "modifyset/merge", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: args}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: web].args"
  parameters: {operation: merge, values: {fromList: ["--a", "--b"]}}
`), object: pod("default")},
	{name: "modifyset/prune", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: args}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: *].args"
  parameters: {operation: prune, values: {fromList: ["--a"]}}
`), object: pod("default")},
	{name: "modifyset/merge creates the list", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: command}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: log].command"
  parameters: {operation: merge, values: {fromList: ["/bin/log"]}}
`), object: pod("default")},
	{name: "modifyset/operation defaults to merge", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: command}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: log].command"
  parameters: {values: {fromList: ["/bin/log"]}}
`), object: pod("default"),
		gatorDiffers: "gator reads the file as written; the API server stores the ModifySet with its CRD's default operation: merge (+kubebuilder:default=merge, apis/mutations/v1/modifyset_types.go), which Gatekeeper's controller reads. gator fails with \"unrecognized operation for modifyset\""},
	{name: "modifyset/numbers", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: groups}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: spec.securityContext.supplementalGroups
  parameters: {operation: merge, values: {fromList: [1000, 2000]}}
`), object: `
apiVersion: v1
kind: Pod
metadata: {name: groups-pod, namespace: default}
spec:
  securityContext: {supplementalGroups: [1000]}
  containers: [{name: web, image: nginx}]
`},
	{name: "modifyset/objects", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: tolerations}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: spec.template.spec.tolerations
  parameters:
    operation: merge
    values:
      fromList:
      - {key: dedicated, operator: Equal, value: web, effect: NoSchedule}
`), object: deploy("team-a")},
	{name: "modifyset/pathTests", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: args}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: *].args"
  parameters:
    pathTests: [{subPath: "spec.containers[name: *].args", condition: MustExist}]
    operation: merge
    values: {fromList: ["--verbose"]}
`), object: pod("default")},

	// AssignImage.
	{name: "assignimage/domain", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: mirror}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: *].image"
  parameters: {assignDomain: mirror.example.com}
`), object: pod("default")},
	{name: "assignimage/path", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: path}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: web].image"
  parameters: {assignPath: library/nginx-unprivileged}
`), object: pod("default")},
	{name: "assignimage/tag", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: tag}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: *].image"
  parameters: {assignTag: ":1.28"}
`), object: pod("default")},
	{name: "assignimage/digest", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: digest}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.initContainers[name: init].image"
  parameters: {assignTag: "@sha256:abcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcdefabcd"}
`), object: pod("default")},
	{name: "assignimage/all three", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: all}
spec:
  applyTo: [{groups: [apps], kinds: [Deployment], versions: [v1]}]
  location: "spec.template.spec.containers[name: *].image"
  parameters: {assignDomain: "localhost:5000", assignPath: mirror/nginx, assignTag: ":stable"}
`), object: deploy("team-a")},

	// Ordering between mutators: (group, kind, namespace, name), then
	// again until nothing changes.
	{name: "order/same location, later name wins", mutators: with(
		assignPod("b-second", "spec.dnsPolicy", "ClusterFirst", ""),
		assignPod("a-first", "spec.dnsPolicy", "Default", "")), object: pod("default")},
	{name: "order/Assign before AssignImage", mutators: with(
		assignPod("image", "spec.containers[name: web].image", "nginx:1.29", ""), `
apiVersion: mutations.gatekeeper.sh/v1alpha1
kind: AssignImage
metadata: {name: a-mirror}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: *].image"
  parameters: {assignDomain: mirror.example.com}
`), object: pod("default")},
	{name: "order/Assign before ModifySet", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: ModifySet
metadata: {name: a-merge}
spec:
  applyTo: [{groups: [""], kinds: [Pod], versions: [v1]}]
  location: "spec.containers[name: web].args"
  parameters: {operation: merge, values: {fromList: ["--merged"]}}
`, assignPod("z-args", "spec.containers[name: web].args", "[\"--assigned\"]", "")), object: pod("default")},
	{name: "order/AssignMetadata enables an Assign on the next iteration", mutators: with(`
apiVersion: mutations.gatekeeper.sh/v1
kind: AssignMetadata
metadata: {name: tier}
spec:
  location: metadata.labels.tier
  parameters: {assign: {value: web}}
`, assignPod("dns", "spec.dnsPolicy", "Default", "  match: {labelSelector: {matchLabels: {tier: web}}}\n")), object: pod("default")},
	{name: "order/an Assign creates what another's MustExist tests", mutators: with(
		assignPod("a-user", "spec.securityContext.runAsUser", "1000", "    pathTests: [{subPath: spec.securityContext, condition: MustExist}]\n"),
		assignPod("b-context", "spec.securityContext.runAsNonRoot", "true", "")), object: pod("default")},
	{name: "order/conflicting schemas: neither applies, others do", mutators: with(
		assignPod("as-list", "spec.containers[name: *].image", "busybox", ""),
		assignPod("as-object", "spec.containers.image", "busybox", ""),
		assignPod("unrelated", "spec.dnsPolicy", "Default", "")), object: pod("default"),
		gatorDiffers: "gator expand stops at the first conflicting schema (pkg/gator/expand/expand.go NewExpander returns Upsert's ErrConflictingSchema); Gatekeeper's mutator controller keeps both mutators in the system, which skips them and runs the others (pkg/controller/mutators/core/reconciler.go, pkg/mutation/system.go)"},
	{name: "order/an object value overwrites what an earlier mutator set", mutators: with(
		assignPod("a-user", "spec.securityContext.runAsUser", "1000", ""),
		assignPod("b-context", "spec.securityContext", "{runAsNonRoot: true}", "")), object: pod("default")},
}
