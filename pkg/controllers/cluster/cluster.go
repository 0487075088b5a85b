// Package cluster is the Cluster controller: it keeps each Cluster's per-cluster
// namespace, reports whether its agent has checked in recently and how its
// BundleDeployments are doing (the Ready condition and the printed columns), and on
// deletion removes everything the hub made for the cluster.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	coordinationcontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/coordination.k8s.io/v1"
	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlestate"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/controllers/clusterns"
	"github.com/flotilla/flotilla/pkg/controllers/request"
	"github.com/flotilla/flotilla/pkg/controllers/statuspatch"
	fleetclient "github.com/flotilla/flotilla/pkg/generated/clientset/versioned/typed/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// Reasons of the Ready condition.
const (
	// StateWaitCheckIn is the display state and reason of a Cluster whose agent has
	// not reported yet.
	StateWaitCheckIn = "WaitCheckIn"
	// ReasonOffline: the agent has not been seen for longer than the offline threshold.
	ReasonOffline = "Offline"
	// ReasonBundlesNotReady: some BundleDeployments of the cluster are not Ready.
	ReasonBundlesNotReady = "BundlesNotReady"
	// ReasonWaitAgentBundle: the agent checked in, but the cluster's agent bundle has
	// no BundleDeployment yet.
	ReasonWaitAgentBundle = "WaitAgentBundle"
	// ReasonNamespaceNotOwned: a namespace of the name of the Cluster's per-cluster
	// namespace exists that the hub did not make for it.
	ReasonNamespaceNotOwned = clusterns.ReasonNotOwned
)

// Settings tune the Cluster controller.
type Settings struct {
	// OfflineAfter is how long after its agent's last check-in a cluster is shown
	// as offline (Ready=Unknown).
	OfflineAfter time.Duration
}

type handler struct {
	settings Settings
	clusters fleetcontrollers.ClusterController
	// client writes the Cluster's status (statuspatch.ClusterOwner).
	client      fleetclient.ClustersGetter
	requests    fleetcontrollers.ClusterRegistrationRequestController
	deployments fleetcontrollers.BundleDeploymentCache
	// leases holds the agents' heartbeat Leases (names.AgentLease) in per-cluster
	// namespaces.
	leases     coordinationcontrollers.LeaseCache
	namespaces *clusterns.Ensurer
	kube       kubernetes.Interface
	events     record.EventRecorder
	now        func() time.Time
	// patches spaces the Cluster's status patches (see statuspatch.Limiter).
	patches statuspatch.Limiter
	// written is each Cluster's status as last patched, until the cache shows it.
	written statuspatch.Written[fleet.ClusterStatus]
}

// Register starts handling Clusters. The requests cache must carry the
// request.ByClientID index (request.Register adds it).
func Register(ctx context.Context, settings Settings, clusters fleetcontrollers.ClusterController, client fleetclient.ClustersGetter, requests fleetcontrollers.ClusterRegistrationRequestController,
	deployments fleetcontrollers.BundleDeploymentController, leases coordinationcontrollers.LeaseController,
	namespaces *clusterns.Ensurer, kube kubernetes.Interface, events record.EventRecorder) {
	h := &handler{settings: settings, clusters: clusters, client: client, requests: requests, deployments: deployments.Cache(), leases: leases.Cache(),
		namespaces: namespaces, kube: kube, events: events, now: time.Now,
		patches: statuspatch.Limiter{First: statuspatch.NewObjectWait}}
	clusters.OnChange(ctx, "cluster", h.onChange)
	clusters.OnRemove(ctx, names.ClusterCleanup, h.onRemove)
	// A BundleDeployment's change changes its cluster's summary.
	deployments.OnChange(ctx, "cluster-bundles", func(key string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
		if bd != nil {
			if bd.Labels[names.ClusterLabel] != "" {
				clusters.EnqueueAfter(bd.Labels[names.ClusterNamespaceLabel], bd.Labels[names.ClusterLabel], statuspatch.Debounce)
			}
			return bd, nil
		}
		// Deleted: the per-cluster namespace names the cluster.
		if workspace, name, ok := namespaces.ClusterOf(strings.Split(key, "/")[0]); ok {
			clusters.EnqueueAfter(workspace, name, statuspatch.Debounce)
		}
		return nil, nil
	})
	leases.OnChange(ctx, "cluster-heartbeat", h.onLease)
}

