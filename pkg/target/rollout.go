package target

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/intstr"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlestate"
)

// Rollout defaults, as Fleet has them, except MaxNew (see Staged).
var (
	defaultMaxUnavailable           = intstr.FromString("100%")
	defaultAutoPartitionSize        = intstr.FromString("25%")
	defaultMaxUnavailablePartitions = intstr.FromInt32(0)
)

// DefaultAutoPartitionThreshold is how many clusters a Bundle must target before
// they are partitioned automatically.
const DefaultAutoPartitionThreshold = 200

// Staged is one cluster of a Bundle's rollout: what the Bundle asks for it now, and
// the BundleDeployment it has.
type Staged struct {
	Target
	// DeploymentID is what the Bundle asks for now.
	DeploymentID string
	// Deployment is the cluster's BundleDeployment as it stands; nil when it has none.
	Deployment *fleet.BundleDeployment
	// Paused clusters (the Bundle's or the Cluster's spec.paused) keep what they have.
	Paused bool
}

// Decision is what one pass of the rollout does for one cluster.
type Decision struct {
	// Create: the cluster has no BundleDeployment, and gets one now.
	Create bool
	// Release: the cluster's BundleDeployment gets the change now (its deploymentID
	// and options become the staged ones); otherwise it keeps what it has and only
	// learns what is staged.
	Release bool
}

// Plan is one pass of a Bundle's rollout.
type Plan struct {
	// Decisions are by position in the Staged list given.
	Decisions []Decision
	// Status fields of the Bundle: newlyCreated, unavailable, unavailablePartitions,
	// maxUnavailable, maxUnavailablePartitions and partitions.
	NewlyCreated             int
	Unavailable              int
	UnavailablePartitions    int
	MaxUnavailable           int
	MaxUnavailablePartitions int
	Partitions               []fleet.PartitionStatus
	// Released counts the clusters whose BundleDeployment holds the change after this
	// pass (released now or before); Targets counts them all.
	Released, Targets int
	// Paused counts the clusters held because they are paused.
	Paused int
	// NotCreated counts the clusters that maxNew left without a BundleDeployment.
	NotCreated int
	// Waiting says why the other clusters do not get the change yet, for a human;
	// empty when every cluster has it.
	Waiting string
}

// Done says whether every cluster has the change.
func (p Plan) Done() bool { return p.Released == p.Targets }

// partition is a rollout partition: its status and its clusters (positions in the
// Staged list).
type partition struct {
	status  fleet.PartitionStatus
	members []int
}

