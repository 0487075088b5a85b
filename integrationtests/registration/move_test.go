package registration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/pkg/names"
)

// movedBundle deploys a ConfigMap to every cluster of the workspace.
const movedBundle = `kind: Bundle
apiVersion: fleet.cattle.io/v1alpha1
metadata:
  name: moved-app
  namespace: ` + workspace + `
spec:
  defaultNamespace: moved-app
  resources:
  - name: cm.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: moved-app
      data:
        from: the first hub
  targets:
  - clusterSelector: {}
`

// waitBundleReady waits until the BundleDeployment of Bundle bundle for the Cluster
// named cluster on hub is Ready.
func waitBundleReady(t *testing.T, hub *framework.Hub, cluster, bundle string) {
	t.Helper()
	framework.Eventually(t, "Bundle "+bundle+" to be Ready on "+cluster, timeout, func(ctx context.Context) error {
		c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, cluster, framework.Get)
		if err != nil || c.Status.Namespace == "" {
			return fmt.Errorf("cluster %s: %v", cluster, err)
		}
		bd, err := hub.Fleet().FleetV1alpha1().BundleDeployments(c.Status.Namespace).Get(ctx, bundle, framework.Get)
		if err != nil {
			return err
		}
		for _, cond := range bd.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == corev1.ConditionTrue {
				return nil
			}
		}
		return fmt.Errorf("BundleDeployment %s/%s: %+v", bd.Namespace, bd.Name, bd.Status.Conditions)
	})
}

