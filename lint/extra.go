package lint

// extraRules are the rules that run admission: competing and
// non-idempotent mutators, Gatekeeper's mutators, the GitOps loop, Pod
// Security on pod templates.
func extraRules() []Rule {
	var out []Rule
	out = append(out, mutatorRules()...)
	out = append(out, gatekeeperRules()...)
	out = append(out, loopRules()...)
	return append(out, podSecurityRules()...)
}
