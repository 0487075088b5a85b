package statuspatch

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

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
	// Optimistic writes only over the version of the object the status was computed
	// from: a stale copy is refused with a conflict, and the writer looks again.
	Optimistic bool
}

// Field managers of the hub's writers of a Cluster's status. The agent owns
// status.agent, written with a merge patch as its own manager.
var (
	// ClusterOwner is the Cluster controller: the Ready condition, the per-cluster
	// namespace, the summary of its BundleDeployments and the printed columns.
	ClusterOwner = Owner{Manager: "flotilla-cluster", Fields: []string{"namespace", "summary", "display"}, Conditions: []string{fleet.ConditionReady}}
	// ImportsOwner is the import controller: the Imported condition and what it
	// last deployed.
	ImportsOwner = Owner{Manager: "flotilla-imports", Fields: []string{"agentDeployedGeneration", "agentConfigHash"},
		Conditions: []string{fleet.ConditionImported}}
)

// Patch is the apply patch of o's part of status for object (namespace, name and
// UID: a write computed from a deleted object's copy does not land on one created
// again under its name; with resourceVersion when o is Optimistic) of the
// fleet.cattle.io kind. Every owned field is sent with its value, zero or empty
// included: apply removes a field only when the manager that sends it no longer
// does, so a value left by a writer from before the apply (a hub upgraded from merge
// patches) is replaced rather than kept beside an omitted zero.
func (o Owner) Patch(kind string, object metav1.Object, status any) ([]byte, error) {
	v := reflect.ValueOf(status)
	if v.Kind() != reflect.Struct {
		return nil, fmt.Errorf("encoding the status: %T is not a struct", status)
	}
	fields := jsonFields(v)
	owned := map[string]any{}
	for _, name := range o.Fields {
		f, ok := fields[name]
		if !ok {
			return nil, fmt.Errorf("encoding the status: %T has no field %q", status, name)
		}
		if f.Kind() == reflect.Pointer && f.IsNil() {
			continue
		}
		owned[name] = explicit(f)
	}
	if f, ok := fields["conditions"]; ok {
		conds, _ := f.Interface().([]fleet.Condition)
		var mine []any
		for _, c := range conds {
			if slices.Contains(o.Conditions, c.Type) {
				mine = append(mine, explicit(reflect.ValueOf(c)))
			}
		}
		if len(mine) > 0 {
			owned["conditions"] = mine
		}
	}
	meta := map[string]string{"namespace": object.GetNamespace(), "name": object.GetName()}
	if uid := object.GetUID(); uid != "" {
		meta["uid"] = string(uid)
	}
	if o.Optimistic {
		meta["resourceVersion"] = object.GetResourceVersion()
	}
	return json.Marshal(map[string]any{
		"apiVersion": fleet.SchemeGroupVersion.String(),
		"kind":       kind,
		"metadata":   meta,
		"status":     owned,
	})
}

// jsonFields are the fields of struct v by their JSON names.
func jsonFields(v reflect.Value) map[string]reflect.Value {
	out := map[string]reflect.Value{}
	t := v.Type()
	for i := range t.NumField() {
		if !t.Field(i).IsExported() {
			continue
		}
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = t.Field(i).Name
		}
		out[name] = v.Field(i)
	}
	return out
}

// explicit is v for JSON with every field of every struct in it present, omitempty
// or not; a type that encodes itself (a time) encodes as it does.
func explicit(v reflect.Value) any {
	if _, ok := v.Interface().(json.Marshaler); ok {
		return v.Interface()
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return nil
		}
		return explicit(v.Elem())
	case reflect.Struct:
		out := map[string]any{}
		for name, f := range jsonFields(v) {
			if f.Kind() == reflect.Pointer && f.IsNil() {
				continue // an apply cannot say "unset" but by leaving a field out
			}
			out[name] = explicit(f)
		}
		return out
	case reflect.Slice:
		out := []any{}
		for i := range v.Len() {
			out = append(out, explicit(v.Index(i)))
		}
		return out
	default:
		return v.Interface()
	}
}

// ApplyCluster writes o's part of status to cluster's status.
func (o Owner) ApplyCluster(ctx context.Context, clusters fleetclient.ClustersGetter, cluster *fleet.Cluster, status fleet.ClusterStatus) (*fleet.Cluster, error) {
	patch, err := o.Patch("Cluster", cluster, status)
	if err != nil {
		return nil, err
	}
	force := true
	return clusters.Clusters(cluster.Namespace).Patch(ctx, cluster.Name, types.ApplyPatchType, patch,
		metav1.PatchOptions{FieldManager: o.Manager, Force: &force}, "status")
}