// onLease looks again at an offline Cluster whose agent renewed its Lease. A Cluster
// that is online needs no look: the timer that would turn it offline reads the
// Lease when it fires.
func (h *handler) onLease(_ string, lease *coordinationv1.Lease) (*coordinationv1.Lease, error) {
	if lease == nil || lease.Name != names.AgentLease {
		return lease, nil
	}
	// The namespace, made and labelled by the hub, names the Cluster; the Lease,
	// written by the agent, is trusted for nothing but its time.
	workspace, name, ok := h.namespaces.ClusterOf(lease.Namespace)
	if !ok {
		return lease, nil
	}
	cluster, err := h.clusters.Cache().Get(workspace, name)
	if err != nil {
		return lease, nil
	}
	if ready := conditions.Get(cluster.Status.Conditions, fleet.ConditionReady); ready != nil && ready.Reason == ReasonOffline {
		h.clusters.Enqueue(workspace, name)
	}
	return lease, nil
}

// lastSeen is when the cluster's agent was last heard from: its last status report
// or, if later, its last Lease renewal. An agent that never reported has not been
// seen, whatever Lease its namespace holds.
func (h *handler) lastSeen(status *fleet.ClusterStatus) time.Time {
	seen := status.Agent.LastSeen.Time
	if seen.IsZero() || status.Namespace == "" || h.leases == nil {
		return seen
	}
	lease, err := h.leases.Get(status.Namespace, names.AgentLease)
	if err == nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(seen) {
		return lease.Spec.RenewTime.Time
	}
	return seen
}

func (h *handler) onChange(key string, cluster *fleet.Cluster) (_ *fleet.Cluster, err error) {
	if cluster == nil {
		h.patches.Forget(key)
		h.written.Forget(key)
		return nil, nil
	}
	if cluster.DeletionTimestamp != nil {
		return cluster, nil
	}
	// A namespace of the Cluster's name that is not its own is shown, and looked at
	// again with backoff until someone removes it.
	var notOwned *clusterns.NotOwnedError
	if err := h.namespaces.Ensure(context.Background(), cluster); err != nil && !errors.As(err, &notOwned) {
		return cluster, err
	}
	base := h.written.Base(key, cluster.ResourceVersion, cluster.Status)
	status := base.DeepCopy()
	status.Namespace = clusterns.Name(cluster)
	if err := h.summarize(cluster, status); err != nil {
		return cluster, err
	}
	if notOwned != nil {
		status.Display.State = ReasonNamespaceNotOwned
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, ReasonNamespaceNotOwned, notOwned.Error())
		defer func() { err = errors.Join(err, notOwned) }()
	}
	if equality.Semantic.DeepEqual(*status, base) {
		return cluster, nil
	}
	if wait := h.patches.Wait(key, base.Conditions, status.Conditions); wait > 0 {
		h.clusters.EnqueueAfter(cluster.Namespace, cluster.Name, wait)
		return cluster, nil
	}
	h.announce(cluster, base, status)
	logrus.WithField("cluster", key).Debugf("Applying the status (state %q)", status.Display.State)
	updated, err := statuspatch.ClusterOwner.ApplyCluster(context.Background(), h.client, cluster, *status)
	if err != nil {
		return cluster, err
	}
	h.written.Remember(key, cluster.ResourceVersion, *status)
	return updated, nil
}

