// Package check is `truce check`: it reads a repository (manifests, the
// cluster's admission configuration, Argo CD and Flux settings, the
// controllers that write beside them), simulates every GitOps tool that
// reconciles it against the in-process cluster, and for every object that
// does not settle finds the narrowest fix and verifies it by simulating
// again with the fix applied.
package check

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/truce-dev/truce/admission"
	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/cluster/memory"
	"github.com/truce-dev/truce/drift/ignore"
	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/internal/parallel"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/progress"
	"github.com/truce-dev/truce/render/world"
	"github.com/truce-dev/truce/report"
	"github.com/truce-dev/truce/schema/toolkit"
	"github.com/truce-dev/truce/simulate"
)

// Input is what a check reads.
type Input struct {
	// Repository holds everything loaded from the repository: manifests,
	// GitOps settings, writers documents, admission configuration.
	Repository []manifest.Object
	// Cluster holds the objects of the cluster described with -c
	// (policies, bindings, webhook configurations, namespaces, CRDs,
	// existing objects).
	Cluster []manifest.Object
	// World names the entry point the repository was read from
	// (render/world), "" for a repository read as it is.
	World string
	// Units are the units followed from the entry point; those that
	// could not be rendered are reported as such.
	Units []*world.Unit
	// Notes are what reading the world assumed (a synthesized bootstrap).
	Notes []string
	// replaced is set by NewLoader's loader when the input is another
	// one with some of its repository's files replaced.
	replaced *replacement
}

// Options configure a check.
type Options struct {
	Admission  admission.Options
	Simulation simulate.Options
	// Progress, when set, hears which unit is being simulated and which
	// fix verified.
	Progress progress.Sink
	// Workers is how many problems have their fixes verified, and how
	// many independent simulations (clusters) run, at a time (GOMAXPROCS
	// when 0).
	Workers int
}

// Repository is a repository taken apart: what the GitOps tool applies,
// what the cluster already has, and how the tools are configured.
type Repository struct {
	Desired []simulate.Desired
	// Base are the objects the cluster holds before the first sync: -c,
	// the repository's admission configuration, its namespaces and CRDs.
	Base     []manifest.Object
	Settings *gitops.Settings
	// writers are the writers documents; detect is false when one turns
	// detection off.
	writers []manifest.Object
	detect  bool
	// scopes caches which kinds are namespaced.
	scopes *Scopes
	// Findings are problems in the settings.
	Findings []report.Finding
	// units are those the repository was read through (render/world).
	units []*world.Unit
	// refused are the manifests configuring a policy engine that the
	// cluster refuses (admission.Refuser), with why: they stay desired,
	// and no background controller runs them.
	refused map[*unstructured.Unstructured]string
	// background are the policy engines' background controllers
	// (Kyverno's generate rules), writers derived from the policies.
	background []simulate.Background
	// Unknown are manifests of a kind no CRD defines (not in the
	// repository, -c or the cluster): left out of the simulations and
	// reported Unpredictable.
	Unknown []simulate.Desired
	// src is the input the repository was prepared from, and repoBase
	// how many of Base, after src.Cluster's, Split took from
	// src.Repository: a candidate fix's repository is prepared from them
	// (prepareReplaced).
	src      Input
	repoBase int
	// origins are what Split and Prepare made of each manifest of
	// src.Repository, for prepareReplaced to reuse those a candidate fix
	// leaves as they are.
	origins *origins
}

// defaultNamespace is the namespace a namespaced manifest without one
// lands in: the one its unit gives it (an Application's destination, a
// HelmRelease's release namespace), else the API server's "default".
func (r *Repository) defaultNamespace(d simulate.Desired) string {
	for _, u := range r.units {
		if u.Unit == d.Source.Unit && u.DefaultNamespace != "" {
			return u.DefaultNamespace
		}
	}
	return "default"
}