// Rollout decides one pass of a Bundle's rollout, as Fleet does: clusters are put in
// partitions (those the strategy defines, in order, a cluster joining the first that
// matches; the others, and all of them when none is defined, in automatic partitions
// of autoPartitionSize once there are autoPartitionThreshold clusters), and taken
// partition by partition. A cluster gets the change while fewer than maxUnavailable
// clusters of the Bundle, and fewer than its partition's maxUnavailable, are
// unavailable (a cluster that is unavailable already gets it at once); getting it
// makes a cluster unavailable until its agent reports it applied and ready. A
// partition with more clusters unavailable or not yet up to date than its
// maxUnavailable is unavailable, and once more than maxUnavailablePartitions are, the
// partitions after it wait. Paused clusters keep what they have. groups are the
// ClusterGroups of the Bundle's namespace, for partitions that select by group.
func Rollout(strategy *fleet.RolloutStrategy, groups []*fleet.ClusterGroup, staged []Staged) (Plan, error) {
	var rs fleet.RolloutStrategy
	if strategy != nil {
		rs = *strategy
	}
	plan := Plan{Decisions: make([]Decision, len(staged)), Targets: len(staged)}
	parts, err := partitions(rs, groups, staged)
	if err != nil {
		return plan, err
	}
	if plan.MaxUnavailable, err = limit(len(staged), "rolloutStrategy.maxUnavailable", rs.MaxUnavailable, &defaultMaxUnavailable); err != nil {
		return plan, err
	}
	if plan.MaxUnavailablePartitions, err = limit(len(parts), "rolloutStrategy.maxUnavailablePartitions", rs.MaxUnavailablePartitions, &defaultMaxUnavailablePartitions); err != nil {
		return plan, err
	}
	maxNew := math.MaxInt
	if rs.MaxNew != nil && *rs.MaxNew > 0 {
		maxNew = *rs.MaxNew
	}

	// views are the BundleDeployments as this pass leaves them.
	views := make([]*fleet.BundleDeployment, len(staged))
	for i, s := range staged {
		if s.Deployment != nil {
			views[i] = &fleet.BundleDeployment{Spec: s.Deployment.Spec, Status: s.Deployment.Status}
			if unavailable(views[i]) {
				plan.Unavailable++
			}
		}
	}
	for pi := range parts {
		// Each partition starts with its clusters that are unavailable already.
		for _, i := range parts[pi].members {
			if unavailable(views[i]) {
				parts[pi].status.Unavailable++
			}
		}
	}
	why := waits{partition: map[string]int{}}
	stoppedAfter := -1
	for pi := range parts {
		p := &parts[pi]
		for _, i := range p.members {
			if views[i] == nil && plan.NewlyCreated < maxNew {
				plan.NewlyCreated++
				plan.Decisions[i].Create = true
				views[i] = &fleet.BundleDeployment{}
			}
			if views[i] != nil {
				views[i].Spec.StagedDeploymentID = staged[i].DeploymentID
			}
		}
		for _, i := range p.members {
			v := views[i]
			switch {
			case v == nil:
				why.maxNew++
				continue
			case v.Spec.DeploymentID == staged[i].DeploymentID:
				continue
			case staged[i].Paused:
				plan.Paused++
				continue
			}
			wasUnavailable := unavailable(v)
			if !wasUnavailable {
				if plan.Unavailable >= plan.MaxUnavailable {
					why.bundle++
					continue
				}
				if p.status.Unavailable >= p.status.MaxUnavailable {
					why.partition[p.status.Name]++
					continue
				}
				plan.Unavailable++
				p.status.Unavailable++
			}
			v.Spec.DeploymentID = staged[i].DeploymentID
			plan.Decisions[i].Release = true
		}
		p.status.Unavailable = notUpToDate(p.members, views, staged)
		if p.status.Unavailable > p.status.MaxUnavailable {
			plan.UnavailablePartitions++
			why.unavailablePartitions = append(why.unavailablePartitions, fmt.Sprintf("%s %d/%d", p.status.Name, p.status.Unavailable, p.status.Count))
		}
		if plan.UnavailablePartitions > plan.MaxUnavailablePartitions {
			stoppedAfter = pi
			break
		}
	}
	for pi := range parts {
		p := &parts[pi]
		var s bundlestate.Summary
		for _, i := range p.members {
			if views[i] == nil {
				s.DesiredReady++
				s.Pending++
				continue
			}
			s.Add(staged[i].Cluster.Namespace+"/"+staged[i].Cluster.Name, views[i])
		}
		p.status.Summary = s.BundleSummary
		p.status.Summary.NonReadyResources = nil
		if stoppedAfter >= 0 && pi > stoppedAfter {
			p.status.Unavailable = notUpToDate(p.members, views, staged)
			why.laterPartitions = append(why.laterPartitions, p.status.Name)
			for _, i := range p.members {
				if views[i] == nil || (views[i].Spec.DeploymentID != staged[i].DeploymentID && !staged[i].Paused) {
					why.stopped++
				}
			}
		}
		plan.Partitions = append(plan.Partitions, p.status)
	}
	for i, v := range views {
		if v != nil && v.Spec.DeploymentID == staged[i].DeploymentID {
			plan.Released++
		}
	}
	plan.NotCreated = why.maxNew
	why.plan = &plan
	plan.Waiting = why.String()
	return plan, nil
}

