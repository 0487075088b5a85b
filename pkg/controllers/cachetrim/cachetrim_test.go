package cachetrim

import (
	"strings"
	"testing"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// bundle decodes as an informer would: every Bundle has its own copy of every text.
func bundle(name string) *fleet.Bundle {
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "flotilla-hub"}}},
		Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{
			{Name: strings.Clone("templates/deployment.yaml"), Content: strings.Repeat("kind: Deployment\n", 100)},
			{Name: strings.Clone("values.yaml"), Content: strings.Clone("replicas: 1\n")},
		}},
	}
}

func TestBundlesShareTheirFilesAndLoseManagedFields(t *testing.T) {
	a, b := bundle("fleet-agent-a"), bundle("fleet-agent-b")
	if unsafe.StringData(a.Spec.Resources[0].Content) == unsafe.StringData(b.Spec.Resources[0].Content) {
		t.Fatal("test set-up: the two bundles already share their text")
	}
	for _, obj := range []*fleet.Bundle{a, b} {
		if _, err := Transform(obj); err != nil {
			t.Fatal(err)
		}
		if obj.ManagedFields != nil {
			t.Errorf("%s keeps its managedFields", obj.Name)
		}
	}
	for i := range a.Spec.Resources {
		ra, rb := a.Spec.Resources[i], b.Spec.Resources[i]
		if ra.Content != bundle("x").Spec.Resources[i].Content || ra.Name != bundle("x").Spec.Resources[i].Name {
			t.Errorf("resource %d changed: %q", i, ra.Name)
		}
		if unsafe.StringData(ra.Content) != unsafe.StringData(rb.Content) || unsafe.StringData(ra.Name) != unsafe.StringData(rb.Name) {
			t.Errorf("resource %s: the two bundles hold separate copies", ra.Name)
		}
	}
}

func TestOtherObjectsPassThrough(t *testing.T) {
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "agent"}}}}
	got, err := Transform(cluster)
	if err != nil || got != cluster || cluster.ManagedFields != nil || cluster.Name != "c" {
		t.Fatalf("Transform(cluster) = %v, %v; managedFields %v", got, err, cluster.ManagedFields)
	}
	if got, err := Transform("not an object"); err != nil || got != "not an object" {
		t.Fatalf("Transform(string) = %v, %v", got, err)
	}
}
