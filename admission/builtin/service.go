package builtin

import (
	"errors"
	"fmt"
	"net"

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

// NewServiceStore returns the upstream Service registry (pkg/registry/core/
// service/storage) with allocators for one IPv4 service range. Only its
// BeginCreate and BeginUpdate hooks are used, always in dry-run mode: they
// default the IP family fields and "allocate" what a server-side dry run
// returns — the range's network address as ClusterIP and node ports from
// 32769 up — without touching storage.
func NewServiceStore(serviceClusterIPRange string) (*genericregistry.Store, error) {
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
	rest, _, _, err := servicestorage.NewREST(opts, api.IPv4Protocol,
		map[api.IPFamily]ipallocator.Interface{api.IPv4Protocol: dryRunIPs{cidr: *cidr}}, noPorts{}, nil, nil, nil)
	if err != nil {
		return nil, fmt.Errorf("building the Service registry: %w", err)
	}
	return rest.Store, nil
}

// noStorage satisfies the store's construction; truce never reads or writes
// through it.
func noStorage(*storagebackend.ConfigForResource, string, func(runtime.Object) (string, error), func() runtime.Object,
	func() runtime.Object, storage.AttrFunc, storage.IndexerFuncs, *cache.Indexers) (storage.Interface, factory.DestroyFunc, error) {
	return nil, func() {}, nil
}

var errNotDryRun = errors.New("truce only performs dry-run allocations")

// dryRunIPs answers like ipallocator.Allocator in dry-run mode.
type dryRunIPs struct{ cidr net.IPNet }

func (a dryRunIPs) Allocate(ip net.IP) error {
	if !a.cidr.Contains(ip) {
		return &ipallocator.ErrNotInRange{IP: ip, ValidRange: a.cidr.String()}
	}
	return nil
}
func (a dryRunIPs) AllocateNext() (net.IP, error) { return a.cidr.IP, nil }
func (a dryRunIPs) Release(net.IP) error          { return nil }
func (a dryRunIPs) ForEach(func(net.IP))          {}
func (a dryRunIPs) CIDR() net.IPNet               { return a.cidr }
func (a dryRunIPs) IPFamily() api.IPFamily        { return api.IPv4Protocol }
func (a dryRunIPs) Has(net.IP) bool               { return false }
func (a dryRunIPs) Destroy()                      {}
func (a dryRunIPs) EnableMetrics()                {}
func (a dryRunIPs) DryRun() ipallocator.Interface { return a }

// noPorts is an empty node-port range; in dry-run mode the upstream
// operation picks ports itself and only asks whether one is taken.
type noPorts struct{}

func (noPorts) Allocate(int) error         { return errNotDryRun }
func (noPorts) AllocateNext() (int, error) { return 0, errNotDryRun }
func (noPorts) Release(int) error          { return nil }
func (noPorts) ForEach(func(int))          {}
func (noPorts) Has(int) bool               { return false }
func (noPorts) Destroy()                   {}
func (noPorts) EnableMetrics()             {}

var _ portallocator.Interface = noPorts{}