// unknownObjects are the report's objects for the manifests of setup s
// whose kind no CRD defines.
func (r *Repository) unknownObjects(s *simulate.Setup) []report.Object {
	var out []report.Object
	for _, d := range r.Unknown {
		if !d.Source.Unit.IsZero() && setupOf(d.Source.Unit) != [2]string{s.Tool, s.Unit} {
			continue
		}
		gvk := d.Object.GroupVersionKind()
		reason := fmt.Sprintf("no CRD for %s: pass it with -c or check against a cluster", gvk.GroupKind())
		if why, ok := r.refused[d.Object]; ok {
			reason = why // a policy engine says why there is none
		}
		switch s.Tool {
		case "flux":
			reason += "; Flux would fail the whole Kustomization, whose dry run refuses unknown kinds, and apply none of it"
		case "argocd":
			reason += "; Argo CD would fail the sync, whose dry run refuses unknown kinds, unless the Application sets SkipDryRunOnMissingResource=true"
		}
		out = append(out, report.Object{Object: cluster.RefOf(d.Object).String(), Source: d.Source.String(), Verdict: simulate.Unpredictable, Reason: reason})
	}
	return out
}

// setupOf is the tool and unit name of the setup that applies unit u.
func setupOf(u manifest.Unit) [2]string {
	switch u.Kind {
	case "Application":
		return [2]string{"argocd", u.Name}
	case "HelmRelease":
		return [2]string{"flux", simulate.HelmReleaseUnit(u.Name)}
	}
	return [2]string{"flux", u.Name}
}

// isAdmissionConfig reports whether obj configures admission. Webhook
// configurations managed by cert-manager's cainjector stay manifests:
// their caBundle is what the simulation is about.
func isAdmissionConfig(obj *unstructured.Unstructured) bool {
	if !admission.IsConfigurationKindName(obj.GetKind()) {
		return false // without parsing the apiVersion of every manifest
	}
	gvk := obj.GroupVersionKind()
	if !admission.IsConfigurationKind(gvk.GroupKind()) {
		return false
	}
	for k := range obj.GetAnnotations() {
		if strings.HasPrefix(k, "cert-manager.io/inject-") {
			return false
		}
	}
	return true
}

// engineConfiguration moves the manifests that configure a policy engine
// (Gatekeeper's mutators and constraints) into the base, as Split does with
// the built-in admission configuration: the cluster holds them before the
// application is synced. Namespaces, which engines also read, stay
// manifests. So do those the engine's own webhook refuses (an invalid
// Kyverno policy): the cluster never holds them, and the sync that applies
// them is refused, as the real one is.
func (r *Repository) engineConfiguration(ctx context.Context, engines []admission.PolicyEngine) error {
	if len(engines) == 0 {
		return nil
	}
	configures := func(d simulate.Desired) bool {
		gk := d.Object.GroupVersionKind().GroupKind()
		return gk.Group != "" && slices.ContainsFunc(engines, func(e admission.PolicyEngine) bool { return e.Configures(gk) })
	}
	var config []*unstructured.Unstructured
	for _, d := range r.Desired {
		if configures(d) {
			config = append(config, d.Object)
		}
	}
	if len(config) == 0 {
		return nil
	}
	base := make([]*unstructured.Unstructured, len(r.Base))
	for i, o := range r.Base {
		base[i] = o.Object
	}
	for _, e := range engines {
		rf, ok := e.(admission.Refuser)
		if !ok {
			continue
		}
		refusals, err := rf.Refusals(ctx, base, config)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
		for i, why := range refusals {
			if r.refused == nil {
				r.refused = map[*unstructured.Unstructured]string{}
			}
			r.refused[config[i]] = why
		}
	}
	kept := r.Desired[:0]
	for _, d := range r.Desired {
		if _, refused := r.refused[d.Object]; configures(d) && !refused {
			r.Base = append(r.Base, manifest.Object{Source: d.Source, Object: d.Object})
			continue
		}
		kept = append(kept, d)
	}
	r.Desired = kept
	return nil
}

