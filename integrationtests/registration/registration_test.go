// Package registration tests agent-initiated registration as users do it (journeys
// J1, J2 and J5): tokens, the fleet-agent chart installed with helm, the agent run as
// its Deployment would run it, against a real hub and real downstream control planes.
package registration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

const (
	workspace = "clusters"
	timeout   = 2 * time.Minute
)

func identity(t *testing.T, ds *framework.Cluster) registration.Credential {
	return framework.Identity(t, ds)
}

// waitRegistered waits until the downstream bootstrap Secret is gone and the identity
// Secret exists, and returns the identity.
func waitRegistered(t *testing.T, ds *framework.Cluster) registration.Credential {
	t.Helper()
	client := ds.Client()
	framework.Eventually(t, ds.Name+" to register", timeout, func(ctx context.Context) error {
		if _, err := client.CoreV1().Secrets(names.SystemNamespace).Get(ctx, names.AgentBootstrapSecret, framework.Get); !apierrors.IsNotFound(err) {
			return fmt.Errorf("bootstrap Secret still there (err=%v)", err)
		}
		return framework.Registered(ctx, ds)
	})
	return identity(t, ds)
}

// waitAgentBundleDeployed waits until the agent bundle has upgraded the agent's
// release once: Helm then deletes the bootstrap Secret of the chart's first revision,
// and a bootstrap Secret a test creates before that would go with it.
func waitAgentBundleDeployed(t *testing.T, ds *framework.Cluster) {
	t.Helper()
	framework.Eventually(t, "the agent bundle to upgrade the agent's release", timeout, func(ctx context.Context) error {
		releases, err := ds.Client().CoreV1().Secrets(names.SystemNamespace).List(ctx, metav1.ListOptions{LabelSelector: "owner=helm,name=" + names.AgentRelease + ",status=deployed"})
		if err != nil || len(releases.Items) != 1 || releases.Items[0].Labels["version"] == "1" {
			return fmt.Errorf("not yet (%d deployed releases, err=%v)", len(releases.Items), err)
		}
		return nil
	})
}

// waitReady waits until the Cluster is Ready, and returns it.
func waitReady(t *testing.T, hub *framework.Hub, name string) *fleet.Cluster {
	t.Helper()
	var cluster *fleet.Cluster
	client := hub.Fleet()
	framework.Eventually(t, "Cluster "+name+" to be Ready", timeout, func(ctx context.Context) error {
		c, err := client.FleetV1alpha1().Clusters(workspace).Get(ctx, name, framework.Get)
		if err != nil {
			return err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Ready" && cond.Status == corev1.ConditionTrue {
				cluster = c
				return nil
			}
		}
		return fmt.Errorf("not Ready: %+v", c.Status.Conditions)
	})
	return cluster
}

// asIdentity is a client for the hub that authenticates with token.
func asIdentity(t *testing.T, hub *framework.Hub, token string) (kubernetes.Interface, versioned.Interface) {
	return hub.As(token)
}

