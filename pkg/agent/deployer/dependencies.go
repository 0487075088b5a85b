package deployer

import (
	"fmt"
	"slices"
	"sort"
	"strings"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlestate"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/target"
)

// ReasonDependenciesNotReady is the reason of Deployed=Unknown on a BundleDeployment
// that waits for the Bundles it depends on: it is deployed once they are in an
// accepted state on this cluster.
const ReasonDependenciesNotReady = "DependenciesNotReady"

// unmetDependencies says, for each of bd's dependsOn that is not met on this
// cluster, which Bundle is in which state (or that none matches), among the cluster's
// BundleDeployments others. A dependency is met when every BundleDeployment it
// selects (other than bd) is in one of its acceptedStates, Ready by default, and it
// selects at least one. A reference with neither name nor selector, or an invalid
// selector, is an error.
func unmetDependencies(bd *fleet.BundleDeployment, others []*fleet.BundleDeployment) ([]string, error) {
	var unmet []string
	for i, ref := range bd.Spec.DependsOn {
		selector, err := target.DependencySelector(ref, bd.Labels[names.BundleNamespaceLabel])
		if err != nil {
			return nil, fmt.Errorf("dependsOn[%d]: %w", i, err)
		}
		matched := 0
		for _, dep := range others {
			if dep.Name == bd.Name || !selector.Matches(labels.Set(dep.Labels)) {
				continue
			}
			matched++
			if state := bundlestate.Of(dep); !accepted(state, ref.AcceptedStates) {
				unmet = append(unmet, fmt.Sprintf("Bundle %s is %s", bundleName(dep), state))
			}
		}
		if matched == 0 {
			unmet = append(unmet, describe(ref)+" has no BundleDeployment on this cluster")
		}
	}
	sort.Strings(unmet)
	return slices.Compact(unmet), nil
}

func accepted(state fleet.BundleState, states []fleet.BundleState) bool {
	if len(states) == 0 {
		return state == fleet.Ready
	}
	return slices.Contains(states, state)
}

func bundleName(bd *fleet.BundleDeployment) string {
	if name := bd.Labels[names.BundleNameLabel]; name != "" {
		return name
	}
	return bd.Name
}

func describe(ref fleet.BundleRef) string {
	if ref.Name != "" {
		return "Bundle " + ref.Name
	}
	s, err := metav1.LabelSelectorAsSelector(ref.Selector)
	if err != nil {
		return "the selector"
	}
	return "a Bundle matching {" + strings.TrimSpace(s.String()) + "}"
}

// waitsForDependencies says whether bd waits for the Bundles it depends on, and
// records in status what it waits for (or, for a reference that cannot select
// anything, the error).
func (d *Deployer) waitsForDependencies(bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus, log logrus.FieldLogger) bool {
	if len(bd.Spec.DependsOn) == 0 {
		return false
	}
	others, err := d.Deployments.Cache().List(bd.Namespace, labels.Everything())
	if err != nil {
		recordDeploy(bd, status, nil, fmt.Errorf("listing the BundleDeployments it depends on: %w", err), log)
		return true
	}
	unmet, err := unmetDependencies(bd, others)
	switch {
	case err != nil:
		recordDeploy(bd, status, nil, err, log)
	case len(unmet) > 0:
		msg := "waiting for its dependencies: " + strings.Join(unmet, "; ")
		if c := conditions.Get(status.Conditions, ConditionDeployed); c == nil || c.Message != msg {
			log.WithField("dependencies", strings.Join(unmet, "; ")).Info("Waiting for dependencies before deploying")
		}
		conditions.Set(&status.Conditions, ConditionDeployed, corev1.ConditionUnknown, ReasonDependenciesNotReady, msg)
	default:
		return false
	}
	return true
}

// clearWait forgets that bd waited for its dependencies once it no longer does (they
// are met, or it has nothing to deploy any more: reverted, or paused).
func clearWait(bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus) {
	c := conditions.Get(status.Conditions, ConditionDeployed)
	if c == nil || c.Reason != ReasonDependenciesNotReady {
		return
	}
	if status.AppliedDeploymentID == bd.Spec.DeploymentID {
		conditions.Set(&status.Conditions, ConditionDeployed, corev1.ConditionTrue, "", "")
		return
	}
	conditions.Set(&status.Conditions, ConditionDeployed, corev1.ConditionUnknown, "", "")
}

// wakeDependents looks again at the BundleDeployments of the cluster that wait for
// their dependencies, when bd's state changed from before.
func (d *Deployer) wakeDependents(bd *fleet.BundleDeployment, before fleet.BundleState) {
	if bundlestate.Of(bd) == before {
		return
	}
	others, err := d.Deployments.Cache().List(bd.Namespace, labels.Everything())
	if err != nil {
		return
	}
	for _, other := range others {
		if c := conditions.Get(other.Status.Conditions, ConditionDeployed); other.Name != bd.Name && c != nil && c.Reason == ReasonDependenciesNotReady {
			d.Deployments.Enqueue(other.Namespace, other.Name)
		}
	}
}
