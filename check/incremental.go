package check

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sschema "k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/truce-dev/truce/gitops"
	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/schema/toolkit"
	"github.com/truce-dev/truce/simulate"
)

// replacement says how an input was made from another (NewLoader): base's
// repository without the objects of files, then the objects read from the
// new content of files, which may hold files base did not have; the
// cluster's part is base's.
type replacement struct {
	base Input
	// files are the absolute paths of the files replaced or created.
	files map[string]bool
	// kept is how many objects of the repository are base's:
	// Repository[kept:] are those read from files.
	kept int
}

// prepareCandidate prepares the input of a candidate fix: from r when
// the fix only replaces manifests of r's input (prepareReplaced), else
// as Prepare does.
func (r *Repository) prepareCandidate(ctx context.Context, in Input, opts Options) (*Repository, error) {
	if r2, ok := r.prepareReplaced(in, opts); ok {
		return r2, nil
	}
	return Prepare(ctx, in, opts, r.scopes)
}

// prepareReplaced prepares in, made from r's input by replacing files of
// its repository (NewLoader), from what Prepare derived for r: the
// objects of the other files keep their place, settings and findings, and
// only the objects taken out and read anew are looked at. It gives what
// Prepare(in) gives (TestPrepareReplacedMatchesPrepare) and reports false,
// for Prepare to do it, when the objects of the replaced files change what
// Prepare derives from the repository as a whole: GitOps settings (an
// Application, a Kustomization, argocd-cm, an ignore-differences
// annotation), writers documents, CRDs and the GitOps tools' own kinds,
// a policy engine's configuration, kinds whose scope is not known yet, or
// a policy engine that derives background writers from every object.
//
// So verifying a candidate fix costs the objects of the files it edits,
// not the whole repository's preparation again.
func (r *Repository) prepareReplaced(in Input, opts Options) (*Repository, bool) {
	e := in.replaced
	if e == nil || r.src.replaced != nil || !sameObjects(e.base.Repository, r.src.Repository) ||
		!sameObjects(e.base.Cluster, r.src.Cluster) || !sameObjects(in.Cluster, r.src.Cluster) ||
		len(r.src.Units) > 0 || len(in.Units) > 0 {
		return nil, false
	}
	for _, eng := range opts.Admission.Engines {
		if _, ok := eng.(simulate.BackgroundEngine); ok {
			return nil, false
		}
	}
	isChanged := map[string]bool{}
	changed := func(file string) bool {
		c, ok := isChanged[file]
		if !ok {
			c = e.files[abs(file)]
			isChanged[file] = c
		}
		return c
	}
	toolkitKind := map[k8sschema.GroupKind]bool{}
	// plain reports whether a manifest of the replaced files is one that
	// Prepare only places: in the base, in the desired objects, or both.
	plain := func(o manifest.Object) bool {
		return r.origins.plain(o.Object, func() bool { return r.isPlain(o, opts, toolkitKind) })
	}
	if e.kept > len(in.Repository) {
		return nil, false
	}
	added := in.Repository[e.kept:]
	// A manifest of a replaced file that the fix leaves as it was decodes
	// to the same JSON: what Prepare made of it is reused, at its new
	// place in the file. Only one that moved must be plain, since the
	// settings and findings may quote where it was.
	same := make([]*unstructured.Unstructured, len(added))
	keptAt := make(map[*unstructured.Unstructured]manifest.Source, len(added))
	for i, o := range added {
		if b := r.origins.same(o, r.src.Repository); b != nil {
			same[i] = b
			keptAt[b] = o.Source
		}
	}
	for _, o := range r.src.Repository {
		if !changed(o.Source.File) {
			continue
		}
		if src, ok := keptAt[o.Object]; ok && src == o.Source {
			continue
		}
		if !plain(o) {
			return nil, false
		}
	}
	for i, o := range added {
		if same[i] == nil && !plain(o) {
			return nil, false
		}
	}

	r2 := &Repository{
		Settings:   r.Settings,
		writers:    r.writers,
		detect:     r.detect,
		scopes:     r.scopes,
		units:      in.Units,
		background: r.background,
		refused:    r.refused,
		src:        in,
	}
	// Base: the cluster's objects, the repository's (those of the other
	// files, then the replaced files'), the GitOps tools' CRDs and the
	// policy engines' configuration, which the replaced files do not
	// change.
	nc := len(r.src.Cluster)
	base := make([]manifest.Object, 0, len(r.Base)+len(added))
	base = append(base, r.Base[:nc]...)
	for _, b := range r.Base[nc : nc+r.repoBase] {
		if !changed(b.Source.File) {
			base = append(base, b)
		}
	}
	desired := make([]simulate.Desired, 0, len(r.Desired)+len(added))
	for _, d := range r.Desired {
		if !changed(d.Source.File) {
			desired = append(desired, d)
		}
	}
	var unknown []simulate.Desired
	for _, d := range r.Unknown {
		if !changed(d.Source.File) {
			unknown = append(unknown, d)
		}
	}
	for i, o := range added {
		if same[i] != nil {
			or := r.origins.of[same[i]]
			switch {
			case or.admission:
				base = append(base, o)
			case or.unknown:
				unknown = append(unknown, simulate.Desired{Object: o.Object, Source: o.Source})
			case or.desired != nil:
				if or.base != nil {
					base = append(base, manifest.Object{Source: o.Source, Object: or.base})
				}
				desired = append(desired, simulate.Desired{Object: or.desired, Source: o.Source})
			}
			continue
		}
		if isAdmissionConfig(o.Object) {
			base = append(base, o)
			continue
		}
		if isBaseToo(o.Object) {
			base = append(base, manifest.Object{Source: o.Source, Object: o.Object.DeepCopy()})
		}
		d := simulate.Desired{Object: o.Object, Source: o.Source}
		// As Prepare gives a namespace.
		if namespaced, _ := r.scopes.get(o.Object.GroupVersionKind().GroupKind()); namespaced && o.Object.GetNamespace() == "" {
			obj := o.Object.DeepCopy()
			obj.SetNamespace(r2.defaultNamespace(d))
			d.Object = obj
		}
		desired = append(desired, d)
	}
	r2.repoBase = len(base) - nc
	base = append(base, r.Base[nc+r.repoBase:]...)
	r2.Base, r2.Desired, r2.Unknown = base, desired, unknown
	// Findings: the settings' warnings, then the ignore rules against the
	// new desired objects.
	nw := len(r.Settings.Warnings)
	r2.Findings = append(r2.Findings, r.Findings[:nw]...)
	r2.Findings = append(r2.Findings, ineffectiveRules(r.Settings, r2.Desired)...)
	return r2, true
}

