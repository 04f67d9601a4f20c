package reconcile

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/truce-dev/truce/cluster"
)

// transientBackoff retries requests that failed because the API server was
// busy, restarting or unreachable: 5 tries over about 6 seconds. A pass
// that still fails reports the error and the Controller retries the pass
// on its own backoff.
var transientBackoff = wait.Backoff{Steps: 5, Duration: 200 * time.Millisecond, Factor: 2.5, Jitter: 0.1}

// transient reports errors worth retrying at once: the server unreachable
// or overloaded, and resourceVersion conflicts (another writer got in
// between; a server-side apply without a resourceVersion recomputes).
func transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	// A 404 without a Status body (a kind not served yet) also counts as
	// an unexpected server response; retrying cannot make it appear.
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		(apierrors.IsUnexpectedServerError(err) && !apierrors.IsNotFound(err)) ||
		(apierrors.IsConflict(err) && !isFieldConflict(err)) ||
		utilnet.IsConnectionRefused(err) || utilnet.IsConnectionReset(err) || utilnet.IsProbableEOF(err) ||
		utilnet.IsTimeout(err)
}

// isFieldConflict tells a server-side apply ownership conflict (which
// retrying cannot fix) from a resourceVersion conflict.
func isFieldConflict(err error) bool {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		return false
	}
	d := se.Status().Details
	if d == nil {
		return false
	}
	for _, c := range d.Causes {
		if c.Type == "FieldManagerConflict" {
			return true
		}
	}
	return false
}

// get reads ref; nil without error when it does not exist.
func (r *Reconciler) get(ctx context.Context, ref cluster.Ref) (*unstructured.Unstructured, error) {
	var live *unstructured.Unstructured
	err := retry.OnError(transientBackoff, transient, func() error {
		var err error
		live, err = r.cluster.Get(ctx, ref)
		return err
	})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return live, err
}

func (r *Reconciler) applyOptions(dryRun bool) cluster.ApplyOptions {
	return cluster.ApplyOptions{FieldManager: r.opts.FieldManager, Force: r.opts.Force, DryRun: dryRun}
}

// apply writes payload with server-side apply.
func (r *Reconciler) apply(ctx context.Context, p *pass, payload *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	var stored *unstructured.Unstructured
	err := retry.OnError(transientBackoff, transient, func() error {
		var err error
		stored, err = r.cluster.Apply(ctx, payload.DeepCopy(), r.applyOptions(false))
		return err
	})
	if err == nil {
		p.wrote()
	}
	return stored, err
}

// predict returns what applying payload over live stores: a server dry
// run, or the offline prediction.
func (r *Reconciler) predict(ctx context.Context, live, payload *unstructured.Unstructured) (*unstructured.Unstructured, error) {
	if r.opts.Drift == DriftOffline {
		stored, _, err := r.predictor.Predict(ctx, live, payload.DeepCopy(), r.applyOptions(true))
		return stored, err
	}
	var stored *unstructured.Unstructured
	err := retry.OnError(transientBackoff, transient, func() error {
		var err error
		stored, err = r.cluster.Apply(ctx, payload.DeepCopy(), r.applyOptions(true))
		return err
	})
	return stored, err
}

// remove deletes ref, tolerating that it is already gone.
func (r *Reconciler) delete(ctx context.Context, p *pass, ref cluster.Ref) error {
	err := retry.OnError(transientBackoff, transient, func() error {
		return r.cluster.Delete(ctx, ref, cluster.DeleteOptions{})
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err == nil {
		p.wrote()
	}
	return err
}

func isMetaNoMatch(err error) bool { return meta.IsNoMatchError(err) }