// onRemove deletes what the hub made for a Cluster outside its workspace's owner
// references: the per-cluster namespace (and with it the identity and the
// BundleDeployments), the Contents binding, credentials in the registration
// namespace, and its registration requests.
func (h *handler) onRemove(_ string, cluster *fleet.Cluster) (*fleet.Cluster, error) {
	ctx := context.Background()
	ns := clusterns.Name(cluster)
	var errs []error
	errs = append(errs, h.namespaces.Delete(ctx, cluster))
	errs = append(errs, ignoreNotFound(h.kube.RbacV1().ClusterRoleBindings().Delete(ctx, names.ContentsBinding(ns), metav1.DeleteOptions{})))
	selector := labels.SelectorFromSet(labels.Set{names.ClusterLabel: cluster.Name, names.ClusterNamespaceLabel: cluster.Namespace})
	errs = append(errs, request.DeleteRegistrationObjects(ctx, h.kube, selector))
	if cluster.Spec.ClientID != "" {
		reqs, err := h.requests.Cache().GetByIndex(request.ByClientID, cluster.Namespace+"/"+cluster.Spec.ClientID)
		errs = append(errs, err)
		for _, r := range reqs {
			errs = append(errs, ignoreNotFound(h.requests.Delete(r.Namespace, r.Name, &metav1.DeleteOptions{})))
		}
	}
	if err := errors.Join(errs...); err != nil {
		return cluster, fmt.Errorf("cleaning up after Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	logrus.WithField("cluster", cluster.Namespace+"/"+cluster.Name).Info("Removed the cluster's namespace, identity and credentials")
	return cluster, nil
}

// summarize fills the Ready condition and the columns: the agent's check-ins and
// nodes, and the cluster's BundleDeployments.
func (h *handler) summarize(cluster *fleet.Cluster, status *fleet.ClusterStatus) error {
	deployments, err := h.deployments.List(status.Namespace, labels.Everything())
	if err != nil {
		return err
	}
	var s bundlestate.Summary
	agentBundle := false
	for _, bd := range deployments {
		s.Add(bd.Labels[names.BundleNamespaceLabel]+"/"+bd.Name, bd)
		agentBundle = agentBundle || bd.Labels[names.AgentBundleLabel] == cluster.Name
	}
	status.Summary = s.BundleSummary
	status.Display.ReadyBundles = s.ReadyString()
	status.Display.State = string(s.Worst())

	agent := status.Agent
	if agent.LastSeen.IsZero() {
		status.Display.ReadyNodes, status.Display.SampleNode = "", ""
	} else {
		status.Display.ReadyNodes = fmt.Sprintf("%d/%d", agent.ReadyNodes, agent.ReadyNodes+agent.NonReadyNodes)
		status.Display.SampleNode = agent.SampleNode
	}

	state := readiness(h.now(), h.lastSeen(status), h.settings.OfflineAfter, agentBundle, &s)
	if state.state != "" {
		status.Display.State = state.state
	}
	conditions.Set(&status.Conditions, fleet.ConditionReady, state.status, state.reason, state.message)
	if state.recheck > 0 {
		h.clusters.EnqueueAfter(cluster.Namespace, cluster.Name, state.recheck)
	}
	return nil
}

// clusterReadiness is what readiness decides: the Ready condition, the display state
// when it is not the worst BundleDeployment's, and when to look again.
type clusterReadiness struct {
	state   string
	status  corev1.ConditionStatus
	reason  string
	message string
	// recheck is when the cluster would turn offline without another check-in.
	recheck time.Duration
}

// readiness decides a Cluster's Ready condition at now from when its agent was last
// seen (zero: never), whether its agent bundle has a BundleDeployment, and the
// summary of its BundleDeployments.
func readiness(now, seen time.Time, offlineAfter time.Duration, agentBundle bool, s *bundlestate.Summary) clusterReadiness {
	switch {
	case seen.IsZero():
		return clusterReadiness{state: StateWaitCheckIn, status: corev1.ConditionFalse, reason: StateWaitCheckIn,
			message: "waiting for the cluster's agent to register and check in"}
	case now.Sub(seen) >= offlineAfter:
		return clusterReadiness{state: ReasonOffline, status: corev1.ConditionUnknown, reason: ReasonOffline,
			// Written once, when the cluster goes offline: the message says nothing
			// that stops being true while it stays offline.
			message: fmt.Sprintf("the agent has not checked in since %s, more than %s ago", seen.UTC().Format(time.RFC3339), offlineAfter)}
	}
	r := clusterReadiness{recheck: offlineAfter - now.Sub(seen) + time.Second}
	switch {
	case !agentBundle:
		// An agent that checks in the moment it is granted is ahead of its agent
		// bundle: the cluster is Ready once the agent manages itself.
		r.state, r.status, r.reason, r.message = ReasonWaitAgentBundle, corev1.ConditionFalse, ReasonWaitAgentBundle, "waiting for the cluster's agent bundle to be deployed"
	case s.AllReady():
		r.status = corev1.ConditionTrue
	default:
		r.status, r.reason, r.message = corev1.ConditionFalse, ReasonBundlesNotReady, s.NotReadyMessage("Bundle")
	}
	return r
}

// announce records an event when the cluster's status goes from base to status and
// that means its agent checked in for the first time, went offline or came back.
func (h *handler) announce(cluster *fleet.Cluster, base fleet.ClusterStatus, status *fleet.ClusterStatus) {
	before := conditions.Get(base.Conditions, fleet.ConditionReady)
	after := conditions.Get(status.Conditions, fleet.ConditionReady)
	if after == nil || (before != nil && before.Reason == after.Reason) {
		return
	}
	switch {
	case after.Reason == ReasonOffline:
		h.events.Event(cluster, corev1.EventTypeWarning, ReasonOffline, "The cluster is offline: "+after.Message)
	case after.Reason == ReasonNamespaceNotOwned:
		h.events.Event(cluster, corev1.EventTypeWarning, ReasonNamespaceNotOwned, after.Message)
	case before != nil && before.Reason == ReasonOffline:
		h.events.Event(cluster, corev1.EventTypeNormal, "AgentCheckedIn", "The cluster's agent checked in again; the cluster is online")
	case before == nil || before.Reason == StateWaitCheckIn:
		h.events.Event(cluster, corev1.EventTypeNormal, "AgentCheckedIn", "The cluster's agent checked in")
	}
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
