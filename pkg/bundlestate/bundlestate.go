// Package bundlestate reads the state of a BundleDeployment (Ready, NotReady,
// ErrApplied, ...) and folds many of them into the summaries that Bundles, Clusters
// and ClusterGroups show.
package bundlestate

import (
	"fmt"
	"sort"
	"strings"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
)

// ConditionDeployed is set by the agent: False, with the Helm error as message, when
// the last deployment failed.
const ConditionDeployed = "Deployed"

// rank orders states from best to worst.
var rank = map[fleet.BundleState]int{
	fleet.Ready:       0,
	fleet.NotReady:    1,
	fleet.Pending:     2,
	fleet.OutOfSync:   3,
	fleet.Modified:    4,
	fleet.WaitApplied: 5,
	fleet.ErrApplied:  6,
}

// Worse says whether state a is worse than b.
func Worse(a, b fleet.BundleState) bool { return rank[a] > rank[b] }

// Of is the state of bd: not yet applied (WaitApplied, or ErrApplied when the agent
// reported an error), applied but not ready, staged but not released by the rollout
// (OutOfSync), modified downstream, or Ready.
func Of(bd *fleet.BundleDeployment) fleet.BundleState {
	switch {
	case bd.Spec.DeploymentID == "" && bd.Spec.StagedDeploymentID != "" && bd.Status.AppliedDeploymentID == "":
		// Staged for a cluster the rollout has not reached yet: nothing to apply.
		return fleet.OutOfSync
	case bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID:
		if failed(bd) {
			return fleet.ErrApplied
		}
		return fleet.WaitApplied
	case failed(bd):
		return fleet.ErrApplied
	case !bd.Status.Ready:
		return fleet.NotReady
	case bd.Spec.StagedDeploymentID != "" && bd.Spec.DeploymentID != bd.Spec.StagedDeploymentID:
		return fleet.OutOfSync
	case !bd.Status.NonModified:
		return fleet.Modified
	default:
		return fleet.Ready
	}
}

func failed(bd *fleet.BundleDeployment) bool {
	c := conditions.Get(bd.Status.Conditions, ConditionDeployed)
	return c != nil && c.Status == "False"
}

// Message is why bd is in its state, for a human.
func Message(bd *fleet.BundleDeployment) string {
	state := Of(bd)
	switch state {
	case fleet.ErrApplied, fleet.WaitApplied:
		// Deployed is False with the error, or Unknown with what the agent waits for.
		if c := conditions.Get(bd.Status.Conditions, ConditionDeployed); c != nil && c.Status != "True" {
			return c.Message
		}
	case fleet.OutOfSync:
		if bd.Spec.Paused {
			return "paused: a newer version is staged"
		}
		return "a newer version is staged; the rollout has not reached this cluster yet"
	case fleet.NotReady:
		var parts []string
		for _, r := range bd.Status.NonReadyStatus {
			part := fmt.Sprintf("%s %s/%s %s", strings.ToLower(r.Kind), r.Namespace, r.Name, r.Summary.State)
			if len(r.Summary.Message) > 0 && r.Summary.Message[0] != "" {
				part += ": " + r.Summary.Message[0]
			}
			parts = append(parts, part)
		}
		return strings.Join(limit(parts, 3), "; ")
	case fleet.Modified:
		var parts []string
		for _, m := range bd.Status.ModifiedStatus {
			what := "modified"
			if m.Create {
				what = "missing"
			} else if m.Delete {
				what = "extra"
			}
			parts = append(parts, fmt.Sprintf("%s %s %s/%s", what, strings.ToLower(m.Kind), m.Namespace, m.Name))
		}
		return strings.Join(limit(parts, 3), "; ")
	}
	return ""
}

func limit(parts []string, n int) []string {
	if len(parts) > n {
		return append(parts[:n], fmt.Sprintf("and %d more", len(parts)-n))
	}
	return parts
}

// Summary accumulates BundleDeployments into a fleet.BundleSummary.
type Summary struct {
	fleet.BundleSummary
	worst fleet.BundleState
	// notReady counts, per state, the names of deployments in it, for messages.
	notReady map[fleet.BundleState][]string
}

// Add counts bd under name (the Bundle's name for a Cluster's summary, the cluster's
// for a Bundle's).
func (s *Summary) Add(name string, bd *fleet.BundleDeployment) {
	state := Of(bd)
	s.DesiredReady++
	switch state {
	case fleet.Ready:
		s.Ready++
	case fleet.NotReady:
		s.NotReady++
	case fleet.WaitApplied:
		s.WaitApplied++
	case fleet.ErrApplied:
		s.ErrApplied++
	case fleet.OutOfSync:
		s.OutOfSync++
	case fleet.Modified:
		s.Modified++
	case fleet.Pending:
		s.Pending++
	}
	if s.worst == "" || Worse(state, s.worst) {
		s.worst = state
	}
	if state == fleet.Ready {
		return
	}
	if s.notReady == nil {
		s.notReady = map[fleet.BundleState][]string{}
	}
	s.notReady[state] = append(s.notReady[state], name)
	if len(s.NonReadyResources) < 10 {
		s.NonReadyResources = append(s.NonReadyResources, fleet.NonReadyResource{
			Name: name, State: state, Message: Message(bd),
			ModifiedStatus: limitModified(bd.Status.ModifiedStatus), NonReadyStatus: limitNonReady(bd.Status.NonReadyStatus),
		})
	}
}

func limitModified(in []fleet.ModifiedStatus) []fleet.ModifiedStatus {
	if len(in) > 10 {
		return in[:10]
	}
	return in
}

func limitNonReady(in []fleet.NonReadyStatus) []fleet.NonReadyStatus {
	if len(in) > 10 {
		return in[:10]
	}
	return in
}

// Worst is the worst state counted, or "" when nothing was.
func (s *Summary) Worst() fleet.BundleState { return s.worst }

// ReadyString is "ready/desired", e.g. "1/2".
func (s *Summary) ReadyString() string { return fmt.Sprintf("%d/%d", s.Ready, s.DesiredReady) }

// AllReady says whether every counted deployment is Ready.
func (s *Summary) AllReady() bool { return s.Ready == s.DesiredReady }

// NotReadyMessage lists the states that are not Ready with counts and a few names,
// worst first, e.g. "ErrApplied(1) [Cluster clusters/c1: error]; NotReady(2) [...]".
// kind ("Bundle" or "Cluster") prefixes the names.
func (s *Summary) NotReadyMessage(kind string) string {
	states := make([]fleet.BundleState, 0, len(s.notReady))
	for st := range s.notReady {
		states = append(states, st)
	}
	sort.Slice(states, func(i, j int) bool { return Worse(states[i], states[j]) })
	var parts []string
	for _, st := range states {
		list := s.notReady[st]
		sort.Strings(list)
		shown := list
		if len(shown) > 3 {
			shown = shown[:3]
		}
		described := make([]string, len(shown))
		for i, n := range shown {
			described[i] = kind + " " + n
			for _, r := range s.NonReadyResources {
				if r.Name == n && r.State == st && r.Message != "" {
					described[i] += ": " + r.Message
					break
				}
			}
		}
		more := ""
		if len(list) > len(shown) {
			more = fmt.Sprintf(" and %d more", len(list)-len(shown))
		}
		parts = append(parts, fmt.Sprintf("%s(%d) [%s%s]", st, len(list), strings.Join(described, "; "), more))
	}
	return strings.Join(parts, "; ")
}