func TestAgentRegistersWithToken(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	a := framework.StartControlPlane(t, "downstream-a")
	b := framework.StartControlPlane(t, "downstream-b")
	values := hub.CreateToken(workspace, "new-token", "240h")

	agents := map[string]*framework.Process{}
	for _, ds := range []*framework.Cluster{a, b} {
		framework.InstallAgent(t, ds, values, "--set-string", "labels.example=true", "--set-string", "labels.env=dev",
			"--set-string", "labels.fleet\\.cattle\\.io/spoofed=yes", "--set-string", "labels.management\\.cattle\\.io/x=y")
		agents[ds.Name] = framework.StartAgent(t, ds)
	}
	creds := map[string]registration.Credential{}
	for _, ds := range []*framework.Cluster{a, b} {
		creds[ds.Name] = waitRegistered(t, ds)
	}
	if creds[a.Name].ClusterName == creds[b.Name].ClusterName {
		t.Fatalf("both clusters registered into %s", creds[a.Name].ClusterName)
	}

	for _, ds := range []*framework.Cluster{a, b} {
		cred := creds[ds.Name]
		kubeSystem, err := ds.Client().CoreV1().Namespaces().Get(context.Background(), "kube-system", framework.Get)
		if err != nil {
			t.Fatal(err)
		}
		if want := names.ClusterForClientID(string(kubeSystem.UID)); cred.ClusterName != want {
			t.Errorf("%s registered as %s, want %s (cluster-<hash of the kube-system UID>)", ds.Name, cred.ClusterName, want)
		}
		cluster := waitReady(t, hub, cred.ClusterName)
		if cluster.Labels["example"] != "true" || cluster.Labels["env"] != "dev" {
			t.Errorf("Cluster %s labels %v, want example=true env=dev", cluster.Name, cluster.Labels)
		}
		for key := range cluster.Labels {
			if strings.Contains(key, "fleet.cattle.io/") || strings.Contains(key, "management.cattle.io/") {
				t.Errorf("Cluster %s carries the spoofed label %s", cluster.Name, key)
			}
		}
		if cluster.Status.Namespace != names.ClusterNamespace(workspace, cluster.Name) || cluster.Status.Agent.LastSeen.IsZero() {
			t.Errorf("Cluster %s status: namespace %q, lastSeen %v", cluster.Name, cluster.Status.Namespace, cluster.Status.Agent.LastSeen)
		}
	}

	out := hub.MustKubectl("", "-n", workspace, "get", "clusters.fleet.cattle.io")
	for _, cred := range creds {
		if !strings.Contains(out, cred.ClusterName) {
			t.Errorf("kubectl get clusters does not list %s:\n%s", cred.ClusterName, out)
		}
	}

	// Restarting an agent re-uses its stored identity: no new request, same Cluster.
	before, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationRequests(workspace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	agents[a.Name].Stop()
	agents[a.Name].Restart()
	framework.Eventually(t, "the restarted agent to check in", timeout, func(ctx context.Context) error {
		if !strings.Contains(agents[a.Name].Log(), "Starting the agent") {
			return fmt.Errorf("not started")
		}
		c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, creds[a.Name].ClusterName, framework.Get)
		if err != nil {
			return err
		}
		if restarted := strings.Count(agents[a.Name].Log(), "Starting the agent"); restarted < 2 {
			return fmt.Errorf("agent started %d times", restarted)
		}
		if !c.Status.Agent.LastSeen.After(time.Now().Add(-5 * time.Second)) {
			return fmt.Errorf("last seen %v", c.Status.Agent.LastSeen)
		}
		return nil
	})
	after, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationRequests(workspace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != len(before.Items) {
		t.Fatalf("restarting the agent made a new request: %d before, %d after", len(before.Items), len(after.Items))
	}
	if got := identity(t, a); got.ClusterName != creds[a.Name].ClusterName {
		t.Fatalf("after restart the agent is %s, was %s", got.ClusterName, creds[a.Name].ClusterName)
	}
}

func TestAgentJoinsPredefinedCluster(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "downstream")
	values := hub.CreateToken(workspace, "new-token", "240h")
	hub.MustKubectl(`kind: Cluster
apiVersion: fleet.cattle.io/v1alpha1
metadata:
  name: my-cluster
  namespace: clusters
spec:
  clientID: "really-random"
`, "apply", "-f", "-")

	framework.InstallAgent(t, ds, values, "--set", "clientID=really-random")
	framework.StartAgent(t, ds)
	cred := waitRegistered(t, ds)
	if cred.ClusterName != "my-cluster" {
		t.Fatalf("the agent registered as %s, want my-cluster", cred.ClusterName)
	}
	waitReady(t, hub, "my-cluster")
	clusters, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(clusters.Items) != 1 {
		t.Fatalf("%d Clusters in %s, want only my-cluster", len(clusters.Items), workspace)
	}
}

