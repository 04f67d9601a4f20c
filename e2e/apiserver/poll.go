package apiserver

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

const (
	// pollInterval is how often the harness re-checks a condition. The
	// things it waits for (informers, the policy recompilation loop, CRD
	// establishment) settle in tens to hundreds of milliseconds.
	pollInterval = 50 * time.Millisecond
	// SyncTimeout bounds each wait for the admission chain to catch up.
	SyncTimeout = 60 * time.Second
	// discoveryTimeout bounds each wait for a kind to show up in discovery.
	discoveryTimeout = 30 * time.Second
)

// poll runs cond immediately and then every pollInterval until it reports
// done, returns an error, or timeout (or ctx) runs out.
func poll(ctx context.Context, timeout time.Duration, cond wait.ConditionWithContextFunc) error {
	return wait.PollUntilContextTimeout(ctx, pollInterval, timeout, true, cond)
}

// transientRetryInterval spaces the retries of warm-up errors, which last
// seconds (up to the 30 s RESTMapper refresh), not milliseconds.
const transientRetryInterval = 250 * time.Millisecond
