// Package names is the one place where Flotilla builds the names of namespaces,
// objects, labels and annotations, so no derived name is formatted twice.
package names

const (
	// SystemNamespace holds the hub itself (its leader Lease) on the hub cluster, and
	// the agent on a downstream cluster.
	SystemNamespace = "cattle-fleet-system"
	// RegistrationNamespace holds the credential Secrets agents pick up.
	RegistrationNamespace = "cattle-fleet-clusters-system"
	// HubLease is the Lease the hub replicas compete for.
	HubLease = "flotilla-hub"

	// ManagedLabel marks objects the hub created and owns.
	ManagedLabel = "fleet.cattle.io/managed"
)