// waits counts why clusters wait for the change.
type waits struct {
	plan                  *Plan
	maxNew, bundle        int
	partition             map[string]int
	stopped               int
	unavailablePartitions []string
	laterPartitions       []string
}

func (w waits) String() string {
	p := w.plan
	var parts []string
	if w.bundle > 0 {
		parts = append(parts, fmt.Sprintf("%s wait: %d of %d clusters unavailable, maxUnavailable %d", clusters(w.bundle), p.Unavailable, p.Targets, p.MaxUnavailable))
	}
	for _, part := range p.Partitions {
		if n := w.partition[part.Name]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s of partition %s wait: %d of its %d clusters unavailable, maxUnavailable %d", clusters(n), part.Name, part.Unavailable, part.Count, part.MaxUnavailable))
		}
	}
	if len(w.laterPartitions) > 0 && w.stopped > 0 {
		parts = append(parts, fmt.Sprintf("partitions %s wait (%s): unavailable partitions %s, maxUnavailablePartitions %d",
			strings.Join(w.laterPartitions, ", "), clusters(w.stopped), strings.Join(w.unavailablePartitions, ", "), p.MaxUnavailablePartitions))
	}
	if w.maxNew > 0 {
		parts = append(parts, fmt.Sprintf("%s wait for a BundleDeployment: maxNew is reached", clusters(w.maxNew)))
	}
	if p.Paused > 0 {
		parts = append(parts, fmt.Sprintf("%s paused", clusters(p.Paused)))
	}
	return strings.Join(parts, "; ")
}

func clusters(n int) string {
	if n == 1 {
		return "1 cluster"
	}
	return fmt.Sprintf("%d clusters", n)
}

// unavailable says whether a BundleDeployment is not applied at its deployment ID,
// or not ready.
func unavailable(bd *fleet.BundleDeployment) bool {
	return bd != nil && (bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID || !bd.Status.Ready)
}

// notUpToDate counts the members that do not hold and run the change, or are not
// ready: a partition's unavailable clusters.
func notUpToDate(members []int, views []*fleet.BundleDeployment, staged []Staged) int {
	n := 0
	for _, i := range members {
		if !upToDate(views[i], staged[i].DeploymentID) || unavailable(views[i]) {
			n++
		}
	}
	return n
}

// upToDate says whether bd holds and has applied id.
func upToDate(bd *fleet.BundleDeployment, id string) bool {
	return bd != nil && bd.Spec.StagedDeploymentID == id && bd.Spec.DeploymentID == id && bd.Status.AppliedDeploymentID == id
}

// partitions puts the clusters in partitions, each in cluster name order.
func partitions(rs fleet.RolloutStrategy, groups []*fleet.ClusterGroup, staged []Staged) ([]partition, error) {
	order := make([]int, len(staged))
	for i := range order {
		order[i] = i
	}
	sort.SliceStable(order, func(a, b int) bool { return staged[order[a]].Cluster.Name < staged[order[b]].Cluster.Name })

	var out []partition
	rest := order
	if len(rs.Partitions) > 0 {
		m := matcher{groups: groups}
		taken := make([]bool, len(staged))
		for pi, def := range rs.Partitions {
			name := def.Name
			if name == "" {
				name = fmt.Sprintf("partition%03d", pi)
			}
			c := criteria{def.ClusterName, def.ClusterSelector, def.ClusterGroup, def.ClusterGroupSelector}
			var members []int
			for _, i := range order {
				if taken[i] {
					continue
				}
				ok, err := m.match(c, staged[i].Cluster)
				if err != nil {
					return nil, fmt.Errorf("rolloutStrategy.partitions[%s]: %w", name, err)
				}
				if ok {
					taken[i] = true
					members = append(members, i)
				}
			}
			p, err := newPartition(name, members, "rolloutStrategy.partitions["+name+"].maxUnavailable", def.MaxUnavailable, rs.MaxUnavailable)
			if err != nil {
				return nil, err
			}
			out = append(out, p)
		}
		rest = nil
		for _, i := range order {
			if !taken[i] {
				rest = append(rest, i)
			}
		}
		if len(rest) == 0 {
			return out, nil
		}
	}
	auto, err := autoPartitions(rs, rest, len(rs.Partitions) > 0)
	if err != nil {
		return nil, err
	}
	return append(out, auto...), nil
}