// TestMoveAClusterToAnotherHub: `hub cluster move` moves a registered cluster with a
// deployed Bundle to another hub while its agent runs: the agent proves its key to
// the new hub and checks in there, its workload stays (the same ConfigMap, taken
// over by the new hub's BundleDeployment of the same Bundle; another Bundle's, which
// the new hub lacks, left in place), and the old hub forgets the cluster. Who may
// only edit Clusters may not move one; a token like the move token, used from
// another cluster with another key, is refused.
func TestMoveAClusterToAnotherHub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	oldHub := framework.StartHub(t)
	newHub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "moving")
	framework.InstallAgent(t, ds, oldHub.CreateToken(workspace, "first", ""))
	agent := framework.StartAgent(t, ds)
	name := waitRegistered(t, ds).ClusterName
	waitReady(t, oldHub, name)
	oldHub.MustKubectl(movedBundle, "apply", "-f", "-")
	oldOnly := strings.ReplaceAll(movedBundle, "moved-app", "old-only")
	oldHub.MustKubectl(oldOnly, "apply", "-f", "-")
	waitBundleReady(t, oldHub, name, "moved-app")
	waitBundleReady(t, oldHub, name, "old-only")
	before, err := ds.Client().CoreV1().ConfigMaps("moved-app").Get(ctx, "moved-app", framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	oldCluster, err := oldHub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, name, framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	// Who may only edit Clusters may not move one.
	editor := serviceAccountToken(t, oldHub.Client(), workspace, "editor",
		rbacv1.PolicyRule{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"clusters"}, Verbs: []string{"get", "update", "patch"}})
	_, asEditor := oldHub.As(editor)
	clusters := asEditor.FleetV1alpha1().Clusters(workspace)
	relabel := []byte(`{"metadata":{"labels":{"env":"moving"}}}`)
	if _, err := clusters.Patch(ctx, name, types.MergePatchType, relabel, metav1.PatchOptions{}); err != nil {
		t.Fatalf("the editor labelling the Cluster: %v", err)
	}
	hijack := []byte(`{"metadata":{"annotations":{"` + names.MoveToAnnotation + `":"{\"token\":\"t\",\"apiServerURL\":\"https://evil.example.com\",\"clusterNamespace\":\"x\",\"systemRegistrationNamespace\":\"y\"}"}}}`)
	if _, err := clusters.Patch(ctx, name, types.MergePatchType, hijack, metav1.PatchOptions{}); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "takes the verb move") {
		t.Fatalf("the editor moving the Cluster to its own hub: %v, want Forbidden", err)
	}

	// The new hub has the same Bundle, as a GitRepo moved with the cluster would make.
	newHub.MustKubectl("", "create", "namespace", workspace)
	newHub.MustKubectl(strings.Replace(movedBundle, "the first hub", "the new hub", 1), "apply", "-f", "-")

	out, err := tryHub(t, oldHub, "cluster", "move", name, "-n", workspace, "--to-kubeconfig", newHub.Kubeconfig, "--wait", "3m")
	t.Logf("hub cluster move:\n%s", out)
	if err != nil || !strings.Contains(out, "Moved: deleted Cluster "+workspace+"/"+name) {
		t.Fatalf("hub cluster move: %v\n%s\nagent:\n%s", err, out, agent.Log())
	}

	moved := waitReady(t, newHub, name)
	if cred := framework.Identity(t, ds); cred.DeploymentNamespace != moved.Status.Namespace || cred.ClusterName != name {
		t.Errorf("the agent's identity is for %s/%s, want the new hub's %s", cred.ClusterName, cred.DeploymentNamespace, moved.Status.Namespace)
	}
	waitBundleReady(t, newHub, name, "moved-app")
	framework.Eventually(t, "the new hub's Bundle to take the ConfigMap over", timeout, func(ctx context.Context) error {
		after, err := ds.Client().CoreV1().ConfigMaps("moved-app").Get(ctx, "moved-app", framework.Get)
		switch {
		case err != nil:
			return err
		case after.UID != before.UID:
			return fmt.Errorf("the ConfigMap was deleted and made again (UID %s, was %s)", after.UID, before.UID)
		case after.Data["from"] != "the new hub":
			return fmt.Errorf("data %v", after.Data)
		}
		return nil
	})
	// A Bundle the new hub does not have: its release stays, neither the new hub's
	// nor removed.
	if _, err := ds.Client().CoreV1().ConfigMaps("old-only").Get(ctx, "old-only", framework.Get); err != nil {
		t.Errorf("the workload of the Bundle only the old hub had: %v", err)
	}
	select {
	case <-agent.Exited():
		t.Fatal("the agent exited during the move")
	default:
	}

	// The old hub forgot it: no Cluster, no per-cluster namespace.
	framework.Eventually(t, "the old hub to forget the cluster", timeout, func(ctx context.Context) error {
		if _, err := oldHub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, name, framework.Get); !apierrors.IsNotFound(err) {
			return fmt.Errorf("Cluster on the old hub: %v", err)
		}
		if _, err := oldHub.Client().CoreV1().Namespaces().Get(ctx, oldCluster.Status.Namespace, framework.Get); !apierrors.IsNotFound(err) {
			return fmt.Errorf("namespace %s on the old hub: %v", oldCluster.Status.Namespace, err)
		}
		return nil
	})
	if tokens, err := newHub.Fleet().FleetV1alpha1().ClusterRegistrationTokens(workspace).List(ctx, metav1.ListOptions{}); err != nil || len(tokens.Items) != 0 {
		t.Errorf("tokens left on the new hub: %v %v", tokens, err)
	}

	// A move token in other hands: another cluster claiming the clientID with its own
	// key is refused.
	stolen := newHub.CreateMoveToken(workspace, "stolen", name)
	thief := framework.StartControlPlane(t, "thief")
	framework.InstallAgent(t, thief, stolen, "--set-string", "clientID="+moved.Spec.ClientID)
	thiefAgent := framework.StartAgent(t, thief)
	framework.Eventually(t, "the other key to be refused", timeout, func(context.Context) error {
		if !strings.Contains(thiefAgent.Log(), "KeyMismatch") {
			return fmt.Errorf("agent log:\n%s", thiefAgent.Log())
		}
		return nil
	})
	if c, err := newHub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, name, framework.Get); err != nil || c.Annotations[names.AgentKeyAnnotation] != oldCluster.Annotations[names.AgentKeyAnnotation] {
		t.Errorf("the moved Cluster's key: %v, %q want %q", err, c.Annotations[names.AgentKeyAnnotation], oldCluster.Annotations[names.AgentKeyAnnotation])
	}
}