func TestExpiredTokenIsRevoked(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "downstream")
	values := hub.CreateToken(workspace, "short", "1m")
	client := hub.Client()
	ctx := context.Background()
	sa, err := client.CoreV1().ServiceAccounts(workspace).Get(ctx, names.TokenServiceAccount("short"), framework.Get)
	if err != nil {
		t.Fatalf("the token's ServiceAccount: %v", err)
	}
	raw, err := framework.ReadValues(values)
	if err != nil {
		t.Fatal(err)
	}
	tokenClient, _ := asIdentity(t, hub, raw.Token)

	framework.Eventually(t, "the token to be deleted at expiry", 2*time.Minute, func(ctx context.Context) error {
		if _, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationTokens(workspace).Get(ctx, "short", framework.Get); !apierrors.IsNotFound(err) {
			return fmt.Errorf("token still there (err=%v)", err)
		}
		if _, err := client.CoreV1().Secrets(workspace).Get(ctx, "short", framework.Get); !apierrors.IsNotFound(err) {
			return fmt.Errorf("values Secret still there (err=%v)", err)
		}
		if _, err := client.CoreV1().ServiceAccounts(workspace).Get(ctx, sa.Name, framework.Get); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ServiceAccount still there (err=%v)", err)
		}
		return nil
	})
	// The credential itself is revoked, not just hidden.
	if _, err = tokenClient.CoreV1().Namespaces().Get(ctx, workspace, framework.Get); !apierrors.IsUnauthorized(err) {
		t.Fatalf("the expired token still authenticates (err=%v)", err)
	}

	framework.InstallAgent(t, ds, values)
	agent := framework.StartAgent(t, ds)
	framework.Eventually(t, "the agent to say why it cannot register", timeout, func(context.Context) error {
		log := agent.Log()
		if strings.Contains(log, "401 Unauthorized") && strings.Contains(log, `refused registration token \"short\" (401 Unauthorized): the ClusterRegistrationToken has expired or been deleted`) {
			return nil
		}
		return fmt.Errorf("agent log does not explain the refusal yet:\n%s", log)
	})
	clusters, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(clusters.Items) != 0 {
		t.Fatalf("an expired token registered %d clusters", len(clusters.Items))
	}
}

func TestReRegisteringLeavesOneSetOfObjects(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "downstream")
	values := hub.CreateToken(workspace, "new-token", "240h")
	framework.InstallAgent(t, ds, values)
	// Keep the bootstrap values to hand them to the agent again and again.
	bootstrap, err := ds.Client().CoreV1().Secrets(names.SystemNamespace).Get(context.Background(), names.AgentBootstrapSecret, framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	framework.StartAgent(t, ds)
	first := waitRegistered(t, ds)
	ctx := context.Background()
	waitAgentBundleDeployed(t, ds)

	previous := first
	for i := 0; i < 20; i++ {
		again := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: bootstrap.Name, Namespace: bootstrap.Namespace}, Data: bootstrap.Data}
		if _, err := ds.Client().CoreV1().Secrets(names.SystemNamespace).Create(ctx, again, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		framework.Eventually(t, fmt.Sprintf("re-registration %d", i+1), timeout, func(ctx context.Context) error {
			if _, err := ds.Client().CoreV1().Secrets(names.SystemNamespace).Get(ctx, names.AgentBootstrapSecret, framework.Get); !apierrors.IsNotFound(err) {
				return fmt.Errorf("bootstrap Secret not consumed yet")
			}
			if credID(identity(t, ds)) == credID(previous) {
				return fmt.Errorf("identity not replaced yet")
			}
			return nil
		})
		current := identity(t, ds)
		if current.ClusterName != first.ClusterName {
			t.Fatalf("re-registration %d moved the agent to Cluster %s", i+1, current.ClusterName)
		}
		previous = current
	}

	// The Cluster tells why its credential changed.
	framework.Eventually(t, "a Reregistered event on the Cluster", timeout, func(ctx context.Context) error {
		events, err := hub.Client().CoreV1().Events(first.ClusterNamespace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Cluster,involvedObject.name=" + first.ClusterName + ",reason=Reregistered"})
		if err != nil || len(events.Items) == 0 {
			return fmt.Errorf("none yet (%v)", err)
		}
		return nil
	})

	// The identity of the first registration no longer works (the API server caches a
	// token's validity for 10 seconds). A certificate for the same key stays valid
	// until it expires: only this agent, which holds the key, can use it.
	if first.HasCertificate() {
		if _, fleetClient := hub.AsCluster(ds, names.SystemNamespace, first); true {
			if _, err := fleetClient.FleetV1alpha1().BundleDeployments(first.DeploymentNamespace).List(ctx, metav1.ListOptions{}); err != nil {
				t.Errorf("the first certificate, for the same key, stopped working: %v", err)
			}
		}
	}
	_, oldFleet := asIdentity(t, hub, first.Token)
	framework.Eventually(t, "the replaced identity to stop working", 30*time.Second, func(ctx context.Context) error {
		if first.HasCertificate() {
			return nil
		}
		if _, err := oldFleet.FleetV1alpha1().BundleDeployments(first.DeploymentNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
			return fmt.Errorf("the replaced credential still authenticates (err=%v)", err)
		}
		return nil
	})

	framework.Eventually(t, "exactly one set of registration objects", timeout, func(ctx context.Context) error {
		counts := countRegistrationObjects(ctx, t, hub, first)
		for what, n := range counts {
			want := 1
			switch what {
			case "credential roles and rolebindings":
				want = 0 // a registration adds no RBAC there: one binding per token
			case "credential secrets":
				want = 0 // the agent deletes its credential once it has read it
			case "identity serviceaccounts":
				if first.HasCertificate() {
					want = 0 // a certificate identity has none
				}
			}
			if n != want {
				return fmt.Errorf("%d %s, want %d (all: %v)", n, what, want, counts)
			}
		}
		return nil
	})
}