// isPlain reports whether o, a manifest of a file a fix replaces, is one
// that Prepare only places (see prepareReplaced). toolkitKind caches
// toolkit.Has.
func (r *Repository) isPlain(o manifest.Object, opts Options, toolkitKind map[k8sschema.GroupKind]bool) bool {
	if o.Object == nil || simulate.IsWritersDocument(o.Object) {
		return false
	}
	g := gitops.ObjectOf(o)
	if gitops.IsSettings(g) {
		return false
	}
	if rules, err := gitops.ResourceIgnoreDifferences(g); len(rules) > 0 || err != nil {
		return false
	}
	gk := o.Object.GroupVersionKind().GroupKind()
	if o.Object.GetKind() == "CustomResourceDefinition" {
		return false
	}
	has, ok := toolkitKind[gk]
	if !ok {
		has = toolkit.Has(gk)
		toolkitKind[gk] = has
	}
	if has {
		return false
	}
	if gk.Group != "" {
		for _, eng := range opts.Admission.Engines {
			if eng.Configures(gk) {
				return false
			}
		}
	}
	if isAdmissionConfig(o.Object) {
		return true
	}
	_, known := r.scopes.get(gk)
	return known
}

// origin is what Split and Prepare made of one manifest of the
// repository: a base object only (admission), one of Unknown, a desired
// object (with the namespace Prepare gave it) and, for Namespaces and
// CRDs, its copy among the base objects; or nothing (settings, writers
// documents), which the settings and writers hold.
type origin struct {
	admission     bool
	unknown       bool
	desired, base *unstructured.Unstructured
}

// origins are the origin of each manifest of a repository, and which of
// them are plain (isPlain), remembered for the candidate fixes verified
// concurrently.
type origins struct {
	// of is written only while preparing the repository.
	of map[*unstructured.Unstructured]origin

	// byRaw finds a manifest by its JSON (manifest.Object.Raw).
	rawOnce sync.Once
	byRaw   map[string]*unstructured.Unstructured

	mu      sync.Mutex
	isPlain map[*unstructured.Unstructured]bool
}

func newOrigins(n int) *origins {
	return &origins{of: make(map[*unstructured.Unstructured]origin, n), isPlain: map[*unstructured.Unstructured]bool{}}
}

func (o *origins) set(obj *unstructured.Unstructured, or origin) { o.of[obj] = or }

// unknown records that Prepare left obj out as a kind no CRD defines.
func (o *origins) unknown(obj *unstructured.Unstructured) {
	o.of[obj] = origin{unknown: true}
}

// defaulted records that Prepare gave obj a namespace in its copy.
func (o *origins) defaulted(obj, copied *unstructured.Unstructured) {
	or := o.of[obj]
	or.desired = copied
	o.of[obj] = or
}

// same returns the manifest of repo (the repository's manifests) that o
// is: o itself, or the one that decoded to the same JSON; nil for a
// manifest that is new.
func (o *origins) same(m manifest.Object, repo []manifest.Object) *unstructured.Unstructured {
	if _, ok := o.of[m.Object]; ok {
		return m.Object
	}
	if len(m.Raw) == 0 {
		return nil
	}
	o.rawOnce.Do(func() {
		o.byRaw = make(map[string]*unstructured.Unstructured, len(repo))
		for _, r := range repo {
			if _, ok := o.of[r.Object]; ok && len(r.Raw) > 0 {
				o.byRaw[string(r.Raw)] = r.Object
			}
		}
	})
	return o.byRaw[string(m.Raw)]
}

// plain returns whether obj is plain, from compute the first time. A
// kind's scope, once known, stays known, so a remembered answer holds
// for the repository's candidates.
func (o *origins) plain(obj *unstructured.Unstructured, compute func() bool) bool {
	o.mu.Lock()
	p, ok := o.isPlain[obj]
	o.mu.Unlock()
	if ok {
		return p
	}
	p = compute()
	o.mu.Lock()
	o.isPlain[obj] = p
	o.mu.Unlock()
	return p
}

// sameObjects reports whether a and b are the same slice.
func sameObjects(a, b []manifest.Object) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
