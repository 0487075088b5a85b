// Package cluster is the Cluster controller: it keeps each Cluster's per-cluster
// namespace, reports whether its agent has registered and checked in (the Ready
// condition and the printed columns), and on deletion removes everything the hub made
// for the cluster.
package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/controllers/clusterns"
	"github.com/flotilla/flotilla/pkg/controllers/request"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// StateWaitCheckIn is the display state of a Cluster whose agent has not reported.
const StateWaitCheckIn = "WaitCheckIn"

type handler struct {
	clusters   fleetcontrollers.ClusterController
	requests   fleetcontrollers.ClusterRegistrationRequestController
	namespaces *clusterns.Ensurer
	kube       kubernetes.Interface
	events     record.EventRecorder
}

// Register starts handling Clusters. The requests cache must carry the
// request.ByClientID index (request.Register adds it).
func Register(ctx context.Context, clusters fleetcontrollers.ClusterController, requests fleetcontrollers.ClusterRegistrationRequestController,
	namespaces *clusterns.Ensurer, kube kubernetes.Interface, events record.EventRecorder) {
	h := &handler{clusters: clusters, requests: requests, namespaces: namespaces, kube: kube, events: events}
	clusters.OnChange(ctx, "cluster", h.onChange)
	clusters.OnRemove(ctx, names.ClusterCleanup, h.onRemove)
}

func (h *handler) onChange(_ string, cluster *fleet.Cluster) (*fleet.Cluster, error) {
	if cluster == nil || cluster.DeletionTimestamp != nil {
		return cluster, nil
	}
	if err := h.namespaces.Ensure(context.Background(), cluster); err != nil {
		return cluster, err
	}
	status := cluster.Status.DeepCopy()
	status.Namespace = clusterns.Name(cluster)
	if status.Agent.LastSeen.IsZero() {
		status.Display.State = StateWaitCheckIn
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, StateWaitCheckIn, "waiting for the cluster's agent to register and check in")
	} else {
		if status.Display.State == StateWaitCheckIn {
			status.Display.State = ""
		}
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
	}
	if equality.Semantic.DeepEqual(*status, cluster.Status) {
		return cluster, nil
	}
	if !conditions.IsTrue(cluster.Status.Conditions, fleet.ConditionReady) && conditions.IsTrue(status.Conditions, fleet.ConditionReady) {
		h.events.Event(cluster, corev1.EventTypeNormal, "AgentCheckedIn", "The cluster's agent checked in; the cluster is Ready")
	}
	updated := cluster.DeepCopy()
	updated.Status = *status
	return h.clusters.UpdateStatus(updated)
}

// onRemove deletes what the hub made for a Cluster outside its workspace's owner
// references: the per-cluster namespace (and with it the identity and the
// BundleDeployments), the Contents binding, credentials in the registration
// namespace, and its registration requests.
func (h *handler) onRemove(_ string, cluster *fleet.Cluster) (*fleet.Cluster, error) {
	ctx := context.Background()
	ns := clusterns.Name(cluster)
	var errs []error
	errs = append(errs, ignoreNotFound(h.kube.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})))
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

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
