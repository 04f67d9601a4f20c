package lint

import (
	"context"

	"github.com/truce-dev/truce/check"
	"github.com/truce-dev/truce/manifest"
)

// checkSimulator is the Simulator the CLI passes (truce check's
// simulation, fixes unverified), for the tests of the loop rule; lint
// itself does not import check.
type checkSimulator struct{}

func (checkSimulator) Simulate(ctx context.Context, repository, cluster []manifest.Object) ([]Simulated, error) {
	out, err := check.Check(ctx, check.Input{Repository: repository, Cluster: cluster}, check.Options{}, nil, nil)
	if err != nil {
		return nil, err
	}
	var sims []Simulated
	for _, p := range out.Problems {
		o := p.Problem.Object
		sim := Simulated{Source: o.Source, Object: o.Ref.String(), Verdict: o.Verdict, Loop: o.Loop}
		if fix := p.Chosen; fix != nil {
			sim.FixTitle, sim.FixDescription = fix.Title, fix.Description
		} else if len(p.Candidates) > 0 {
			sim.FixTitle, sim.FixDescription = p.Candidates[0].Title, p.Candidates[0].Description
		}
		sims = append(sims, sim)
	}
	return sims, nil
}

// testOptions are the Options the CLI runs lint with.
func testOptions() Options { return Options{Simulator: checkSimulator{}} }
