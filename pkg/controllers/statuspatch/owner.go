package statuspatch

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetclient "github.com/flotilla/flotilla/pkg/generated/clientset/versioned/typed/fleet.cattle.io/v1alpha1"
)

// Owner is one writer of a status that other writers share: a field manager, the
// status fields it owns and the condition types it owns. It writes them with
// server-side apply, so the API server merges its fields with everyone else's: a
// writer that computed from a stale copy can neither remove nor roll back a field or
// a condition it does not own (conditions are a list keyed by type,
// +listType=map). A field it owned and no longer sends is removed.
type Owner struct {
	// Manager is the field manager name, shown in managedFields.
	Manager string
	// Fields are the JSON names of the status fields it owns, other than conditions.
	Fields []string
	// Conditions are the condition types it owns.
	Conditions []string
}

// Field managers of the hub's writers of a Cluster's status. The agent owns
// status.agent, written with a merge patch as its own manager.
var (
	// ClusterOwner is the Cluster controller: the Ready condition, the per-cluster
	// namespace, the summary of its BundleDeployments and the printed columns.
	ClusterOwner = Owner{Manager: "flotilla-cluster", Fields: []string{"namespace", "summary", "display"}, Conditions: []string{fleet.ConditionReady}}
	// ImportsOwner is the import controller: the Imported condition and what it
	// last deployed.
	ImportsOwner = Owner{Manager: "flotilla-imports", Fields: []string{"agentDeployedGeneration", "agentConfigHash"}, Conditions: []string{fleet.ConditionImported}}
)

// Patch is the apply patch of o's part of status for the object kind namespace/name
// of the fleet.cattle.io API.
func (o Owner) Patch(kind, namespace, name string, status any) ([]byte, error) {
	raw, err := json.Marshal(status)
	if err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	var all map[string]json.RawMessage
	if err := json.Unmarshal(raw, &all); err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	owned := map[string]any{}
	for _, f := range o.Fields {
		if v, ok := all[f]; ok && string(v) != "null" {
			owned[f] = v
		}
	}
	var conds []fleet.Condition
	if c, ok := all["conditions"]; ok {
		if err := json.Unmarshal(c, &conds); err != nil {
			return nil, fmt.Errorf("encoding the status: %w", err)
		}
	}
	conds = slices.DeleteFunc(conds, func(c fleet.Condition) bool { return !slices.Contains(o.Conditions, c.Type) })
	if len(conds) > 0 {
		owned["conditions"] = conds
	}
	return json.Marshal(map[string]any{
		"apiVersion": fleet.SchemeGroupVersion.String(),
		"kind":       kind,
		"metadata":   map[string]string{"namespace": namespace, "name": name},
		"status":     owned,
	})
}

// ApplyCluster writes o's part of status to cluster's status.
func (o Owner) ApplyCluster(ctx context.Context, clusters fleetclient.ClustersGetter, cluster *fleet.Cluster, status fleet.ClusterStatus) (*fleet.Cluster, error) {
	patch, err := o.Patch("Cluster", cluster.Namespace, cluster.Name, status)
	if err != nil {
		return nil, err
	}
	force := true
	return clusters.Clusters(cluster.Namespace).Patch(ctx, cluster.Name, types.ApplyPatchType, patch,
		metav1.PatchOptions{FieldManager: o.Manager, Force: &force}, "status")
}
