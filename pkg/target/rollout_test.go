package target

import (
	"fmt"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// cluster states in the rollout tests: what a cluster's BundleDeployment holds.
const (
	none     = iota // no BundleDeployment yet
	readyOld        // the old version, applied and ready
	appliedNew
	readyNew
	failedOld // the old version, not ready
)

type member struct {
	name   string
	labels map[string]string
	state  int
	paused bool
}

func stagedOf(members ...member) []Staged {
	out := make([]Staged, len(members))
	for i, m := range members {
		bd := &fleet.BundleDeployment{}
		switch m.state {
		case none:
			bd = nil
		case readyOld:
			bd.Spec.DeploymentID, bd.Status.AppliedDeploymentID, bd.Status.Ready = "old", "old", true
		case failedOld:
			bd.Spec.DeploymentID, bd.Status.AppliedDeploymentID = "old", "old"
		case appliedNew:
			bd.Spec.DeploymentID, bd.Status.AppliedDeploymentID = "new", "new"
		case readyNew:
			bd.Spec.DeploymentID, bd.Status.AppliedDeploymentID, bd.Status.Ready = "new", "new", true
		}
		if bd != nil {
			bd.Spec.StagedDeploymentID = bd.Spec.DeploymentID
		}
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: m.name, Namespace: "ws", Labels: m.labels}}
		out[i] = Staged{Target: Target{Cluster: c}, DeploymentID: "new", Deployment: bd, Paused: m.paused}
	}
	return out
}

func released(p Plan, staged []Staged) string {
	var names []string
	for i, d := range p.Decisions {
		if d.Release {
			names = append(names, staged[i].Cluster.Name)
		}
	}
	return strings.Join(names, ",")
}

func intOrString(s string) *intstr.IntOrString {
	v := intstr.Parse(s)
	return &v
}

