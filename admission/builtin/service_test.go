package builtin

import (
	"errors"
	"testing"

	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"
)

func TestNodePortsLowestFirst(t *testing.T) {
	p := newNodePorts()
	for _, want := range []int{30000, 30001} {
		got, err := p.AllocateNext()
		if err != nil || got != want {
			t.Fatalf("AllocateNext() = %d, %v; want %d", got, err, want)
		}
	}
	if err := p.Allocate(30001); !errors.Is(err, portallocator.ErrAllocated) {
		t.Errorf("allocating a taken port: %v, want ErrAllocated", err)
	}
	var notInRange *portallocator.ErrNotInRange
	if err := p.Allocate(80); !errors.As(err, &notInRange) {
		t.Errorf("allocating port 80: %v, want ErrNotInRange", err)
	}
	if err := p.Allocate(32767); err != nil {
		t.Errorf("allocating the last port: %v", err)
	}
	if err := p.Release(30000); err != nil || p.Has(30000) {
		t.Errorf("released port still held (err %v)", err)
	}
	if got, _ := p.AllocateNext(); got != 30000 {
		t.Errorf("after release AllocateNext() = %d, want 30000", got)
	}
	full := newNodePorts()
	for port := firstNodePort; port <= lastNodePort; port++ {
		full.used[port] = true
	}
	if _, err := full.AllocateNext(); !errors.Is(err, portallocator.ErrFull) {
		t.Errorf("full range: %v, want ErrFull", err)
	}
}