// countRegistrationObjects counts, on the hub, what registrations of cred's cluster
// left behind.
func countRegistrationObjects(ctx context.Context, t *testing.T, hub *framework.Hub, cred registration.Credential) map[string]int {
	t.Helper()
	kube, fleetClient := hub.Client(), hub.Fleet()
	counts := map[string]int{}
	reqs, err := fleetClient.FleetV1alpha1().ClusterRegistrationRequests(cred.ClusterNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts["requests"] = len(reqs.Items)
	clusters, err := fleetClient.FleetV1alpha1().Clusters(cred.ClusterNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	counts["clusters"] = len(clusters.Items)
	selector := metav1.ListOptions{LabelSelector: names.ClusterLabel + "=" + cred.ClusterName}
	secrets, _ := kube.CoreV1().Secrets(names.RegistrationNamespace).List(ctx, selector)
	roles, _ := kube.RbacV1().Roles(names.RegistrationNamespace).List(ctx, selector)
	bindings, _ := kube.RbacV1().RoleBindings(names.RegistrationNamespace).List(ctx, selector)
	counts["credential secrets"] = len(secrets.Items)
	// A registration adds no RBAC to the registration namespace (one binding per token).
	counts["credential roles and rolebindings"] = len(roles.Items) + len(bindings.Items)
	sas, _ := kube.CoreV1().ServiceAccounts(cred.DeploymentNamespace).List(ctx, metav1.ListOptions{})
	identities := 0
	for _, sa := range sas.Items {
		if sa.Name == names.AgentIdentityServiceAccount {
			identities++
		}
	}
	counts["identity serviceaccounts"] = identities
	return counts
}

// The hub runs against a control plane that authorizes like any other cluster, so
// that it creates RBAC objects for the identity, and they must go too.
func TestDeletingAClusterLeavesNothing(t *testing.T) {
	t.Parallel()
	hub := framework.StartForeignHub(t)
	ds := framework.StartControlPlane(t, "downstream")
	values := hub.CreateToken(workspace, "new-token", "240h")
	framework.InstallAgent(t, ds, values)
	agent := framework.StartAgent(t, ds)
	cred := waitRegistered(t, ds)
	waitReady(t, hub, cred.ClusterName)
	agent.Stop()

	ctx := context.Background()
	if _, err := hub.Client().RbacV1().ClusterRoleBindings().Get(ctx, names.ContentsBinding(cred.DeploymentNamespace), framework.Get); err != nil {
		t.Fatalf("the hub made no Contents ClusterRoleBinding for the identity on a cluster that needs one: %v", err)
	}
	if err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Delete(ctx, cred.ClusterName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	kube := hub.Client()
	framework.Eventually(t, "everything of the deleted Cluster to be gone", timeout, func(ctx context.Context) error {
		var left []string
		if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, cred.ClusterName, framework.Get); !apierrors.IsNotFound(err) {
			left = append(left, "the Cluster")
		}
		if _, err := kube.CoreV1().Namespaces().Get(ctx, cred.DeploymentNamespace, framework.Get); !apierrors.IsNotFound(err) {
			left = append(left, "namespace "+cred.DeploymentNamespace)
		}
		if _, err := kube.RbacV1().ClusterRoleBindings().Get(ctx, names.ContentsBinding(cred.DeploymentNamespace), framework.Get); !apierrors.IsNotFound(err) {
			left = append(left, "the Contents ClusterRoleBinding")
		}
		if _, err := kube.RbacV1().Roles(workspace).Get(ctx, names.ClusterStatusRole(cred.ClusterName), framework.Get); !apierrors.IsNotFound(err) {
			left = append(left, "the status Role")
		}
		if _, err := kube.RbacV1().RoleBindings(workspace).Get(ctx, names.ClusterStatusRole(cred.ClusterName), framework.Get); !apierrors.IsNotFound(err) {
			left = append(left, "the status RoleBinding")
		}
		for what, n := range countRegistrationObjects(ctx, t, hub, cred) {
			if n != 0 && what != "identity serviceaccounts" {
				left = append(left, fmt.Sprintf("%d %s", n, what))
			}
		}
		if len(left) > 0 {
			return fmt.Errorf("left behind: %s", strings.Join(left, ", "))
		}
		return nil
	})
}

// Cluster identities are isolated both where the hub's control plane authorizes them
// and where RBAC objects do.
func TestClusterIdentitiesAreIsolated(t *testing.T) {
	t.Parallel()
	t.Run("identity authorizer", func(t *testing.T) {
		t.Parallel()
		testIdentitiesAreIsolated(t, framework.StartHub(t), 0, true)
	})
	t.Run("RBAC objects", func(t *testing.T) {
		t.Parallel()
		testIdentitiesAreIsolated(t, framework.StartForeignHub(t), 5, false)
	})
}

// testIdentitiesAreIsolated registers two clusters with hub, which makes rbacObjects
// RBAC objects for each identity (and its recovery ServiceAccount), and checks what one identity may do, and whether
// the registration token may watch a credential Secret it may get.
func testIdentitiesAreIsolated(t *testing.T, hub *framework.Hub, rbacObjects int, credentialWatch bool) {
	a := framework.StartControlPlane(t, "downstream-a")
	b := framework.StartControlPlane(t, "downstream-b")
	values := hub.CreateToken(workspace, "new-token", "240h")
	for _, ds := range []*framework.Cluster{a, b} {
		framework.InstallAgent(t, ds, values)
		framework.StartAgent(t, ds)
	}
	credA, credB := waitRegistered(t, a), waitRegistered(t, b)
	waitReady(t, hub, credA.ClusterName)
	ctx := context.Background()
	kubeA, fleetA := hub.AsCluster(a, names.SystemNamespace, credA)

	// What A may do: its own BundleDeployments, its own Cluster's status.
	if _, err := fleetA.FleetV1alpha1().BundleDeployments(credA.DeploymentNamespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("A cannot list its own BundleDeployments: %v", err)
	}
	patch := []byte(`{"status":{"agent":{"namespace":"cattle-fleet-system"}}}`)
	if _, err := fleetA.FleetV1alpha1().Clusters(workspace).Patch(ctx, credA.ClusterName, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Errorf("A cannot patch its own Cluster's status: %v", err)
	}

	contents, err := hub.Fleet().FleetV1alpha1().Contents().List(ctx, metav1.ListOptions{})
	if err != nil || len(contents.Items) == 0 {
		t.Fatalf("no Content to read (%v)", err)
	}
	if _, err := fleetA.FleetV1alpha1().Contents().Get(ctx, contents.Items[0].Name, framework.Get); err != nil {
		t.Errorf("A cannot get a Content by name: %v", err)
	}
	selector := metav1.ListOptions{LabelSelector: names.ClusterLabel + "=" + credA.ClusterName}
	made := 0
	roles, err := hub.Client().RbacV1().Roles("").List(ctx, selector)
	made += len(roles.Items)
	bindings, err2 := hub.Client().RbacV1().RoleBindings("").List(ctx, selector)
	made += len(bindings.Items)
	clusterBindings, err3 := hub.Client().RbacV1().ClusterRoleBindings().List(ctx, selector)
	made += len(clusterBindings.Items)
	if err := errors.Join(err, err2, err3); err != nil || made != rbacObjects {
		t.Errorf("the hub made %d RBAC objects for A's identity, want %d (%v)", made, rbacObjects, err)
	}

	forbidden := map[string]error{}
	_, forbidden["list B's BundleDeployments"] = fleetA.FleetV1alpha1().BundleDeployments(credB.DeploymentNamespace).List(ctx, metav1.ListOptions{})
	_, forbidden["get B's Cluster"] = fleetA.FleetV1alpha1().Clusters(workspace).Get(ctx, credB.ClusterName, framework.Get)
	_, forbidden["patch B's Cluster status"] = fleetA.FleetV1alpha1().Clusters(workspace).Patch(ctx, credB.ClusterName, types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	_, forbidden["patch its own Cluster spec"] = fleetA.FleetV1alpha1().Clusters(workspace).Patch(ctx, credA.ClusterName, types.MergePatchType, []byte(`{"spec":{"paused":true}}`), metav1.PatchOptions{})
	_, forbidden["list Clusters"] = fleetA.FleetV1alpha1().Clusters(workspace).List(ctx, metav1.ListOptions{})
	// Of its own Cluster's status only status.agent, its heartbeat, is the agent's.
	for field, value := range map[string]string{"agentDeployedGeneration": "999", "conditions": "[]", "display": `{"state":"Forged by the agent"}`} {
		hubField := []byte(`{"status":{"` + field + `":` + value + `}}`)
		_, err := fleetA.FleetV1alpha1().Clusters(workspace).Patch(ctx, credA.ClusterName, types.MergePatchType, hubField, metav1.PatchOptions{}, "status")
		if err == nil || !strings.Contains(err.Error(), "may change only status.agent") {
			t.Errorf("A patching status.%s of its own Cluster: %v, want it refused as not status.agent", field, err)
		}
		forbidden["patch status."+field+" of its own Cluster"] = err
	}
	// Agents delete their credential Secret once read: a third request, left
	// unread, stands for one.
	unread := unreadAnswer(t, hub, values, "unread")
	secretB := names.CredentialSecret(unread.Spec.ClientID, unread.Spec.ClientRandom)
	registrationValues, err := framework.ReadValues(values)
	if err != nil {
		t.Fatal(err)
	}
	kubeToken, _ := asIdentity(t, hub, registrationValues.Token)
	one := metav1.ListOptions{FieldSelector: "metadata.name=" + secretB, TimeoutSeconds: ptr.To(int64(1))}
	w, err := kubeToken.CoreV1().Secrets(names.RegistrationNamespace).Watch(ctx, one)
	switch {
	case credentialWatch && err != nil:
		t.Errorf("the registration token may not watch a credential Secret by name: %v", err)
	case !credentialWatch && !apierrors.IsForbidden(err):
		t.Errorf("the registration token may watch a credential Secret where RBAC alone decides (err=%v)", err)
	}
	if w != nil {
		w.Stop()
	}
	_, forbidden["get another cluster's credential Secret"] = kubeA.CoreV1().Secrets(names.RegistrationNamespace).Get(ctx, secretB, framework.Get)
	_, forbidden["list Secrets of its own namespace"] = kubeA.CoreV1().Secrets(credA.DeploymentNamespace).List(ctx, metav1.ListOptions{})
	_, forbidden["get a Secret in kube-system"] = kubeA.CoreV1().Secrets("kube-system").Get(ctx, "anything", framework.Get)
	_, forbidden["list Secrets of the workspace"] = kubeA.CoreV1().Secrets(workspace).List(ctx, metav1.ListOptions{})
	_, forbidden["the registration token watching every credential"] = kubeToken.CoreV1().Secrets(names.RegistrationNamespace).Watch(ctx, metav1.ListOptions{TimeoutSeconds: ptr.To(int64(1))})
	_, forbidden["the registration token listing every credential"] = kubeToken.CoreV1().Secrets(names.RegistrationNamespace).List(ctx, metav1.ListOptions{})
	_, forbidden["list Contents"] = fleetA.FleetV1alpha1().Contents().List(ctx, metav1.ListOptions{})
	_, forbidden["create a token for B's identity"] = kubeA.CoreV1().ServiceAccounts(credB.DeploymentNamespace).CreateToken(ctx, names.AgentIdentityServiceAccount, nil, metav1.CreateOptions{})
	_, forbidden["renew B's Lease"] = kubeA.CoordinationV1().Leases(credB.DeploymentNamespace).Patch(ctx, names.AgentLease, types.MergePatchType, []byte(`{"spec":{"renewTime":null}}`), metav1.PatchOptions{})
	_, forbidden["create a Lease in B's namespace"] = kubeA.CoordinationV1().Leases(credB.DeploymentNamespace).Create(ctx,
		&coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: names.AgentLease}}, metav1.CreateOptions{})
	_, forbidden["patch another Lease of its own namespace"] = kubeA.CoordinationV1().Leases(credA.DeploymentNamespace).Patch(ctx, "other", types.MergePatchType, []byte(`{}`), metav1.PatchOptions{})
	for what, err := range forbidden {
		if !apierrors.IsForbidden(err) {
			t.Errorf("cluster A could %s (err=%v), want 403 Forbidden", what, err)
		}
	}
}

func TestAgentRenewsItsTokenInPlace(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, "--agent-token-renew-after", "20s")
	ds := framework.StartControlPlane(t, "downstream")
	values := hub.CreateToken(workspace, "new-token", "240h")
	framework.InstallAgent(t, ds, values, "--set", "checkinInterval=3s")
	agent := framework.StartAgent(t, ds)
	cred := waitRegistered(t, ds)
	waitReady(t, hub, cred.ClusterName)

	tokens := map[string]bool{credID(cred): true}
	deadline := time.Now().Add(2 * time.Minute)
	ctx := context.Background()
	for time.Now().Before(deadline) {
		time.Sleep(3 * time.Second)
		select {
		case <-agent.Exited():
			t.Fatalf("the agent exited:\n%s", agent.Log())
		default:
		}
		current := identity(t, ds)
		if !tokens[credID(current)] {
			tokens[credID(current)] = true
			// The stored identity works for what the agent does.
			_, fleetClient := hub.AsCluster(ds, names.SystemNamespace, current)
			if _, err := fleetClient.FleetV1alpha1().BundleDeployments(current.DeploymentNamespace).List(ctx, metav1.ListOptions{}); err != nil {
				t.Fatalf("a renewed token does not work: %v", err)
			}
		}
	}
	// Renewal every 20 s over two minutes: about six new tokens.
	if renewed := len(tokens) - 1; renewed < 4 {
		t.Fatalf("the token was renewed %d times in two minutes, want about 6:\n%s", renewed, agent.Log())
	}
	if starts := strings.Count(agent.Log(), "Starting the agent"); starts != 1 {
		t.Fatalf("the agent restarted (%d starts)", starts)
	}
	c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, cred.ClusterName, framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	// Between status reports the agent checks in by renewing its Lease.
	seen := c.Status.Agent.LastSeen.Time
	if lease, err := hub.Client().CoordinationV1().Leases(cred.DeploymentNamespace).Get(ctx, names.AgentLease, framework.Get); err == nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(seen) {
		seen = lease.Spec.RenewTime.Time
	}
	if since := time.Since(seen); since > 15*time.Second {
		t.Fatalf("the agent stopped checking in: last seen %s ago", since.Round(time.Second))
	}
}

