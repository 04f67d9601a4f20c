package drift

// FixKind names a way to end drift that a tool keeps fighting over. It
// lives here, below both, so that truce check's fixes (package fix) and
// truce sync's advice (package reconcile) use the same names without one
// importing the other.
type FixKind string

// Fix kinds, in order of preference.
const (
	// FixGitValue puts the value the cluster stores into Git.
	FixGitValue FixKind = "git-value"
	// FixValidatingPolicy switches a mutating policy to a validating one.
	FixValidatingPolicy FixKind = "validating-policy"
	// FixServerSideDiff turns on Argo CD's server-side diff with
	// IncludeMutationWebhook.
	FixServerSideDiff FixKind = "argocd-server-side-diff"
	// FixIgnoreAggregatedRoles sets ignoreAggregatedRoles in Argo CD's
	// resource.compareoptions.
	FixIgnoreAggregatedRoles FixKind = "argocd-ignore-aggregated-roles"
	// FixGiveToController removes from Git the fields a controller writes
	// (an autoscaler's replicas), so that it owns them alone.
	FixGiveToController FixKind = "give-to-controller"
	// FixIgnoreRule hands the fields to the other writer with a narrow
	// ignore rule.
	FixIgnoreRule FixKind = "ignore-rule"
	// FixTrackingAnnotation switches Argo CD to annotation tracking.
	FixTrackingAnnotation FixKind = "tracking-annotation"
)
