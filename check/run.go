package check

import (
	"context"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/yaml"

	"github.com/truce-dev/truce/cluster"
	"github.com/truce-dev/truce/fix"
	"github.com/truce-dev/truce/report"
	"github.com/truce-dev/truce/simulate"
)

// Loader loads the input again with some files replaced (path → content),
// for verifying a fix; a nil Loader leaves fixes unverified.
type Loader func(ctx context.Context, overlay map[string][]byte) (Input, error)

// Outcome is a check's report, and the fixes behind it.
type Outcome struct {
	Report *report.Report
	// Fixes are the candidates per problem, in the report's order of
	// runs and objects; Chosen the first verified one (or nil).
	Problems []*ProblemFixes
}

// ProblemFixes are the candidate fixes of one problem.
type ProblemFixes struct {
	Tool, Unit string
	Ref        cluster.Ref
	Verdict    simulate.Verdict
	// Problem is what the fixes were made for; fix.Candidates remakes
	// them over other file contents (fixes applied before).
	Problem    fix.Problem
	Candidates []*fix.Candidate
	// Verdicts holds, per candidate, the verdict of the simulation with
	// the fix applied ("" when not verified), and why not.
	Verdicts []simulate.Verdict
	Notes    []string
	Chosen   *fix.Candidate
}

// Check runs the simulations of a repository and finds the fixes.
func Check(ctx context.Context, in Input, opts Options, load Loader, read fix.Reader) (*Outcome, error) {
	repo, err := Prepare(ctx, in, opts, nil)
	if err != nil {
		return nil, err
	}
	setups, err := repo.Setups()
	if err != nil {
		return nil, err
	}
	out := &Outcome{Report: &report.Report{}}
	out.Report.Findings = append(out.Report.Findings, repo.Findings...)
	for _, n := range in.Notes {
		out.Report.Findings = append(out.Report.Findings, report.Finding{Message: n})
	}
	failed := unrendered(in)
	var todo []*simulate.Setup
	for _, s := range setups {
		if !failed[[2]string{s.Tool, s.Unit}] { // else reported by unitRuns
			todo = append(todo, s)
		}
	}
	repo.inUnitOrder(todo)
	out.Report.Findings = append(out.Report.Findings, repo.shared(todo)...)
	results, err := repo.simulateAll(ctx, todo, opts)
	if err != nil {
		return nil, err
	}
	files := fix.NewSnapshot(read)
	var problems []problem
	for i, s := range todo {
		if results[i] == nil {
			continue
		}
		for _, o := range results[i].Objects {
			if o.Verdict.Problem() {
				problems = append(problems, problem{s, o})
			}
		}
	}
	fixes := repo.verifyAll(ctx, problems, opts, load, files)
	for i, s := range todo {
		res := results[i]
		if res == nil {
			out.Report.Runs = append(out.Report.Runs, notSimulated(in, s))
			continue
		}
		run := report.Run{World: in.World, Tool: res.Tool, Unit: res.Unit, Settings: res.Settings, Window: res.Window, Simulated: res.Simulated}
		for _, o := range res.Objects {
			ro := reportObject(o, res)
			if o.Verdict.Problem() {
				pf := fixes[0]
				fixes = fixes[1:]
				out.Problems = append(out.Problems, pf)
				ro.Notes = pf.Notes
				for i, c := range pf.Candidates {
					rf := reportFix(c, pf.Verdicts[i])
					if c == pf.Chosen {
						ro.Fix = &rf
					} else {
						ro.Alternatives = append(ro.Alternatives, rf)
					}
				}
			}
			run.Objects = append(run.Objects, ro)
		}
		run.Objects = append(run.Objects, repo.unknownObjects(s)...)
		out.Report.Runs = append(out.Report.Runs, run)
	}
	out.Report.Runs = append(out.Report.Runs, unitRuns(in)...)
	return out, nil
}

// outOfTime is why what a run did not reach is not judged.
const outOfTime = "the run's time limit (--timeout) ran out first"

