// Package capi imports Cluster API clusters: for every clusters.cluster.x-k8s.io object
// labelled fleet.cattle.io/auto-import=true it keeps a fleet.cattle.io Cluster of the
// same name whose kubeConfigSecret is the "<name>-kubeconfig" Secret Cluster API
// writes. It waits for the Cluster API CRD to appear, so a hub started before Cluster
// API was installed picks it up.
package capi

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/registration"
)

const (
	// Group is the Cluster API group.
	Group = "cluster.x-k8s.io"
	// AutoImportLabel on a Cluster API cluster asks the hub to import it.
	AutoImportLabel = "fleet.cattle.io/auto-import"
	// discoveryInterval is how often the hub looks for the Cluster API CRD.
	discoveryInterval = 10 * time.Second
)

// Run waits for the Cluster API clusters resource and then imports the labelled
// clusters until ctx ends.
func Run(ctx context.Context, disc discovery.DiscoveryInterface, client dynamic.Interface, clusters fleetcontrollers.ClusterController) {
	var gvr schema.GroupVersionResource
	for {
		found, err := clustersResource(disc)
		if err == nil && found != nil {
			gvr = *found
			break
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(discoveryInterval):
		}
	}
	logrus.WithField("resource", gvr.String()).Info("Cluster API found; importing clusters labelled " + AutoImportLabel + "=true")
	factory := dynamicinformer.NewFilteredDynamicSharedInformerFactory(client, 10*time.Minute, metav1.NamespaceAll, func(o *metav1.ListOptions) {
		o.LabelSelector = AutoImportLabel + "=true"
	})
	informer := factory.ForResource(gvr).Informer()
	sync := func(obj interface{}) {
		if u, ok := obj.(*unstructured.Unstructured); ok {
			if err := ensureCluster(clusters, u); err != nil {
				logrus.WithError(err).WithField("capiCluster", u.GetNamespace()+"/"+u.GetName()).Warn("Cannot import the Cluster API cluster")
			}
		}
	}
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    sync,
		UpdateFunc: func(_, obj interface{}) { sync(obj) },
	})
	factory.Start(ctx.Done())
	<-ctx.Done()
}

// clustersResource finds the preferred version of clusters.cluster.x-k8s.io.
func clustersResource(disc discovery.DiscoveryInterface) (*schema.GroupVersionResource, error) {
	groups, err := disc.ServerGroups()
	if err != nil {
		return nil, err
	}
	for _, g := range groups.Groups {
		if g.Name != Group {
			continue
		}
		version := g.PreferredVersion.Version
		resources, err := disc.ServerResourcesForGroupVersion(g.PreferredVersion.GroupVersion)
		if err != nil {
			return nil, err
		}
		for _, r := range resources.APIResources {
			if r.Name == "clusters" {
				return &schema.GroupVersionResource{Group: Group, Version: version, Resource: "clusters"}, nil
			}
		}
	}
	return nil, nil
}

// ensureCluster creates the fleet Cluster for a Cluster API cluster; it goes with the
// Cluster API cluster by owner reference.
func ensureCluster(clusters fleetcontrollers.ClusterController, capiCluster *unstructured.Unstructured) error {
	if _, err := clusters.Cache().Get(capiCluster.GetNamespace(), capiCluster.GetName()); err == nil {
		return nil
	}
	controller := true
	cluster := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name:      capiCluster.GetName(),
			Namespace: capiCluster.GetNamespace(),
			Labels:    registration.SanitizeLabels(capiCluster.GetLabels()),
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: capiCluster.GetAPIVersion(), Kind: capiCluster.GetKind(),
				Name: capiCluster.GetName(), UID: capiCluster.GetUID(), Controller: &controller,
			}},
		},
		Spec: fleet.ClusterSpec{KubeConfigSecret: capiCluster.GetName() + "-kubeconfig"},
	}
	_, err := clusters.Create(cluster)
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	if err == nil {
		logrus.WithField("cluster", cluster.Namespace+"/"+cluster.Name).Info("Imported a Cluster API cluster")
	}
	return nil
}
