// Package clusterns creates the per-cluster namespace on the hub: where a Cluster's
// BundleDeployments and identity live, and all its agent can read.
package clusterns

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/controllers/recent"
	"github.com/flotilla/flotilla/pkg/names"
)

// Ensurer creates per-cluster namespaces that its cache does not show yet.
type Ensurer struct {
	Namespaces corecontrollers.NamespaceController
	// created remembers the namespaces this process created, until the cache shows them.
	created recent.Created
	// keys is the agent key each namespace this hub made (or annotated) a moment ago
	// names, for while the cache does not show it yet.
	keys sync.Map
}

// Register forgets a per-cluster namespace's creation when the namespace is deleted,
// so that a Cluster registered again right away gets it created anew.
func (e *Ensurer) Register(ctx context.Context) {
	e.Namespaces.OnChange(ctx, "cluster-namespace-deleted", func(name string, ns *corev1.Namespace) (*corev1.Namespace, error) {
		if ns == nil {
			e.created.Forget(name)
			e.keys.Delete(name)
		}
		return ns, nil
	})
}

// Name is the per-cluster namespace of cluster: the one its status records if that
// is its legacy name (made by a hub before 64-bit hashes), else ClusterNamespace.
func Name(cluster *fleet.Cluster) string {
	if legacy := names.LegacyClusterNamespace(cluster.Namespace, cluster.Name); cluster.Status.Namespace == legacy {
		return legacy
	}
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
	if name == "" || !names.IsClusterNamespaceOf(namespace, workspace, name) {
		return "", "", false
	}
	return workspace, name, true
}

// ReasonNotOwned is the reason of a condition, or of a refused registration, that a
// NotOwnedError stops.
const ReasonNotOwned = "NamespaceNotOwned"

// NotOwnedError says that a per-cluster namespace exists but was not made by the hub
// for this Cluster: someone else made it, or it belonged to an earlier Cluster of the
// same name. The hub neither uses nor deletes it.
type NotOwnedError struct {
	Namespace string
	Cluster   *fleet.Cluster
}

func (e *NotOwnedError) Error() string {
	return fmt.Sprintf("the namespace %s exists but is not Cluster %s/%s's (it lacks the label %s=%s the hub gives the namespaces it makes): "+
		"the hub will not use it; delete it, or give the Cluster another name",
		e.Namespace, e.Cluster.Namespace, e.Cluster.Name, names.ClusterUIDLabel, e.Cluster.UID)
}

// Owns says whether ns is cluster's per-cluster namespace as the hub made it: named
// for it and labelled with its UID. A namespace of the legacy form made by an earlier
// hub, which labelled it with the Cluster's workspace and name only, counts too.
func Owns(ns *corev1.Namespace, cluster *fleet.Cluster) bool {
	if ns.Name != Name(cluster) {
		return false
	}
	if uid, ok := ns.Labels[names.ClusterUIDLabel]; ok {
		return uid == string(cluster.UID)
	}
	return ns.Name == names.LegacyClusterNamespace(cluster.Namespace, cluster.Name) &&
		ns.Labels[names.ClusterLabel] == cluster.Name && ns.Labels[names.ClusterNamespaceLabel] == cluster.Namespace
}

// Ensure creates the per-cluster namespace of cluster if it does not exist. It returns
// a *NotOwnedError if a namespace of that name exists that is not the Cluster's.
func (e *Ensurer) Ensure(ctx context.Context, cluster *fleet.Cluster) error {
	_, err := e.ensure(cluster)
	return err
}

// EnsureKey ensures the per-cluster namespace of cluster, as Ensure does, and that it
// names the agent key fingerprint (names.AgentKeyAnnotation): the API server's
// identity authorizer accepts a cluster's certificates only for the key its
// namespace names. A namespace made for a Cluster that records its key already names
// it, so a new cluster costs no write here.
func (e *Ensurer) EnsureKey(ctx context.Context, cluster *fleet.Cluster, fingerprint string) error {
	has, err := e.ensure(cluster)
	if err != nil || has == fingerprint {
		return err
	}
	name := Name(cluster)
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{names.AgentKeyAnnotation: fingerprint}}})
	if err != nil {
		return err
	}
	if _, err := e.Namespaces.Patch(name, types.MergePatchType, patch); err != nil {
		return fmt.Errorf("recording the agent key on namespace %s: %w", name, err)
	}
	e.keys.Store(name, fingerprint)
	return nil
}

// ensure makes the namespace exist and returns the key it names, as far as the hub
// knows.
func (e *Ensurer) ensure(cluster *fleet.Cluster) (string, error) {
	name := Name(cluster)
	if ns, err := e.Namespaces.Cache().Get(name); err == nil {
		e.created.Forget(name)
		e.keys.Delete(name)
		if !Owns(ns, cluster) {
			return "", &NotOwnedError{Namespace: name, Cluster: cluster}
		}
		return ns.Annotations[names.AgentKeyAnnotation], nil
	}
	defer e.created.Lock(name)()
	if e.created.Has(name) {
		key, _ := e.keys.Load(name)
		has, _ := key.(string)
		return has, nil
	}
	key := cluster.Annotations[names.AgentKeyAnnotation]
	namespace := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name,
		Labels: map[string]string{
			names.ManagedLabel:          "true",
			names.ClusterLabel:          cluster.Name,
			names.ClusterNamespaceLabel: cluster.Namespace,
			names.ClusterUIDLabel:       string(cluster.UID),
		},
	}}
	if key != "" {
		namespace.Annotations = map[string]string{names.AgentKeyAnnotation: key}
	}
	_, err := e.Namespaces.Create(namespace)
	if apierrors.IsAlreadyExists(err) {
		// Made since the cache looked: by this hub a moment ago, or by someone else.
		ns, err := e.Namespaces.Get(name, metav1.GetOptions{})
		if err != nil {
			return "", fmt.Errorf("reading namespace %s for Cluster %s/%s: %w", name, cluster.Namespace, cluster.Name, err)
		}
		if !Owns(ns, cluster) {
			return "", &NotOwnedError{Namespace: name, Cluster: cluster}
		}
		key = ns.Annotations[names.AgentKeyAnnotation]
	} else if err != nil {
		return "", fmt.Errorf("creating namespace %s for Cluster %s/%s: %w", name, cluster.Namespace, cluster.Name, err)
	}
	e.created.Mark(name)
	e.keys.Store(name, key)
	return key, nil
}

// Delete deletes cluster's per-cluster namespace if it is the Cluster's (Owns), and
// only that namespace: the deletion is conditioned on its UID.
func (e *Ensurer) Delete(ctx context.Context, cluster *fleet.Cluster) error {
	name := Name(cluster)
	ns, err := e.Namespaces.Get(name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	case !Owns(ns, cluster):
		logrus.WithField("cluster", cluster.Namespace+"/"+cluster.Name).Warnf("Not deleting namespace %s: it is not the Cluster's", name)
		return nil
	}
	err = e.Namespaces.Delete(name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &ns.UID}})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil
	}
	return err
}
