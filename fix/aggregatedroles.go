package fix

import (
	"errors"
	"fmt"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/simulate"
)

// compareOptionsKey is the argocd-cm key of Argo CD's compare options.
const compareOptionsKey = "resource.compareoptions"

// aggregatedRules reports whether the problem is the rules of a ClusterRole
// that the clusterrole-aggregation controller fills.
func (p Problem) aggregatedRules() bool {
	ref := p.Object.Ref
	if ref.Group != "rbac.authorization.k8s.io" || ref.Kind != "ClusterRole" {
		return false
	}
	if l := p.Object.Loop; l != nil {
		return l.Other == simulate.AggregationManager
	}
	for _, f := range p.loopFields() {
		if f == "/rules" || strings.HasPrefix(f, "/rules/") {
			return true
		}
	}
	return false
}

// ignoreAggregatedRoles sets ignoreAggregatedRoles: true in argocd-cm's
// resource.compareoptions, keeping its other options: Argo CD then leaves
// the rules of every ClusterRole with an aggregationRule out of its diff.
func (e *editor) ignoreAggregatedRoles(p Problem) (*Candidate, error) {
	if p.ArgoConfig != nil && p.ArgoConfig.IgnoreAggregatedRoles {
		return nil, errors.New("argocd-cm already sets ignoreAggregatedRoles")
	}
	if p.ArgoConfig == nil || p.ArgoConfig.Position == (manifest.Source{}) {
		return nil, fmt.Errorf("no argocd-cm in the repository to change (set %s: \"ignoreAggregatedRoles: true\" in it)", compareOptionsKey)
	}
	f, doc, err := e.doc(p.ArgoConfig.Position)
	if err != nil {
		return nil, err
	}
	ptr := "/data/" + compareOptionsKey
	options := map[string]any{}
	if cur, ok, _ := f.Get(doc, ptr); ok {
		s, isString := cur.(string)
		if !isString {
			return nil, fmt.Errorf("%s: data[%s] is not a string", p.ArgoConfig.Position, compareOptionsKey)
		}
		if err := yaml.Unmarshal([]byte(s), &options); err != nil {
			return nil, fmt.Errorf("%s: data[%s]: %w", p.ArgoConfig.Position, compareOptionsKey, err)
		}
		if options == nil {
			options = map[string]any{}
		}
	}
	options["ignoreAggregatedRoles"] = true
	value, err := yaml.Marshal(options)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", compareOptionsKey, err)
	}
	if err := f.Set(doc, ptr, string(value)); err != nil {
		return nil, err
	}
	return e.candidate("Argo CD ignores aggregated ClusterRoles' rules",
		fmt.Sprintf("argocd-cm %s: ignoreAggregatedRoles: true. The clusterrole-aggregation controller owns the rules of a ClusterRole with an aggregationRule; Argo CD stops comparing them, so %s stays as the controller fills it.",
			compareOptionsKey, p.Object.Ref),
		"It applies to every aggregated ClusterRole of every Application; Argo CD still writes Git's rules whenever it syncs the ClusterRole (removing `rules: []` from Git ends that too)."), nil
}