// backgroundWriters asks the engines that run background controllers
// (Kyverno's generate rules) for them, configured by the base objects
// (the cluster's policies, the repository's policy manifests moved there)
// and told the kinds the repository holds. Rules whose writes cannot be
// predicted offline become findings that name them.
func (r *Repository) backgroundWriters(ctx context.Context, engines []admission.PolicyEngine) error {
	var objs []*unstructured.Unstructured
	for _, o := range r.Base {
		objs = append(objs, o.Object)
	}
	for _, d := range r.Desired {
		if _, refused := r.refused[d.Object]; !refused {
			objs = append(objs, d.Object)
		}
	}
	for _, e := range engines {
		be, ok := e.(simulate.BackgroundEngine)
		if !ok {
			continue
		}
		b, err := be.Background(ctx, objs)
		if err != nil {
			return fmt.Errorf("%s: %w", e.Name(), err)
		}
		r.background = append(r.background, b)
		for _, u := range b.Unpredictable() {
			r.Findings = append(r.Findings, report.Finding{Message: "Unpredictable: " + u})
		}
	}
	return nil
}

// Split takes a repository apart.
func Split(in Input) (*Repository, error) {
	r := &Repository{detect: true, units: in.Units, origins: newOrigins(len(in.Repository))}
	r.Base = append(r.Base, in.Cluster...)
	objs := make([]gitops.Object, 0, len(in.Repository))
	for _, o := range in.Repository {
		if simulate.IsWritersDocument(o.Object) {
			r.writers = append(r.writers, o)
			continue
		}
		objs = append(objs, gitops.ObjectOf(o))
	}
	settings, rest, err := gitops.Discover(objs)
	if err != nil {
		return nil, err
	}
	r.Settings = settings
	for _, w := range settings.Warnings {
		r.Findings = append(r.Findings, report.Finding{Source: w.Source.String(), Message: w.Field + ": " + w.Message})
	}
	bySource := make(map[*unstructured.Unstructured]manifest.Object, len(in.Repository))
	for _, o := range in.Repository {
		bySource[o.Object] = o
	}
	if len(rest) > 0 {
		r.Desired = make([]simulate.Desired, 0, len(rest))
	}
	for _, o := range rest {
		m := bySource[o.Unstructured]
		if isAdmissionConfig(o.Unstructured) {
			r.Base = append(r.Base, m)
			r.origins.set(o.Unstructured, origin{admission: true})
			continue
		}
		var or origin
		if isBaseToo(o.Unstructured) {
			// They exist before the application's objects are applied;
			// the tool applies them too.
			or.base = o.DeepCopy()
			r.Base = append(r.Base, manifest.Object{Source: m.Source, Object: or.base})
		}
		or.desired = o.Unstructured
		r.origins.set(o.Unstructured, or)
		r.Desired = append(r.Desired, simulate.Desired{Object: o.Unstructured, Source: m.Source})
	}
	for _, o := range in.Repository {
		if _, ok := r.origins.of[o.Object]; !ok {
			r.origins.set(o.Object, origin{}) // settings and writers documents
		}
	}
	r.repoBase = len(r.Base) - len(in.Cluster)
	toolkitCRDs, err := missingToolkitCRDs(r.Base, r.Desired)
	if err != nil {
		return nil, err
	}
	r.Base = append(r.Base, toolkitCRDs...)
	r.Findings = append(r.Findings, ineffectiveRules(settings, r.Desired)...)
	for _, w := range r.writers {
		if _, detect, err := simulate.ParseWriters(w.Object, w.Source.String()); err != nil {
			return nil, err
		} else if !detect {
			r.detect = false
		}
	}
	return r, nil
}

// isBaseToo reports whether a manifest of the repository is also in the
// cluster before the first sync: Namespaces and CRDs.
func isBaseToo(obj *unstructured.Unstructured) bool {
	switch obj.GetKind() {
	case "Namespace", "CustomResourceDefinition":
		return true
	}
	return false
}

// ineffectiveRules are the findings about the repository-wide ignore rules
// of settings that match nothing of desired or ignore nothing there.
func ineffectiveRules(settings *gitops.Settings, desired []simulate.Desired) []report.Finding {
	var rules []ignore.Rule
	for _, tool := range []ignore.Tool{ignore.ArgoCD, ignore.Flux} {
		rules = append(rules, settings.ComparisonFor(gitops.Unit{Tool: tool}).Rules...)
	}
	if len(rules) == 0 {
		return nil
	}
	set, err := ignore.Compile(rules, ignore.Options{})
	if err != nil {
		return nil
	}
	objs := make([]*unstructured.Unstructured, len(desired))
	for i, d := range desired {
		objs[i] = d.Object
	}
	var out []report.Finding
	for _, f := range set.Ineffective(objs) {
		out = append(out, ruleFinding(f))
	}
	return out
}

