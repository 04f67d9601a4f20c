package builtin

import (
	"fmt"
	"net"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apiserver/pkg/registry/generic"
	genericregistry "k8s.io/apiserver/pkg/registry/generic/registry"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/storagebackend"
	"k8s.io/apiserver/pkg/storage/storagebackend/factory"
	"k8s.io/client-go/tools/cache"
	api "k8s.io/kubernetes/pkg/apis/core"
	"k8s.io/kubernetes/pkg/registry/core/service/ipallocator"
	"k8s.io/kubernetes/pkg/registry/core/service/portallocator"
	servicestorage "k8s.io/kubernetes/pkg/registry/core/service/storage"
)

// DefaultServiceClusterIPRange is kube-apiserver's --service-cluster-ip-range
// when the flag is not given.
const DefaultServiceClusterIPRange = "10.0.0.0/24"

// ServiceStore is the upstream Service registry (pkg/registry/core/
// service/storage) with allocators for one IPv4 service range. Only its
// BeginCreate and BeginUpdate hooks are used; a dry run "allocates" what a
// server-side dry run returns — the range's network address as ClusterIP
// and node ports from 32769 up — without touching storage.
//
// The cluster's existing Services were allocated by that cluster, whose
// range may be wider than this one (kubeadm's is 10.96.0.0/12) or may have
// changed since: their addresses are accepted while they are stored, and
// once Stored is called their addresses and node ports are taken, so a
// write that asks for one is refused as already allocated, as the server
// refuses it. A write's address outside the range is still refused.
type ServiceStore struct {
	*genericregistry.Store
	ips   *dryRunIPs
	ports *nodePorts
}

// NewServiceStore returns the Service registry for serviceClusterIPRange;
// existing are the cluster's objects, whose Services hold addresses.
func NewServiceStore(serviceClusterIPRange string, existing []*unstructured.Unstructured) (*ServiceStore, error) {
	_, cidr, err := net.ParseCIDR(serviceClusterIPRange)
	if err != nil {
		return nil, fmt.Errorf("service cluster IP range %q: %w", serviceClusterIPRange, err)
	}
	if cidr.IP.To4() == nil {
		return nil, fmt.Errorf("service cluster IP range %q: only IPv4 single-stack is modelled", serviceClusterIPRange)
	}
	opts := generic.RESTOptions{
		StorageConfig:  &storagebackend.ConfigForResource{GroupResource: schema.GroupResource{Resource: "services"}},
		Decorator:      noStorage,
		ResourcePrefix: "services",
	}
	ips, ports := newDryRunIPs(*cidr), newNodePorts()
	ips.existing, ports.existing = serviceAllocations(existing)
	rest, _, _, err := servicestorage.NewREST(opts, api.IPv4Protocol,
		map[api.IPFamily]ipallocator.Interface{api.IPv4Protocol: ips}, ports, nil, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("building the Service registry: %w", err)
	}
	return &ServiceStore{Store: rest.Store, ips: ips, ports: ports}, nil
}

// Stored says the existing Services are stored: from now on their
// addresses and node ports are allocated.
func (s *ServiceStore) Stored() {
	s.ips.stored()
	s.ports.stored()
}

// serviceAllocations are the cluster IPs and node ports the Services of
// objs hold.
func serviceAllocations(objs []*unstructured.Unstructured) (ips map[string]bool, ports []int) {
	ips = map[string]bool{}
	for _, o := range objs {
		if o.GetKind() != "Service" || o.GroupVersionKind().Group != "" {
			continue
		}
		addrs, _, _ := unstructured.NestedStringSlice(o.Object, "spec", "clusterIPs")
		if ip, _, _ := unstructured.NestedString(o.Object, "spec", "clusterIP"); ip != "" {
			addrs = append(addrs, ip)
		}
		for _, a := range addrs {
			if ip := net.ParseIP(a); ip != nil {
				ips[ip.String()] = true
			}
		}
		list, _, _ := unstructured.NestedSlice(o.Object, "spec", "ports")
		for _, p := range list {
			if m, ok := p.(map[string]any); ok {
				if n, ok, _ := unstructured.NestedInt64(m, "nodePort"); ok && n > 0 {
					ports = append(ports, int(n))
				}
			}
		}
		if n, ok, _ := unstructured.NestedInt64(o.Object, "spec", "healthCheckNodePort"); ok && n > 0 {
			ports = append(ports, int(n))
		}
	}
	return ips, ports
}

