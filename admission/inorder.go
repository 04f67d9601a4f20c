package admission

import (
	"context"
	"fmt"
	"sync"
)

// maxBatch bounds the writes admitted together: the mirror holds at most
// maxPending commits before the informers must have them.
const maxBatch = maxPending / 2

// AdmitInOrder admits n writes as one client sending them one after the
// other to a server holding chain's state: each allowed write is committed
// before the next is admitted, and a write that reconfigures admission
// (a policy, a CRD...) is followed by a chain built again. request returns
// write i, given whether it is a CREATE or an UPDATE against the state it
// is admitted on.
//
// Consecutive writes that commute (objects admission reads of no other
// write: not namespaces, RBAC, configuration, params or Services; each
// object written once among them; no webhook or quota in the chain, whose
// answers may depend on what was called before) are admitted on up to
// workers goroutines, then committed in order: the results are those of
// admitting them one after the other.
//
// The returned chain is the one in use at the end (or at the error); the
// caller closes it.
func AdmitInOrder(ctx context.Context, chain *Chain, n int, request func(i int, op Operation) (Request, error), workers int) ([]*Result, *Chain, error) {
	results := make([]*Result, 0, n)
	for i := 0; i < n; {
		batch, err := chain.commuting(i, n, request)
		if err != nil {
			return nil, chain, err
		}
		if len(batch) < 2 || workers < 2 {
			req, err := chainRequest(chain, i, request)
			if err != nil {
				return nil, chain, err
			}
			res, err := chain.Admit(ctx, req)
			if err != nil {
				return nil, chain, fmt.Errorf("%s: %w", req.Source, err)
			}
			results = append(results, res)
			if chain, err = commitOne(ctx, chain, req, res); err != nil {
				return nil, chain, err
			}
			i++
			continue
		}
		admitted, err := chain.admitTogether(ctx, batch, workers)
		if err != nil {
			return nil, chain, err
		}
		for j, res := range admitted {
			results = append(results, res)
			if chain, err = commitOne(ctx, chain, batch[j], res); err != nil {
				return nil, chain, err
			}
		}
		i += len(batch)
	}
	return results, chain, nil
}

// chainRequest is write i with its operation against chain's state.
func chainRequest(chain *Chain, i int, request func(int, Operation) (Request, error)) (Request, error) {
	probe, err := request(i, "")
	if err != nil {
		return Request{}, err
	}
	if probe.Object == nil {
		return probe, nil
	}
	op, err := chain.Operation(probe.Object)
	if err != nil {
		return Request{}, fmt.Errorf("%s: %w", probe.Source, err)
	}
	return request(i, op)
}

// commitOne stores an admitted result and returns the chain to admit the
// next write with: chain, or one built again when the write reconfigured
// admission.
func commitOne(ctx context.Context, chain *Chain, req Request, res *Result) (*Chain, error) {
	reconfigure, err := chain.Commit(res)
	if err != nil {
		return chain, fmt.Errorf("%s: %w", req.Source, err)
	}
	if !reconfigure {
		return chain, nil
	}
	next, err := NewChain(ctx, chain.state, chain.opts)
	if err != nil {
		return chain, fmt.Errorf("%s: recompiling admission after this write: %w", req.Source, err)
	}
	chain.Close()
	return next, nil
}

// commuting returns the writes from i on (at most maxBatch) that commute
// with each other, with their operations; fewer than two when the next
// write must be admitted alone.
func (c *Chain) commuting(i, n int, request func(int, Operation) (Request, error)) ([]Request, error) {
	if c.memo.mode == memoOff {
		return nil, nil
	}
	seen := map[objectKey]bool{}
	var out []Request
	for ; i < n && len(out) < maxBatch; i++ {
		req, err := chainRequest(c, i, request)
		if err != nil {
			// Admitted alone, where the error is returned.
			break
		}
		if req.Object == nil || req.Object.GetName() == "" {
			break
		}
		gvk := req.Object.GroupVersionKind()
		resource, err := c.registry.ForKind(gvk)
		if err != nil || !c.inert(gvk) {
			break
		}
		k := objectKey{Group: gvk.Group, Kind: gvk.Kind, Namespace: objectNamespace(resource, req.Object.GetNamespace()), Name: req.Object.GetName()}
		if seen[k] {
			break
		}
		seen[k] = true
		out = append(out, req)
	}
	return out, nil
}

// admitTogether admits reqs, which commute, on up to workers goroutines;
// the results are in reqs' order.
func (c *Chain) admitTogether(ctx context.Context, reqs []Request, workers int) ([]*Result, error) {
	// The informers get the last commits before the workers start:
	// settling is not for concurrent callers.
	if err := c.mirror.settle(ctx); err != nil {
		return nil, err
	}
	results := make([]*Result, len(reqs))
	errs := make([]error, len(reqs))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(workers, len(reqs)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range next {
				results[j], errs[j] = c.Admit(ctx, reqs[j])
			}
		}()
	}
	for j := range reqs {
		next <- j
	}
	close(next)
	wg.Wait()
	for j, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", reqs[j].Source, err)
		}
	}
	return results, nil
}
