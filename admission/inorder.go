package admission

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// maxBatch bounds the writes admitted together: the mirror holds at most
// maxPending commits before the informers must have them.
const maxBatch = maxPending / 2

// A Write is one write of AdmitInOrder.
type Write struct {
	// Source names the write in errors.
	Source string
	// Object is what the write stores: its kind, namespace and name decide
	// whether it commutes with its neighbours.
	Object *unstructured.Unstructured
	// Admit sends the write's request through chain (a verb of
	// admission/kubectl, which builds it as kubectl would) and returns
	// the answer; it stores nothing. It may run on several goroutines at
	// once, for writes of different objects.
	Admit func(ctx context.Context, chain *Chain) (*Result, error)
}

// AdmitInOrder admits writes as one client sending them one after the
// other to a server holding chain's state: each allowed write is committed
// before the next is admitted, and a write that reconfigures admission
// (a policy, a CRD...) is followed by a chain built again.
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
func AdmitInOrder(ctx context.Context, chain *Chain, writes []Write, workers int) ([]*Result, *Chain, error) {
	results := make([]*Result, 0, len(writes))
	for i := 0; i < len(writes); {
		batch := chain.commuting(writes[i:])
		if len(batch) < 2 || workers < 2 {
			batch = writes[i : i+1]
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

// commitOne stores an admitted result and returns the chain to admit the
// next write with: chain, or one built again when the write reconfigured
// admission.
func commitOne(ctx context.Context, chain *Chain, req Write, res *Result) (*Chain, error) {
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

// commuting returns the writes from the start of writes (at most
// maxBatch) that commute with each other; fewer than two when the first
// must be admitted alone.
func (c *Chain) commuting(writes []Write) []Write {
	if c.memo.mode == memoOff {
		return nil
	}
	seen := map[objectKey]bool{}
	n := 0
	for _, w := range writes[:min(len(writes), maxBatch)] {
		if w.Object == nil || w.Object.GetName() == "" {
			break
		}
		gvk := w.Object.GroupVersionKind()
		resource, err := c.registry.ForKind(gvk)
		if err != nil || !c.inert(gvk) {
			break
		}
		k := objectKey{Group: gvk.Group, Kind: gvk.Kind, Namespace: objectNamespace(resource, w.Object.GetNamespace()), Name: w.Object.GetName()}
		if seen[k] {
			break
		}
		seen[k] = true
		n++
	}
	return writes[:n]
}

// admitTogether admits writes, which commute, on up to workers
// goroutines; the results are in writes' order.
func (c *Chain) admitTogether(ctx context.Context, writes []Write, workers int) ([]*Result, error) {
	results := make([]*Result, len(writes))
	errs := make([]error, len(writes))
	if len(writes) == 1 {
		results[0], errs[0] = writes[0].Admit(ctx, c)
	} else {
		next := make(chan int)
		var wg sync.WaitGroup
		for range min(workers, len(writes)) {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := range next {
					results[j], errs[j] = writes[j].Admit(ctx, c)
				}
			}()
		}
		for j := range writes {
			next <- j
		}
		close(next)
		wg.Wait()
	}
	for j, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", writes[j].Source, err)
		}
	}
	return results, nil
}