// autoPartitions splits members into partitions of autoPartitionSize clusters, or
// keeps them in one below autoPartitionThreshold clusters or with a size of 0.
// unmatched names them for the clusters no defined partition took.
func autoPartitions(rs fleet.RolloutStrategy, members []int, unmatched bool) ([]partition, error) {
	name, prefix := "All", "Partition"
	if unmatched {
		name, prefix = "Unmatched", "Unmatched"
	}
	threshold := DefaultAutoPartitionThreshold
	if rs.AutoPartitionThreshold != nil {
		threshold = *rs.AutoPartitionThreshold
	}
	off := rs.AutoPartitionSize != nil && rs.AutoPartitionSize.Type == intstr.Int && rs.AutoPartitionSize.IntVal <= 0
	if off || threshold <= 0 || len(members) < threshold {
		p, err := newPartition(name, members, "rolloutStrategy.maxUnavailable", rs.MaxUnavailable)
		return []partition{p}, err
	}
	size, err := limit(len(members), "rolloutStrategy.autoPartitionSize", rs.AutoPartitionSize, &defaultAutoPartitionSize)
	if err != nil {
		return nil, err
	}
	if size < 1 {
		// "0" or a negative count, written as a string: as the number 0, one partition.
		p, err := newPartition(name, members, "rolloutStrategy.maxUnavailable", rs.MaxUnavailable)
		return []partition{p}, err
	}
	var out []partition
	for start := 0; start < len(members); start += size {
		end := min(start+size, len(members))
		p, err := newPartition(fmt.Sprintf("%s %d - %d", prefix, start, end), members[start:end], "rolloutStrategy.maxUnavailable", rs.MaxUnavailable)
		if err != nil {
			return nil, err
		}
		out = append(out, p)
	}
	return out, nil
}

func newPartition(name string, members []int, field string, maxUnavailable ...*intstr.IntOrString) (partition, error) {
	max, err := limit(len(members), field, append(maxUnavailable, &defaultMaxUnavailable)...)
	if err != nil {
		return partition{}, err
	}
	return partition{status: fleet.PartitionStatus{Name: name, Count: len(members), MaxUnavailable: max}, members: members}, nil
}

// limit is the first value given of a count or percentage, applied to count items,
// as Fleet computes it: a count is kept within 0 and count; a percentage is rounded
// down but is at least 1. field names it in errors.
func limit(count int, field string, values ...*intstr.IntOrString) (int, error) {
	if count <= 0 {
		return 1, nil
	}
	var v *intstr.IntOrString
	for _, candidate := range values {
		if candidate != nil {
			v = candidate
			break
		}
	}
	if v == nil {
		return count, nil
	}
	if v.Type == intstr.Int {
		return min(max(int(v.IntVal), 0), count), nil
	}
	if n, err := strconv.Atoi(v.StrVal); err == nil {
		return min(max(n, 0), count), nil
	}
	number, ok := strings.CutSuffix(v.StrVal, "%")
	percent, err := strconv.ParseFloat(number, 64)
	if !ok || err != nil || math.IsNaN(percent) || math.IsInf(percent, 0) {
		return 0, fmt.Errorf("%s: %q is neither a number nor a percentage such as \"25%%\"", field, v.StrVal)
	}
	n := int(float64(count) * percent / 100)
	return min(max(n, 1), count), nil
}
