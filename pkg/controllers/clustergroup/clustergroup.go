// Package clustergroup is the ClusterGroup controller: it counts the group's clusters,
// how many are Ready, and the state of their BundleDeployments.
package clustergroup

import (
	"context"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlestate"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/controllers/clusterns"
	"github.com/flotilla/flotilla/pkg/controllers/statuspatch"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/target"
)

type handler struct {
	groups      fleetcontrollers.ClusterGroupController
	clusters    fleetcontrollers.ClusterCache
	deployments fleetcontrollers.BundleDeploymentCache
	// written is each group's status as last patched, until the cache shows it.
	written statuspatch.Written[fleet.ClusterGroupStatus]
}

// Register starts handling ClusterGroups; a Cluster's change refreshes the groups
// of its namespace.
func Register(ctx context.Context, groups fleetcontrollers.ClusterGroupController, clusters fleetcontrollers.ClusterController,
	deployments fleetcontrollers.BundleDeploymentCache) {
	h := &handler{groups: groups, clusters: clusters.Cache(), deployments: deployments}
	groups.OnChange(ctx, "clustergroup", h.onChange)
	clusters.OnChange(ctx, "clustergroup-members", func(key string, c *fleet.Cluster) (*fleet.Cluster, error) {
		namespace, _, _ := strings.Cut(key, "/")
		list, err := groups.Cache().List(namespace, labels.Everything())
		if err != nil {
			return c, err
		}
		for _, g := range list {
			groups.EnqueueAfter(g.Namespace, g.Name, statuspatch.Debounce)
		}
		return c, nil
	})
}

func (h *handler) onChange(key string, group *fleet.ClusterGroup) (*fleet.ClusterGroup, error) {
	if group == nil {
		h.written.Forget(key)
		return nil, nil
	}
	if group.DeletionTimestamp != nil {
		return group, nil
	}
	base := h.written.Base(key, group.ResourceVersion, group.Status)
	status := base.DeepCopy()
	clusters, err := h.clusters.List(group.Namespace, labels.Everything())
	if err != nil {
		return group, err
	}
	var (
		members  int
		notReady []string
		bundles  bundlestate.Summary
	)
	for _, c := range clusters {
		in, err := target.InGroup(group, c)
		if err != nil {
			conditions.Set(&status.Conditions, fleet.ConditionProcessed, corev1.ConditionFalse, "InvalidSelector", err.Error())
			return h.update(key, group, base, status)
		}
		if !in {
			continue
		}
		members++
		if !conditions.IsTrue(c.Status.Conditions, fleet.ConditionReady) {
			notReady = append(notReady, c.Name)
		}
		deployments, err := h.deployments.List(clusterns.Name(c), labels.Everything())
		if err != nil {
			return group, err
		}
		for _, bd := range deployments {
			bundles.Add(c.Name+"/"+bd.Name, bd)
		}
	}
	sort.Strings(notReady)
	status.ClusterCount = members
	status.NonReadyClusterCount = len(notReady)
	status.NonReadyClusters = notReady
	if len(notReady) > 10 {
		status.NonReadyClusters = notReady[:10]
	}
	status.Summary = bundles.BundleSummary
	status.Display.ReadyClusters = fmt.Sprintf("%d/%d", members-len(notReady), members)
	status.Display.ReadyBundles = bundles.ReadyString()
	status.Display.State = string(bundles.Worst())
	conditions.Set(&status.Conditions, fleet.ConditionProcessed, corev1.ConditionTrue, "", "")
	switch {
	case len(notReady) > 0:
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, "ClustersNotReady",
			fmt.Sprintf("NotReady(%d) [%s]", len(notReady), strings.Join(status.NonReadyClusters, ", ")))
	case !bundles.AllReady():
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, "BundlesNotReady", bundles.NotReadyMessage("Bundle"))
	default:
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
	}
	return h.update(key, group, base, status)
}

// update patches the group's status from base (see statuspatch.Written) to status.
func (h *handler) update(key string, group *fleet.ClusterGroup, base fleet.ClusterGroupStatus, status *fleet.ClusterGroupStatus) (*fleet.ClusterGroup, error) {
	if equality.Semantic.DeepEqual(*status, base) {
		return group, nil
	}
	patch, err := statuspatch.For(base, status)
	if err != nil || patch == nil {
		return group, err
	}
	updated, err := h.groups.Patch(group.Namespace, group.Name, types.MergePatchType, patch, "status")
	if err != nil {
		return group, err
	}
	h.written.Remember(key, group.ResourceVersion, *status)
	return updated, nil
}
