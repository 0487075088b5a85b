package target

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// A Bundle's targets are written by a bundle author, and a Cluster's labels partly by
// its agent: matching them never panics, whatever the selectors say, and a target
// selects only Clusters it names or whose labels its selector matches.
func FuzzTargets(f *testing.F) {
	f.Add("env", "In", "dev", "env", "dev", "c1", "", "g1")
	f.Add("env", "NotIn", "", "", "", "", "c1", "")
	f.Add("", "Exists", "x", "a/b", "!", "", "", "")
	f.Add("k", "Bogus", "v", "k", "v", "c", "c", "g")
	f.Fuzz(func(t *testing.T, key, operator, value, labelKey, labelValue, clusterName, targetName, group string) {
		selector := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: key, Operator: metav1.LabelSelectorOperator(operator), Values: []string{value}},
		}}
		bundle := &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "ws"},
			Spec: fleet.BundleSpec{
				Targets: []fleet.BundleTarget{
					{ClusterSelector: selector},
					{ClusterName: targetName},
					{ClusterGroup: group},
					{ClusterGroupSelector: selector},
				},
				TargetRestrictions: []fleet.BundleTargetRestriction{{ClusterSelector: selector}},
			},
		}
		cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: clusterName, Namespace: "ws", Labels: map[string]string{labelKey: labelValue}}}
		groups := []*fleet.ClusterGroup{{ObjectMeta: metav1.ObjectMeta{Name: group, Namespace: "ws", Labels: map[string]string{labelKey: labelValue}},
			Spec: fleet.ClusterGroupSpec{Selector: selector}}}
		targets, err := Clusters(bundle, []*fleet.Cluster{cluster}, groups)
		if err != nil {
			return
		}
		if len(targets) > 1 {
			t.Fatalf("%d targets for one Cluster", len(targets))
		}
		_, _ = InGroup(groups[0], cluster)
		_ = SelectsByName(bundle)
		_ = SelectsByLabels(bundle)
	})
}