func TestRollout(t *testing.T) {
	stage := func(v string) map[string]string { return map[string]string{"stage": v} }
	canaryFirst := &fleet.RolloutStrategy{
		MaxUnavailable: intOrString("1"),
		Partitions: []fleet.Partition{
			{Name: "canary", ClusterSelector: &metav1.LabelSelector{MatchLabels: stage("canary")}},
			{Name: "prod", ClusterSelector: &metav1.LabelSelector{MatchLabels: stage("prod")}},
		},
	}
	for _, tc := range []struct {
		name      string
		strategy  *fleet.RolloutStrategy
		members   []member
		released  string
		created   int
		waiting   []string
		done      bool
		partition []string // "name count/unavailable/max"
	}{{
		name:     "no strategy: every cluster at once",
		members:  []member{{name: "a", state: readyOld}, {name: "b", state: readyOld}, {name: "c", state: readyOld}},
		released: "a,b,c", done: true,
		partition: []string{"All 3/3/3"},
	}, {
		name:     "maxUnavailable 1: the first cluster only",
		strategy: &fleet.RolloutStrategy{MaxUnavailable: intOrString("1")},
		members:  []member{{name: "c", state: readyOld}, {name: "a", state: readyOld}, {name: "b", state: readyOld}},
		released: "a",
		waiting:  []string{"2 clusters wait: 1 of 3 clusters unavailable, maxUnavailable 1"},
	}, {
		name:     "maxUnavailable 1: stops while the first is applied but not ready",
		strategy: &fleet.RolloutStrategy{MaxUnavailable: intOrString("1")},
		members:  []member{{name: "a", state: appliedNew}, {name: "b", state: readyOld}, {name: "c", state: readyOld}},
		released: "",
		waiting:  []string{"2 clusters wait: 1 of 3 clusters unavailable"},
	}, {
		name:     "maxUnavailable 1: goes on once the first is ready",
		strategy: &fleet.RolloutStrategy{MaxUnavailable: intOrString("1")},
		members:  []member{{name: "a", state: readyNew}, {name: "b", state: readyOld}, {name: "c", state: readyOld}},
		released: "b",
		waiting:  []string{"1 cluster wait"},
	}, {
		name: "a partition's limit counts the clusters it has unavailable already",
		strategy: &fleet.RolloutStrategy{Partitions: []fleet.Partition{
			{Name: "canary", MaxUnavailable: intOrString("1"), ClusterSelector: &metav1.LabelSelector{MatchLabels: stage("canary")}},
		}},
		members: []member{{name: "a", labels: stage("canary"), state: appliedNew}, {name: "b", labels: stage("canary"), state: readyOld},
			{name: "c", labels: stage("canary"), state: readyOld}},
		released: "",
		waiting:  []string{"2 clusters of partition canary wait: 3 of its 3 clusters unavailable, maxUnavailable 1"},
	}, {
		name:     "a cluster that is unavailable anyway gets the change at once",
		strategy: &fleet.RolloutStrategy{MaxUnavailable: intOrString("1")},
		members:  []member{{name: "a", state: appliedNew}, {name: "b", state: failedOld}, {name: "c", state: readyOld}},
		released: "b",
	}, {
		name:     "maxUnavailable 0% still lets one cluster through",
		strategy: &fleet.RolloutStrategy{MaxUnavailable: intOrString("0%")},
		members:  []member{{name: "a", state: readyOld}, {name: "b", state: readyOld}},
		released: "a",
	}, {
		name:     "partitions by label go in their order, not the clusters'",
		strategy: canaryFirst,
		members: []member{{name: "a", labels: stage("prod"), state: readyOld}, {name: "b", labels: stage("prod"), state: readyOld},
			{name: "z", labels: stage("canary"), state: readyOld}},
		released:  "z",
		partition: []string{"canary 1/1/1", "prod 2/2/1"},
		waiting:   []string{"2 clusters wait: 1 of 3 clusters unavailable, maxUnavailable 1"},
	}, {
		name:     "the next partition starts once the canary is ready",
		strategy: canaryFirst,
		members: []member{{name: "a", labels: stage("prod"), state: readyOld}, {name: "b", labels: stage("prod"), state: readyOld},
			{name: "z", labels: stage("canary"), state: readyNew}},
		released: "a",
	}, {
		name: "an unavailable partition holds the partitions after it",
		strategy: &fleet.RolloutStrategy{Partitions: []fleet.Partition{
			{Name: "first", MaxUnavailable: intOrString("1"), ClusterSelector: &metav1.LabelSelector{MatchLabels: stage("one")}},
			{Name: "second", ClusterSelector: &metav1.LabelSelector{MatchLabels: stage("two")}},
		}},
		members: []member{{name: "a", labels: stage("one"), state: readyOld}, {name: "b", labels: stage("one"), state: readyOld},
			{name: "c", labels: stage("two"), state: readyOld}},
		released:  "a",
		partition: []string{"first 2/2/1", "second 1/1/1"},
		waiting: []string{"1 cluster of partition first wait: 2 of its 2 clusters unavailable, maxUnavailable 1",
			"partitions second wait (1 cluster): unavailable partitions first 2/2, maxUnavailablePartitions 0"},
	}, {
		name: "clusters no partition selects come last",
		strategy: &fleet.RolloutStrategy{MaxUnavailable: intOrString("1"), Partitions: []fleet.Partition{
			{Name: "canary", ClusterName: "z"},
		}},
		members:   []member{{name: "a", state: readyOld}, {name: "z", state: readyOld}},
		released:  "z",
		partition: []string{"canary 1/1/1", "Unmatched 1/1/1"},
	}, {
		name:     "paused clusters keep what they have",
		members:  []member{{name: "a", state: readyOld, paused: true}, {name: "b", state: readyOld}},
		released: "b",
		waiting:  []string{"1 cluster paused"},
	}, {
		name:     "new clusters get a BundleDeployment with the change",
		strategy: &fleet.RolloutStrategy{MaxUnavailable: intOrString("1")},
		members:  []member{{name: "a", state: none}, {name: "b", state: none}},
		released: "a,b", created: 2, done: true,
	}, {
		name:     "maxNew bounds the BundleDeployments made in one pass",
		strategy: &fleet.RolloutStrategy{MaxNew: ptr(1)},
		members:  []member{{name: "a", state: none}, {name: "b", state: none}, {name: "c", state: none}},
		released: "a", created: 1,
		waiting: []string{"2 clusters wait for a BundleDeployment: maxNew is reached"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			staged := stagedOf(tc.members...)
			plan, err := Rollout(tc.strategy, nil, staged)
			if err != nil {
				t.Fatal(err)
			}
			if got := released(plan, staged); got != tc.released {
				t.Errorf("released %q, want %q", got, tc.released)
			}
			if plan.NewlyCreated != tc.created {
				t.Errorf("created %d, want %d", plan.NewlyCreated, tc.created)
			}
			if plan.Done() != tc.done {
				t.Errorf("done %v, want %v (waiting %q)", plan.Done(), tc.done, plan.Waiting)
			}
			for _, w := range tc.waiting {
				if !strings.Contains(plan.Waiting, w) {
					t.Errorf("waiting %q lacks %q", plan.Waiting, w)
				}
			}
			if tc.done && plan.Waiting != "" {
				t.Errorf("done, but waiting %q", plan.Waiting)
			}
			if tc.partition != nil {
				var got []string
				for _, p := range plan.Partitions {
					got = append(got, fmt.Sprintf("%s %d/%d/%d", p.Name, p.Count, p.Unavailable, p.MaxUnavailable))
				}
				if strings.Join(got, ";") != strings.Join(tc.partition, ";") {
					t.Errorf("partitions %q, want %q", got, tc.partition)
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

func TestRolloutPartitionsAutomatically(t *testing.T) {
	var members []member
	for i := range 400 {
		members = append(members, member{name: fmt.Sprintf("c%03d", i), state: readyOld})
	}
	for _, tc := range []struct {
		name     string
		strategy *fleet.RolloutStrategy
		want     []string
	}{
		{"25% of 400 from 200 on", nil, []string{"Partition 0 - 100", "Partition 100 - 200", "Partition 200 - 300", "Partition 300 - 400"}},
		{"a size of 0 turns it off", &fleet.RolloutStrategy{AutoPartitionSize: intOrString("0")}, []string{"All"}},
		{"so does \"0\", and a negative count", &fleet.RolloutStrategy{AutoPartitionSize: &intstr.IntOrString{Type: intstr.String, StrVal: "-3"}}, []string{"All"}},
		{"and the string \"0\"", &fleet.RolloutStrategy{AutoPartitionSize: &intstr.IntOrString{Type: intstr.String, StrVal: "0"}}, []string{"All"}},
		{"a higher threshold", &fleet.RolloutStrategy{AutoPartitionThreshold: ptr(500)}, []string{"All"}},
		{"a size by count", &fleet.RolloutStrategy{AutoPartitionSize: intOrString("150")}, []string{"Partition 0 - 150", "Partition 150 - 300", "Partition 300 - 400"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := Rollout(tc.strategy, nil, stagedOf(members...))
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, p := range plan.Partitions {
				got = append(got, p.Name)
			}
			if strings.Join(got, ";") != strings.Join(tc.want, ";") {
				t.Errorf("partitions %q, want %q", got, tc.want)
			}
			if !plan.Done() {
				t.Errorf("the defaults hold nothing back, but %q", plan.Waiting)
			}
		})
	}
}

func TestRolloutRefusesBadLimits(t *testing.T) {
	for _, tc := range []struct {
		name     string
		strategy *fleet.RolloutStrategy
		want     string
	}{
		{"maxUnavailable", &fleet.RolloutStrategy{MaxUnavailable: intOrString("half")}, `maxUnavailable: "half"`},
		{"partition", &fleet.RolloutStrategy{Partitions: []fleet.Partition{{Name: "p", ClusterName: "a", MaxUnavailable: intOrString("1/2")}}}, `partitions[p].maxUnavailable: "1/2"`},
		{"selector", &fleet.RolloutStrategy{Partitions: []fleet.Partition{{Name: "p", ClusterSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Sideways"}}}}}}, "partitions[p]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Rollout(tc.strategy, nil, stagedOf(member{name: "a", state: readyOld}))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}

func TestLimit(t *testing.T) {
	for _, tc := range []struct {
		count int
		value *intstr.IntOrString
		want  int
	}{
		{10, nil, 10},
		{10, intOrString("3"), 3},
		{10, intOrString("30"), 10},
		{10, &intstr.IntOrString{Type: intstr.Int, IntVal: -2}, 0},
		{10, intOrString("25%"), 2},
		{10, intOrString("0%"), 1},
		{10, intOrString("150%"), 10},
		{0, intOrString("5"), 1},
	} {
		t.Run(fmt.Sprintf("%d of %v", tc.count, tc.value), func(t *testing.T) {
			got, err := limit(tc.count, "f", tc.value)
			if err != nil || got != tc.want {
				t.Fatalf("limit = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
}