// Twenty agents register at once, each with its own clientID and namespace on one
// downstream control plane (twenty downstream API servers would only measure this
// machine). The test reports the time from start to all Ready; it asserts no time.
func TestTwentyClustersRegisterAtOnce(t *testing.T) {
	t.Parallel()
	const n = 20
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "downstream")
	values, err := framework.ReadValues(hub.CreateToken(workspace, "new-token", "240h"))
	if err != nil {
		t.Fatal(err)
	}
	// From here: the chart's objects for twenty agents are written and the agents start.
	start := time.Now()
	framework.StartAgentsSharingACluster(t, ds, values, n, nil)
	framework.Eventually(t, "twenty Ready Clusters", 3*time.Minute, func(ctx context.Context) error {
		clusters, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).List(ctx, metav1.ListOptions{LabelSelector: "fleet=twenty"})
		if err != nil {
			return err
		}
		ready := 0
		for _, c := range clusters.Items {
			for _, cond := range c.Status.Conditions {
				if cond.Type == "Ready" && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready != n {
			return fmt.Errorf("%d of %d Clusters Ready", ready, len(clusters.Items))
		}
		return nil
	})
	t.Logf("%d agents started at once: all %d Clusters Ready after %s", n, n, time.Since(start).Round(10*time.Millisecond))
}