// missingToolkitCRDs returns the CRDs of the GitOps tools' own kinds
// (Flux sources, Argo CD projects, ...) that desired objects use and no
// CRD in base defines: the tool that reads the repository is installed
// wherever it is used, so its kinds exist even when the repository does
// not hold their CRDs.
func missingToolkitCRDs(base []manifest.Object, desired []simulate.Desired) ([]manifest.Object, error) {
	defined := make([]*unstructured.Unstructured, 0, len(base)+len(desired))
	used := make([]*unstructured.Unstructured, 0, len(desired))
	for _, o := range base {
		defined = append(defined, o.Object)
	}
	for _, d := range desired {
		defined = append(defined, d.Object)
		used = append(used, d.Object)
	}
	crds, err := toolkit.For(used, defined)
	if err != nil {
		return nil, err
	}
	out := make([]manifest.Object, len(crds))
	for i, c := range crds {
		out[i] = manifest.Object{Source: manifest.Source{File: "(" + toolkitSource(c) + ")"}, Object: c}
	}
	return out, nil
}

// toolkitSource names where an embedded CRD comes from.
func toolkitSource(crd *unstructured.Unstructured) string {
	group, _, _ := unstructured.NestedString(crd.Object, "spec", "group")
	if strings.HasSuffix(group, "argoproj.io") {
		return "Argo CD's CRD, built into truce"
	}
	return "Flux's CRD, built into truce"
}

// ruleFinding is an ignore rule's finding as the report shows it: the
// rule's file and line, then its field and the problem.
func ruleFinding(f ignore.Finding) report.Finding {
	if f.Rule.Source == "" {
		return report.Finding{Message: f.String(), Pointer: f.Pointer}
	}
	msg := f.Message
	if f.Rule.Field != "" {
		msg = f.Rule.Field + ": " + msg
	}
	return report.Finding{Source: f.Rule.Source, Message: msg, Pointer: f.Pointer}
}

// Writers returns fresh writers for one run (writers keep state): those
// declared, and those the manifests imply unless detection is off.
func (r *Repository) Writers() ([]simulate.Writer, error) {
	var out []simulate.Writer
	var errs []error
	for _, w := range r.writers {
		ws, _, err := simulate.ParseWriters(w.Object, w.Source.String())
		errs = append(errs, err)
		out = append(out, ws...)
	}
	if r.detect {
		out = append(out, simulate.DetectWriters(r.Desired)...)
	}
	for _, b := range r.background {
		out = append(out, b.Writers()...)
	}
	return out, errors.Join(errs...)
}

// NewCluster returns a fresh in-process cluster holding the base objects.
func (r *Repository) NewCluster(ctx context.Context, opts admission.Options) (*memory.Cluster, error) {
	objs := make([]*unstructured.Unstructured, len(r.Base))
	for i, o := range r.Base {
		objs[i] = o.Object.DeepCopy()
	}
	state, err := admission.NewState(objs...)
	if err != nil {
		return nil, fmt.Errorf("the cluster's objects: %w", err)
	}
	return memory.New(ctx, state, opts)
}

// Simulate runs one setup on a fresh cluster, for desired (the setup's
// own manifests, or a subset of them).
func (r *Repository) Simulate(ctx context.Context, s *simulate.Setup, desired []simulate.Desired, opts Options) (*simulate.Result, error) {
	res, err := r.SimulateWorld(ctx, []*simulate.Setup{s}, [][]simulate.Desired{desired}, opts)
	if err != nil {
		return nil, err
	}
	return res[0], nil
}