// notSimulated is the run of a setup the time limit left out: each of its
// objects Unpredictable, so that nothing reads as settled.
func notSimulated(in Input, s *simulate.Setup) report.Run {
	run := report.Run{World: in.World, Tool: s.Tool, Unit: s.Unit, Settings: "not simulated"}
	for _, d := range s.Desired {
		run.Objects = append(run.Objects, report.Object{Object: cluster.RefOf(d.Object).String(), Source: d.Source.String(),
			Verdict: simulate.Unpredictable, Reason: "not simulated: " + outOfTime})
	}
	return run
}

// Prepare splits the input and gives namespaced manifests without a
// namespace the one the API server would: "default". scopes caches which
// kinds are namespaced (filled in; nil to start afresh), so that checking
// again after a fix needs no cluster for it.
func Prepare(ctx context.Context, in Input, opts Options, scopes *Scopes) (*Repository, error) {
	repo, err := Split(in)
	if err != nil {
		return nil, err
	}
	repo.src = in
	if err := repo.engineConfiguration(ctx, opts.Admission.Engines); err != nil {
		return nil, err
	}
	if err := repo.backgroundWriters(ctx, opts.Admission.Engines); err != nil {
		return nil, err
	}
	if scopes == nil {
		scopes = &Scopes{}
	}
	repo.scopes = scopes
	var mapper meta.RESTMapper
	kept := repo.Desired[:0]
	for _, d := range repo.Desired {
		gvk := d.Object.GroupVersionKind()
		namespaced, known := scopes.get(gvk.GroupKind())
		if !known {
			if mapper == nil {
				cctx, cancel := context.WithCancel(ctx)
				c, err := repo.NewCluster(cctx, opts.Admission)
				if err != nil {
					cancel()
					return nil, err
				}
				mapper = c.RESTMapper()
				defer cancel()
				defer c.Close()
			}
			m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
			if err != nil {
				// No CRD anywhere: what the server would do with it is
				// unknown, and it must not turn its unit's other
				// objects into noise.
				repo.Unknown = append(repo.Unknown, d)
				repo.origins.unknown(d.Object)
				continue
			}
			namespaced = m.Scope.Name() == meta.RESTScopeNameNamespace
			scopes.set(gvk.GroupKind(), namespaced)
		}
		if namespaced && d.Object.GetNamespace() == "" {
			o := d.Object.DeepCopy()
			o.SetNamespace(repo.defaultNamespace(d))
			repo.origins.defaulted(d.Object, o)
			d.Object = o
		}
		kept = append(kept, d)
	}
	repo.Desired = kept
	return repo, nil
}

// fixes finds and verifies the fixes of one problem.
func (r *Repository) fixes(ctx context.Context, s *simulate.Setup, o *simulate.Object, opts Options, load Loader, files *fix.Files) *ProblemFixes {
	pf := &ProblemFixes{Tool: s.Tool, Unit: s.Unit, Ref: o.Ref, Verdict: o.Verdict}
	p := r.problemOf(s, o)
	pf.Problem = p
	cands, skipped := fix.CandidatesFrom(p, files)
	pf.Candidates = cands
	pf.Notes = skipped
	pf.Verdicts = make([]simulate.Verdict, len(cands))
	for i, c := range cands {
		if load == nil {
			pf.Verdicts[i] = ""
			continue
		}
		if ctx.Err() != nil {
			pf.Notes = append(pf.Notes, fmt.Sprintf("%s: not verified: %s", c.Kind, outOfTime))
			continue
		}
		v, safe, err := r.verifyCandidate(ctx, load, c, s, o, opts)
		if err != nil && ctx.Err() != nil {
			pf.Notes = append(pf.Notes, fmt.Sprintf("%s: not verified: %s", c.Kind, outOfTime))
			continue
		}
		if err != nil {
			pf.Notes = append(pf.Notes, fmt.Sprintf("%s: not verified: %v", c.Kind, err))
			continue
		}
		pf.Verdicts[i] = v
		if pf.Chosen == nil && v == simulate.Synced && safe {
			pf.Chosen = c
		}
	}
	// Once verified, the candidates keep only their edits: the report
	// and the fixes applied need no more.
	for _, c := range cands {
		c.Compact()
	}
	return pf
}

