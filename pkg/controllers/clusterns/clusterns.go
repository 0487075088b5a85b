// Package clusterns creates the per-cluster namespace on the hub: where a Cluster's
// BundleDeployments and identity live, and all its agent can read.
package clusterns

import (
	"context"
	"fmt"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/controllers/recent"
	"github.com/flotilla/flotilla/pkg/names"
)

// Ensurer creates per-cluster namespaces that its cache does not show yet.
type Ensurer struct {
	Namespaces corecontrollers.NamespaceController
	// created remembers the namespaces this process created, until the cache shows them.
	created recent.Created
}

// Register forgets a per-cluster namespace's creation when the namespace is deleted,
// so that a Cluster registered again right away gets it created anew.
func (e *Ensurer) Register(ctx context.Context) {
	e.Namespaces.OnChange(ctx, "cluster-namespace-deleted", func(name string, ns *corev1.Namespace) (*corev1.Namespace, error) {
		if ns == nil {
			e.created.Forget(name)
		}
		return ns, nil
	})
}

// Name is the per-cluster namespace of cluster.
func Name(cluster *fleet.Cluster) string {
	return names.ClusterNamespace(cluster.Namespace, cluster.Name)
}

// ClusterOf names the Cluster whose per-cluster namespace is namespace, from the
// labels the hub gave the namespace when it made it; ok is false for any other
// namespace, or one the cache does not show.
func (e *Ensurer) ClusterOf(namespace string) (workspace, name string, ok bool) {
	ns, err := e.Namespaces.Cache().Get(namespace)
	if err != nil {
		return "", "", false
	}
	workspace, name = ns.Labels[names.ClusterNamespaceLabel], ns.Labels[names.ClusterLabel]
	if name == "" || names.ClusterNamespace(workspace, name) != namespace {
		return "", "", false
	}
	return workspace, name, true
}

// Ensure creates the per-cluster namespace of cluster if it does not exist.
func (e *Ensurer) Ensure(_ context.Context, cluster *fleet.Cluster) error {
	name := Name(cluster)
	if _, err := e.Namespaces.Cache().Get(name); err == nil {
		e.created.Forget(name)
		return nil
	}
	defer e.created.Lock(name)()
	if e.created.Has(name) {
		return nil
	}
	_, err := e.Namespaces.Create(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			names.ManagedLabel:          "true",
			names.ClusterLabel:          cluster.Name,
			names.ClusterNamespaceLabel: cluster.Namespace,
		},
	}})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s for Cluster %s/%s: %w", name, cluster.Namespace, cluster.Name, err)
	}
	e.created.Mark(name)
	return nil
}