// Together reports whether the repository was read through its entry
// points, so that its units are applied to one cluster: the world's.
// Otherwise each setup runs alone (hand-made layouts, and the two tools'
// defaults, which are alternatives, not neighbours).
func (r *Repository) Together() bool { return len(r.units) > 0 }

// SimulateWorld runs setups together on one fresh cluster, each for its
// desired (the setups' own manifests, or subsets of them), in the order
// given, and returns a result per setup.
func (r *Repository) SimulateWorld(ctx context.Context, setups []*simulate.Setup, desired [][]simulate.Desired, opts Options) ([]*simulate.Result, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	c, err := r.NewCluster(ctx, opts.Admission)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return r.runWorld(ctx, c, setups, desired, opts)
}

// runWorld runs setups together on cluster c, each for its desired.
func (r *Repository) runWorld(ctx context.Context, c cluster.Cluster, setups []*simulate.Setup, desired [][]simulate.Desired, opts Options) ([]*simulate.Result, error) {
	writers, err := r.Writers()
	if err != nil {
		return nil, err
	}
	members := make([]simulate.Member, len(setups))
	for i, s := range setups {
		tool, err := s.Build(desired[i], simulate.Kinds(writers))
		if err != nil {
			return nil, err
		}
		members[i] = simulate.Member{Tool: tool, Desired: desired[i], Label: memberLabel(s)}
	}
	results, err := simulate.RunWorld(ctx, c, members, writers, opts.Simulation)
	if err != nil {
		return nil, err
	}
	for i, s := range setups {
		results[i].Unit = s.Unit
	}
	return results, nil
}