// problemOf is what the fixes of object o of setup s are made for.
func (r *Repository) problemOf(s *simulate.Setup, o *simulate.Object) fix.Problem {
	p := fix.Problem{Tool: s.Tool, Object: o, Source: o.Source, ArgoConfig: r.Settings.ArgoConfig, Admission: r.Base}
	for _, u := range r.units {
		if u.Unit == o.Source.Unit {
			p.Values = u.Values
		}
	}
	for _, app := range r.Settings.Applications {
		if s.Tool == "argocd" && app.Name == s.Unit {
			p.App = app
		}
	}
	for _, k := range r.Settings.Kustomizations {
		if s.Tool == "flux" && k.Name == s.Unit {
			p.Kustomization = k
		}
	}
	for _, hr := range r.Settings.HelmReleases {
		if s.Tool == "flux" && simulate.HelmReleaseUnit(hr.Name) == s.Unit {
			p.HelmRelease = hr
		}
	}
	return p
}

// verify simulates again with the fix's files in place, for the object
// alone (with its namespaces and CRDs), or for the whole unit when the
// object is not in Git; in a world, with the other units that apply the
// object too.
func (r *Repository) verify(ctx context.Context, load Loader, c *fix.Candidate, s *simulate.Setup, o *simulate.Object, opts Options) (simulate.Verdict, error) {
	in, err := load(ctx, c.Files)
	if err != nil {
		return "", err
	}
	r2, err := r.prepareCandidate(ctx, in, opts)
	if err != nil {
		return "", err
	}
	return r2.verdictFor(ctx, s, o, opts)
}

// verdictFor simulates setup s's unit of r, a candidate fix's repository,
// again for object o (see verify), and returns o's verdict.
func (r *Repository) verdictFor(ctx context.Context, s *simulate.Setup, o *simulate.Object, opts Options) (simulate.Verdict, error) {
	setups, err := r.Setups()
	if err != nil {
		return "", err
	}
	var s2 *simulate.Setup
	for _, cand := range setups {
		if cand.Tool == s.Tool && cand.Unit == s.Unit {
			s2 = cand
		}
	}
	if s2 == nil {
		return "", fmt.Errorf("%s is gone with the fix applied", unitName(s.Tool, s.Unit))
	}
	res, err := r.simulateFor(ctx, setups, s2, o, opts)
	if err != nil {
		return "", err
	}
	for _, got := range res.Objects {
		if got.Ref == o.Ref {
			return got.Verdict, nil
		}
	}
	// A copy that is no longer pruned is no longer reported.
	return simulate.Synced, nil
}

// simulateFor runs setup s of setups again for object o (see verify), and
// returns its result.
func (r *Repository) simulateFor(ctx context.Context, setups []*simulate.Setup, s *simulate.Setup, o *simulate.Object, opts Options) (*simulate.Result, error) {
	members, desired, at := r.worldOf(setups, s, o)
	results, err := r.SimulateWorld(ctx, members, desired, opts)
	if err != nil {
		return nil, err
	}
	return results[at], nil
}

// worldOf returns what verifying a fix of object o simulates: setup s —
// for o alone when o is in Git — and, in a world, the units of s's
// cluster that apply o too, in the tools' order; at is s's index.
func (r *Repository) worldOf(setups []*simulate.Setup, s *simulate.Setup, o *simulate.Object) (members []*simulate.Setup, desired [][]simulate.Desired, at int) {
	desiredOf := func(cand *simulate.Setup) []simulate.Desired {
		if o.InGit {
			return focus(cand.Desired, o.Ref)
		}
		return cand.Desired
	}
	if !r.Together() {
		return []*simulate.Setup{s}, [][]simulate.Desired{desiredOf(s)}, 0
	}
	r.inUnitOrder(setups)
	at = -1
	for _, cand := range setups {
		d := desiredOf(cand)
		if cand != s && (!holds(d, o.Ref) || r.clusterOf(cand) != r.clusterOf(s)) {
			continue
		}
		if cand == s {
			at = len(members)
		}
		members, desired = append(members, cand), append(desired, d)
	}
	return members, desired, at
}

