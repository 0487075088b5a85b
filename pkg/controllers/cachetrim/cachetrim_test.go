package cachetrim

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestObjectsLoseManagedFields(t *testing.T) {
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "agent"}}}}
	got, err := Transform(cluster)
	if err != nil || got != cluster || cluster.ManagedFields != nil || cluster.Name != "c" {
		t.Fatalf("Transform(cluster) = %v, %v; managedFields %v", got, err, cluster.ManagedFields)
	}
}

func TestOtherValuesPassThrough(t *testing.T) {
	if got, err := Transform("not an object"); err != nil || got != "not an object" {
		t.Fatalf("Transform(string) = %v, %v", got, err)
	}
}
