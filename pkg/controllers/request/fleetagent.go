package request

import (
	"fmt"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// judgeUnkeyed decides whether a registration without a key (Fleet's agent) may
// register into cluster as far as keys go: never into a Cluster bound to an agent's
// key, unless with a token bound to the Cluster. Knowing a token and a clientID is
// all Fleet's agent can show, and that must not be enough to take a cluster's place.
func judgeUnkeyed(cluster *fleet.Cluster, boundToken bool) error {
	if recordOf(cluster).Fingerprint == "" || boundToken {
		return nil
	}
	return &refusal{reason: "KeyRequired", cluster: cluster, message: fmt.Sprintf(
		"Cluster %s/%s is bound to the key of its agent, and Fleet's agent has no key to prove it. "+
			"If this is the same cluster, allow it: create a ClusterRegistrationToken with a short ttl in namespace %s with label %s=%s "+
			"and install the agent with that token's values.yaml (or install Flotilla's agent, which keeps its key)",
		cluster.Namespace, cluster.Name, cluster.Namespace, names.ClusterLabel, cluster.Name)}
}
