package world

import (
	"context"
	"fmt"

	"github.com/truce-dev/truce/manifest"
	"github.com/truce-dev/truce/render/appset"
)

// applicationSet expands an ApplicationSet into the Applications Argo
// CD's applicationset-controller would create; they are the unit's
// objects, positioned at the ApplicationSet, and followed as any
// Application. Its git generators read this checkout's working tree when
// they name this repository, else a clone.
func (s *state) applicationSet(ctx context.Context, u *Unit, o manifest.Object) ([]manifest.Object, error) {
	apps, err := appset.Expand(ctx, o.Object, appset.Options{
		Repository: func(ctx context.Context, repoURL, revision string) (string, error) {
			if s.repos.has(repoURL) {
				return s.root, nil
			}
			return s.checkout(ctx, repoURL, revision)
		},
		// Each Application is a unit; more than a world follows would
		// stop the whole world instead of this ApplicationSet.
		MaxApplications: maxUnits,
		MaxFileBytes:    s.opts.Render.Manifest.MaxFileBytes,
		MaxTotalBytes:   s.opts.Render.Manifest.MaxTotalBytes,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", u.Source, err)
	}
	if len(apps) == 0 {
		s.w.Notes = append(s.w.Notes, fmt.Sprintf("%s: ApplicationSet %s generates no Application", u.Source, u.Name))
	}
	out := make([]manifest.Object, len(apps))
	for i, a := range apps {
		out[i] = manifest.Object{Source: o.Source, Object: a}
	}
	return out, nil
}
