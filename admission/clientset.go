package admission

import (
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/openapi"

	"github.com/truce-dev/truce/schema"
)

// clientset is the loopback client the admission plugins get. It is backed
// by the cluster state instead of the server's own storage.
type clientset struct {
	*fake.Clientset
	registry *schema.Registry
}

// Discovery serves the chain's OpenAPI documents, as the server's loopback
// client does. No plugin truce builds asks for them since the
// MutatingAdmissionPolicy dispatcher takes the registry's type converters
// directly (registryConverters); a plugin that does still gets the
// chain's documents instead of fake discovery's client without a server.
func (c *clientset) Discovery() discovery.DiscoveryInterfaces {
	return &discoveryClient{DiscoveryInterfaces: c.Clientset.Discovery(), registry: c.registry}
}

type discoveryClient struct {
	discovery.DiscoveryInterfaces
	registry *schema.Registry
}

func (d *discoveryClient) OpenAPIV3() openapi.Client { return d.registry.OpenAPIClient() }