// noStorage satisfies the store's construction; truce never reads or writes
// through it.
func noStorage(*storagebackend.ConfigForResource, string, func(runtime.Object) (string, error), func() runtime.Object,
	func() runtime.Object, storage.AttrFunc, storage.IndexerFuncs, *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
	return nil, func() {}, nil
}

// dryRunIPs answers like ipallocator.Allocator in dry-run mode, except
// for the existing Services' addresses (ServiceStore).
type dryRunIPs struct {
	cidr net.IPNet

	mu sync.Mutex
	// existing are the existing Services' addresses; taken says they are
	// stored and so allocated.
	existing map[string]bool
	taken    bool
}

func newDryRunIPs(cidr net.IPNet) *dryRunIPs { return &dryRunIPs{cidr: cidr} }

func (a *dryRunIPs) stored() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.taken = true
}

func (a *dryRunIPs) Allocate(ip net.IP) error { return a.allocate(ip, true) }

// allocate refuses an address outside the range, and an existing
// Service's once stored when taken counts; the upstream allocator's dry
// run checks the range only (ipallocator allocateService), so a dry run
// may ask for an address another Service holds.
func (a *dryRunIPs) allocate(ip net.IP, taken bool) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.existing[ip.String()] {
		if taken && a.taken {
			return ipallocator.ErrAllocated
		}
		return nil
	}
	if !a.cidr.Contains(ip) {
		return &ipallocator.ErrNotInRange{IP: ip, ValidRange: a.cidr.String()}
	}
	return nil
}
func (a *dryRunIPs) AllocateNext() (net.IP, error) { return a.cidr.IP, nil }
func (a *dryRunIPs) Release(net.IP) error          { return nil }
func (a *dryRunIPs) ForEach(func(net.IP))          {}
func (a *dryRunIPs) CIDR() net.IPNet               { return a.cidr }
func (a *dryRunIPs) IPFamily() api.IPFamily        { return api.IPv4Protocol }
func (a *dryRunIPs) Has(ip net.IP) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.taken && a.existing[ip.String()]
}
func (a *dryRunIPs) Destroy()                      {}
func (a *dryRunIPs) EnableMetrics()                {}
func (a *dryRunIPs) DryRun() ipallocator.Interface { return dryRunView{a} }

// dryRunView is the allocator a dry run gets: it checks the range only.
type dryRunView struct{ *dryRunIPs }

func (v dryRunView) Allocate(ip net.IP) error      { return v.allocate(ip, false) }
func (v dryRunView) DryRun() ipallocator.Interface { return v }

// nodePorts is kube-apiserver's default --service-node-port-range
// (30000-32767) for the in-process cluster's own writes, which are not dry
// runs: a Service of type NodePort or LoadBalancer gets a port, as on a
// real server. Ports are handed out lowest first rather than at random,
// so that reports are the same on every run; a dry run never asks (the
// upstream operation makes up a port above 32768 and only asks Has).
type nodePorts struct {
	mu   sync.Mutex
	used map[int]bool
	// existing are the existing Services' node ports, used once they are
	// stored: a dry run only asks Has, so storing them must not find them
	// taken.
	existing []int
}

const firstNodePort, lastNodePort = 30000, 32767

func newNodePorts() *nodePorts { return &nodePorts{used: map[int]bool{}} }

func (p *nodePorts) stored() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, port := range p.existing {
		p.used[port] = true
	}
}

func (p *nodePorts) Allocate(port int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if port < firstNodePort || port > lastNodePort {
		return &portallocator.ErrNotInRange{ValidPorts: fmt.Sprintf("%d-%d", firstNodePort, lastNodePort)}
	}
	if p.used[port] {
		return portallocator.ErrAllocated
	}
	p.used[port] = true
	return nil
}

func (p *nodePorts) AllocateNext() (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for port := firstNodePort; port <= lastNodePort; port++ {
		if !p.used[port] {
			p.used[port] = true
			return port, nil
		}
	}
	return 0, portallocator.ErrFull
}

func (p *nodePorts) Release(port int) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.used, port)
	return nil
}

func (p *nodePorts) ForEach(f func(int)) {
	p.mu.Lock()
	ports := make([]int, 0, len(p.used))
	for port := range p.used {
		ports = append(ports, port)
	}
	p.mu.Unlock()
	for _, port := range ports {
		f(port)
	}
}

func (p *nodePorts) Has(port int) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.used[port]
}

func (p *nodePorts) Destroy()       {}
func (p *nodePorts) EnableMetrics() {}

var _ portallocator.Interface = (*nodePorts)(nil)