// holds reports whether desired has the object ref.
func holds(desired []simulate.Desired, ref cluster.Ref) bool {
	for _, d := range desired {
		if cluster.RefOf(d.Object) == ref {
			return true
		}
	}
	return false
}

func unitName(tool, unit string) string {
	if unit == "" {
		return tool + " (defaults)"
	}
	return tool + " " + unit
}

func reportObject(o *simulate.Object, res *simulate.Result) report.Object {
	ro := report.Object{Object: o.Ref.String(), Source: o.Source.String(), Verdict: o.Verdict, Reason: o.Reason, Writes: o.Writes}
	if o.Rejection != "" {
		ro.Reason += ": " + o.Rejection
	}
	if l := o.Loop; l != nil {
		ro.Loop = &report.Loop{Fields: l.Fields, Tool: l.Tool, Other: l.Other, OtherKind: l.OtherKind, Period: l.Period, WritesPerHour: l.WritesPerHour}
	}
	if d := o.Drift; d != nil {
		for _, f := range d.Fields {
			ro.Fields = append(ro.Fields, report.Field{Pointer: f.Pointer, Desired: value(f.Desired, f.DesiredAbsent),
				Live: value(f.Live, f.LiveAbsent), Origin: f.Origin, IgnoredBy: f.IgnoredBy})
		}
		if o.Verdict.Problem() {
			ro.Desired, ro.Live = toYAML(d.Desired), toYAML(d.Live)
		}
	}
	if o.Verdict.Problem() {
		for _, w := range res.Writes {
			if w.Ref != o.Ref {
				continue
			}
			ev := report.Event{At: w.At, Writer: w.Writer, ByTool: w.ByTool, Verb: w.Verb, Error: w.Error}
			if strings.Contains(w.Verb, "create") && w.Error == "" {
				ev.Changes = []string{"created"}
			}
			if w.Verb == "delete" && w.Error == "" {
				ev.Changes = []string{"deleted"}
			}
			for _, f := range w.Fields {
				if strings.Contains(w.Verb, "create") {
					break
				}
				if strings.HasPrefix(f.Pointer, "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration") {
					continue
				}
				ev.Changes = append(ev.Changes, fmt.Sprintf("%s: %s → %s", f.Pointer, brief(value(f.Desired, f.DesiredAbsent)), brief(value(f.Live, f.LiveAbsent))))
			}
			for _, a := range w.Admission {
				ev.Admission = append(ev.Admission, a.By+" ("+strings.Join(a.Fields, ", ")+")")
			}
			ro.Timeline = append(ro.Timeline, ev)
		}
	}
	return ro
}

func reportFix(c *fix.Candidate, verdict simulate.Verdict) report.Fix {
	f := report.Fix{Kind: string(c.Kind), Title: c.Title, Description: c.Description, Warning: c.Warning,
		Verified: verdict == simulate.Synced && !c.Unsafe, Verdict: verdict}
	for _, p := range c.Paths() {
		f.Edits = append(f.Edits, report.Edit{Path: p, New: c.Creates(p), Diff: c.Diff(p)})
	}
	return f
}

func value(v any, absent bool) string {
	if absent {
		return "(absent)"
	}
	if s, ok := v.(string); ok {
		return s
	}
	b, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return strings.TrimSpace(string(b))
}

// brief shortens a long value for a timeline line.
func brief(s string) string {
	const max = 60
	if len(s) <= max && !strings.Contains(s, "\n") {
		return s
	}
	cut := s
	if i := strings.Index(cut, "\n"); i >= 0 {
		cut = cut[:i]
	}
	if len(cut) > max {
		cut = cut[:max]
	}
	return fmt.Sprintf("%s… (%d bytes)", cut, len(s))
}

func toYAML(m map[string]any) string {
	if m == nil {
		return ""
	}
	b, err := yaml.Marshal(m)
	if err != nil {
		return ""
	}
	return string(b)
}
