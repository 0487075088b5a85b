package registration

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// Someone who may create namespaces makes the one a Cluster's per-cluster namespace
// will be named (names are predictable), labelled as the hub labels it, to read the
// BundleDeployments and identity the hub would put there. The hub uses no namespace
// it did not make for that Cluster: the Cluster says why it is not Ready, its agent's
// registration is refused with the same reason, and deleting the Cluster leaves the
// namespace and what is in it alone.
func TestTheHubNeitherUsesNorDeletesANamespaceItDidNotMake(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ctx := context.Background()
	kube := hub.Client()
	const cluster, clientID = "squatted", "squatted-client"
	squat := names.ClusterNamespace(workspace, cluster)
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: squat, Labels: map[string]string{
		names.ManagedLabel: "true", names.ClusterLabel: cluster, names.ClusterNamespaceLabel: workspace,
	}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := kube.CoreV1().ConfigMaps(squat).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "theirs"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	values, err := framework.ReadValues(hub.CreateToken(workspace, "token", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Create(ctx, &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: cluster}, Spec: fleet.ClusterSpec{ClientID: clientID},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	framework.Eventually(t, "the Cluster to say its namespace is not its own", timeout, func(ctx context.Context) error {
		c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, cluster, framework.Get)
		if err != nil {
			return err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == corev1.ConditionFalse && cond.Reason == "NamespaceNotOwned" {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", c.Status.Conditions)
	})
	waitEvent(t, hub, cluster, "NamespaceNotOwned")

	_, client := asIdentity(t, hub, values.Token)
	req, _, err := sendRequest(ctx, client, "token", clientID, nil, newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if granted, reason := waitAnswer(t, hub, req.Name); granted || reason != "NamespaceNotOwned" {
		t.Fatalf("the registration into a foreign namespace: granted=%v reason=%q, want refused NamespaceNotOwned", granted, reason)
	}
	if _, err := kube.CoreV1().ServiceAccounts(squat).Get(ctx, names.AgentIdentityServiceAccount, framework.Get); !apierrors.IsNotFound(err) {
		t.Fatalf("the hub made the identity in the foreign namespace (err=%v)", err)
	}

	if err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Delete(ctx, cluster, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the Cluster to be gone", timeout, func(ctx context.Context) error {
		if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, cluster, framework.Get); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (err=%v)", err)
		}
		return nil
	})
	ns, err := kube.CoreV1().Namespaces().Get(ctx, squat, framework.Get)
	if err != nil || ns.DeletionTimestamp != nil {
		t.Fatalf("the foreign namespace went with the Cluster: %v %v", err, ns.GetDeletionTimestamp())
	}
	if _, err := kube.CoreV1().ConfigMaps(squat).Get(ctx, "theirs", framework.Get); err != nil {
		t.Fatalf("what the foreign namespace held: %v", err)
	}
}