// simulateAll runs setups on their own manifests: together when the
// repository was read through its entry points, else each alone. Groups
// share no cluster, so opts.Workers of them run at a time (each on its own
// in-process cluster); the results are the same as one after another
// (TestSimulateAllWorkersAgree). When ctx ends first (the run's time limit), the
// setups not simulated by then have no result (nil) and the error is nil:
// what finished is still reported.
func (r *Repository) simulateAll(ctx context.Context, setups []*simulate.Setup, opts Options) ([]*simulate.Result, error) {
	out := make([]*simulate.Result, len(setups))
	groups := make([][]int, len(setups))
	for i := range setups {
		groups[i] = []int{i}
	}
	if r.Together() {
		groups = r.byCluster(setups)
	}
	errs := make([]error, len(groups))
	var (
		mu   sync.Mutex
		done int
	)
	simulateGroup := func(g int) {
		group := groups[g]
		members := make([]*simulate.Setup, len(group))
		desired := make([][]simulate.Desired, len(group))
		objects := 0
		for j, i := range group {
			members[j], desired[j] = setups[i], setups[i].Desired
			objects += len(setups[i].Desired)
		}
		mu.Lock()
		event := progress.Event{Stage: progress.Simulating, Done: done, Total: len(setups), Objects: objects}
		mu.Unlock()
		if len(group) == 1 {
			event.Unit = memberLabel(members[0])
		} else {
			event.Unit = fmt.Sprintf("%d units together", len(group))
		}
		progress.Report(opts.Progress, event)
		o := opts
		o.Simulation.OnRound = func(member, rounds int) {
			e := event
			e.Unit, e.Rounds = memberLabel(members[member]), rounds
			progress.Report(opts.Progress, e)
		}
		res, err := r.SimulateWorld(ctx, members, desired, o)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			if len(group) > 1 {
				errs[g] = fmt.Errorf("simulating the units together: %w", err)
			} else {
				errs[g] = fmt.Errorf("simulating %s: %w", unitName(members[0].Tool, members[0].Unit), err)
			}
			return
		}
		for j, i := range group {
			out[i] = res[j]
		}
		mu.Lock()
		done += len(group)
		mu.Unlock()
	}
	parallel.Each(len(groups), opts.Workers, simulateGroup)
	if ctx.Err() != nil {
		return out, nil
	}
	// The first group's error, where one after another would have stopped.
	for _, err := range errs {
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// shared finds the objects several units of a world apply to one
// cluster: the tools
// fight over them (Argo CD warns SharedResourceWarning; Flux's
// Kustomizations take the object and its ownership labels from each other
// every interval), whatever the simulation shows for their fields.
func (r *Repository) shared(setups []*simulate.Setup) []report.Finding {
	if !r.Together() {
		return nil
	}
	type use struct {
		units  []string
		source manifest.Source
	}
	type key struct {
		cluster string
		ref     cluster.Ref
	}
	uses := map[key]*use{}
	var keys []key
	for _, s := range setups {
		c := r.clusterOf(s)
		for _, d := range s.Desired {
			k := key{c, cluster.RefOf(d.Object)}
			u := uses[k]
			if u == nil {
				u = &use{source: d.Source}
				uses[k] = u
				keys = append(keys, k)
			}
			if label := memberLabel(s); !slices.Contains(u.units, label) {
				u.units = append(u.units, label)
			}
		}
	}
	var out []report.Finding
	for _, k := range keys {
		u := uses[k]
		if len(u.units) < 2 {
			continue
		}
		out = append(out, report.Finding{Source: u.source.String(), Message: fmt.Sprintf(
			"%s is applied by %s: each takes it over from the other (ownership labels, tracking, values); keep it in one unit",
			k.ref, strings.Join(u.units, " and "))})
	}
	return out
}

// clusterOf is the cluster setup s's objects go to (world.Unit.Cluster).
func (r *Repository) clusterOf(s *simulate.Setup) string {
	for _, u := range r.units {
		if setupOf(u.Unit) == [2]string{s.Tool, s.Unit} {
			return u.Cluster
		}
	}
	return ""
}

// byCluster groups the indexes of setups by the cluster their objects go
// to, in order.
func (r *Repository) byCluster(setups []*simulate.Setup) [][]int {
	at := map[string]int{}
	var out [][]int
	for i, s := range setups {
		c := r.clusterOf(s)
		j, ok := at[c]
		if !ok {
			j = len(out)
			at[c] = j
			out = append(out, nil)
		}
		out[j] = append(out[j], i)
	}
	return out
}

// memberLabel names a setup's unit to the others of its world.
func memberLabel(s *simulate.Setup) string {
	switch {
	case s.Tool == "argocd":
		return "Application " + s.Unit
	case strings.HasPrefix(s.Unit, simulate.HelmReleaseUnit("")):
		return s.Unit
	}
	return "Kustomization " + s.Unit
}

// inUnitOrder sorts setups as the world's units are (Flux dependsOn, an
// app of apps before its Applications), keeping their order otherwise.
func (r *Repository) inUnitOrder(setups []*simulate.Setup) {
	rank := map[[2]string]int{}
	for i, u := range r.units {
		if _, ok := rank[setupOf(u.Unit)]; !ok {
			rank[setupOf(u.Unit)] = i
		}
	}
	at := func(s *simulate.Setup) int {
		if i, ok := rank[[2]string{s.Tool, s.Unit}]; ok {
			return i
		}
		return len(r.units)
	}
	sort.SliceStable(setups, func(i, j int) bool { return at(setups[i]) < at(setups[j]) })
}

// Setups are the simulations the repository calls for.
func (r *Repository) Setups() ([]*simulate.Setup, error) {
	return simulate.Setups(r.Settings, r.Desired)
}

// focus returns the manifests a re-run for one object needs: the object,
// the namespaces and CRDs it may need, and for a ClusterRole the others
// (the aggregation controller fills its rules from theirs).
func focus(desired []simulate.Desired, ref cluster.Ref) []simulate.Desired {
	roles := ref.Group == "rbac.authorization.k8s.io" && ref.Kind == "ClusterRole"
	var out []simulate.Desired
	for _, d := range desired {
		k := d.Object.GetKind()
		// The name and kind before the whole ref: this runs for every
		// manifest of each candidate fix.
		self := k == ref.Kind && d.Object.GetName() == ref.Name && cluster.RefOf(d.Object) == ref
		if k == "Namespace" || k == "CustomResourceDefinition" || self ||
			(roles && k == "ClusterRole" && d.Object.GroupVersionKind().Group == "rbac.authorization.k8s.io") {
			out = append(out, d)
		}
	}
	return out
}
