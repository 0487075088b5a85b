package bundle

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/target"
)

func TestDesiredLabels(t *testing.T) {
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: "clusters", UID: types.UID("uid-prod")}}
	agentBundle := func(mutate func(*fleet.Bundle)) *fleet.Bundle {
		b := &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{
				Name: names.AgentBundle("prod"), Namespace: "clusters",
				Labels:          map[string]string{names.AgentBundleLabel: "prod", names.ManagedLabel: "true", "team": "a"},
				OwnerReferences: []metav1.OwnerReference{{Kind: "Cluster", Name: "prod", UID: "uid-prod"}},
			},
			Spec: fleet.BundleSpec{Targets: []fleet.BundleTarget{{ClusterName: "prod"}}},
		}
		if mutate != nil {
			mutate(b)
		}
		return b
	}
	for _, tc := range []struct {
		name  string
		b     *fleet.Bundle
		agent bool
	}{
		{"the hub's agent bundle", agentBundle(nil), true},
		{"a Bundle labelled as the agent bundle", agentBundle(func(b *fleet.Bundle) { b.Name = "evil"; b.OwnerReferences = nil }), false},
		{"with the agent bundle's name but no owner", agentBundle(func(b *fleet.Bundle) { b.OwnerReferences = nil }), false},
		{"owned by another Cluster of that name", agentBundle(func(b *fleet.Bundle) { b.OwnerReferences[0].UID = "uid-old" }), false},
		{"targeting more than the cluster", agentBundle(func(b *fleet.Bundle) {
			b.Spec.Targets = append(b.Spec.Targets, fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{}})
		}), false},
		{"labelled for another cluster", agentBundle(func(b *fleet.Bundle) { b.Labels[names.AgentBundleLabel] = "dev" }), false},
		{"a Bundle with reserved labels", agentBundle(func(b *fleet.Bundle) {
			b.Name, b.OwnerReferences = "app", nil
			b.Labels[names.BundleNameLabel] = "other"
			b.Labels["x.fleet.cattle.io/y"] = "z"
			b.Labels["management.cattle.io/cluster"] = "c"
		}), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bd, err := desired(tc.b, target.Target{Cluster: cluster}, "s-content")
			if err != nil {
				t.Fatal(err)
			}
			if got := bd.Labels[names.AgentBundleLabel] == "prod"; got != tc.agent {
				t.Fatalf("agent bundle label %q, want agent=%v", bd.Labels[names.AgentBundleLabel], tc.agent)
			}
			if bd.Labels["team"] != "a" {
				t.Errorf("the Bundle's own label team=a was not copied: %v", bd.Labels)
			}
			if bd.Labels[names.BundleNameLabel] != tc.b.Name || bd.Labels["x.fleet.cattle.io/y"] != "" || bd.Labels["management.cattle.io/cluster"] != "" {
				t.Errorf("reserved labels copied from the Bundle: %v", bd.Labels)
			}
		})
	}
}

// What a Bundle's resources measured holds for the same object at the same
// generation only.
func TestMeasurementHoldsForItsGeneration(t *testing.T) {
	m := measurement{uid: "u1", generation: 3}
	for _, tc := range []struct {
		name       string
		uid        types.UID
		generation int64
		holds      bool
	}{
		{"the same generation", "u1", 3, true},
		{"a newer generation", "u1", 4, false},
		{"a Bundle of the same name made again", "u2", 3, false},
		{"no generation (not from an API server)", "u1", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{UID: tc.uid, Generation: tc.generation}}
			if got := m.holdsFor(b); got != tc.holds {
				t.Fatalf("holdsFor = %v, want %v", got, tc.holds)
			}
		})
	}
}
