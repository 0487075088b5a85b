package bundle

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/target"
)

// isAgentBundleShaped says whether bundle is what the hub makes as a cluster's agent
// bundle (see isAgentBundle, which also checks the Cluster's UID): labelled, named,
// owned and targeted for one cluster. Only the hub may label a Bundle so (the
// flotilla-agent-bundles admission policy); the shape holds even where that policy
// is not in force.
func isAgentBundleShaped(bundle *fleet.Bundle) bool {
	cluster := bundle.Labels[names.AgentBundleLabel]
	if cluster == "" || bundle.Name != names.AgentBundle(cluster) || len(bundle.Spec.Targets) != 1 || bundle.Spec.Targets[0].ClusterName != cluster {
		return false
	}
	return ownedByCluster(bundle, cluster, "")
}

// ownedByCluster says whether the Cluster name (of that UID, unless uid is empty)
// owns bundle.
func ownedByCluster(bundle *fleet.Bundle, name string, uid types.UID) bool {
	for _, ref := range bundle.OwnerReferences {
		if ref.Kind == "Cluster" && ref.Name == name && (uid == "" || ref.UID == uid) {
			return true
		}
	}
	return false
}

// reasonPolicyViolation is the Processed reason of a Bundle that a Policy of its
// namespace forbids.
const reasonPolicyViolation = "PolicyViolation"

// violatesPolicy says how bundle breaks the Policies of its namespace, or returns nil.
// Each target deploys with its own serviceAccount, or the Bundle's: with any Policy
// requiring one, every target must have one; with any listing allowed ones, every
// serviceAccount given must be among those listed. The hub's agent bundles, which
// deploy the agent itself, are not Bundle authors' and are exempt.
func violatesPolicy(bundle *fleet.Bundle, policies []*fleet.Policy) error {
	if isAgentBundleShaped(bundle) {
		return nil
	}
	var (
		require bool
		allowed []string
		by      []string
	)
	for _, p := range policies {
		if p.Namespace != bundle.Namespace {
			continue
		}
		require = require || p.RequireServiceAccount
		allowed = append(allowed, p.AllowedServiceAccounts...)
		by = append(by, p.Name)
	}
	if !require && len(allowed) == 0 {
		return nil
	}
	sort.Strings(by)
	sort.Strings(allowed)
	allowed = slices.Compact(allowed)
	var problems []string
	check := func(at, sa string) {
		switch {
		case sa == "" && require:
			problems = append(problems, at+" has no serviceAccount, and one is required")
		case sa != "" && len(allowed) > 0 && !slices.Contains(allowed, sa):
			problems = append(problems, fmt.Sprintf("%s: serviceAccount %q is not among the allowed %s", at, sa, strings.Join(allowed, ", ")))
		}
	}
	if bundle.Spec.ServiceAccount != "" || len(bundle.Spec.Targets) == 0 {
		check("spec", bundle.Spec.ServiceAccount)
	}
	for i, t := range bundle.Spec.Targets {
		if t.DoNotDeploy {
			continue
		}
		// A target without its own deploys with the Bundle's, checked above.
		if t.ServiceAccount != "" || bundle.Spec.ServiceAccount == "" {
			check("spec.targets["+target.TargetName(i, t.Name)+"]", t.ServiceAccount)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("Policy %s: %s", strings.Join(by, ", "), strings.Join(problems, "; "))
}