func TestDeletedTokenIsRevoked(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	values, err := framework.ReadValues(hub.CreateToken(workspace, "doomed", ""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	tokenKube, tokenFleet := asIdentity(t, hub, values.Token)
	probe := &fleet.ClusterRegistrationRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Labels: map[string]string{names.RegistrationTokenLabel: "doomed"}},
		Spec:       fleet.ClusterRegistrationRequestSpec{ClientID: "probe", ClientRandom: "r1"},
	}
	if _, err := tokenFleet.FleetV1alpha1().ClusterRegistrationRequests(workspace).Create(ctx, probe, metav1.CreateOptions{}); err != nil {
		t.Fatalf("a fresh token cannot create requests: %v", err)
	}
	// The token may create requests and do nothing else.
	if _, err := tokenFleet.FleetV1alpha1().ClusterRegistrationRequests(workspace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the token can list requests (err=%v)", err)
	}
	if _, err := tokenKube.CoreV1().Secrets(workspace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the token can list Secrets (err=%v)", err)
	}

	if err := hub.Fleet().FleetV1alpha1().ClusterRegistrationTokens(workspace).Delete(ctx, "doomed", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the deleted token's credential to stop working", timeout, func(ctx context.Context) error {
		probe.Spec.ClientRandom = fmt.Sprint(time.Now().UnixNano())
		_, err := tokenFleet.FleetV1alpha1().ClusterRegistrationRequests(workspace).Create(ctx, probe, metav1.CreateOptions{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return fmt.Errorf("still accepted (err=%v)", err)
	})
}

// TestRegistrationHasItsOwnPriorityLevel: the API server's priority and fairness puts
// a registering agent's requests in the hub's flotilla-registration level, where one
// token's thousand agents queue instead of being turned away, and leaves its token's
// other requests where they were.
func TestRegistrationHasItsOwnPriorityLevel(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	values, err := framework.ReadValues(hub.CreateToken(workspace, "apf", ""))
	if err != nil {
		t.Fatal(err)
	}
	schema, err := hub.Client().FlowcontrolV1().FlowSchemas().Get(context.Background(), "flotilla-registration", framework.Get)
	if err != nil {
		t.Fatalf("the hub's FlowSchema: %v", err)
	}
	cfg := rest.AnonymousClientConfig(hub.RESTConfig())
	cfg.BearerToken = values.Token
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	flowSchema := func(path string) string {
		resp, err := httpClient.Get(cfg.Host + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID")
	}
	if got := flowSchema("/api/v1/namespaces/" + names.RegistrationNamespace + "/secrets/some-credential"); got != string(schema.UID) {
		t.Errorf("a credential pickup went to FlowSchema %q, want flotilla-registration (%s)", got, schema.UID)
	}
	if got := flowSchema("/api/v1/namespaces/" + workspace + "/configmaps"); got == "" || got == string(schema.UID) {
		t.Errorf("another request of the token went to FlowSchema %q, want the API server's own", got)
	}
}
