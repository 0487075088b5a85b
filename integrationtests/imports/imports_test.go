// Package imports tests manager-initiated registration (journeys J3 and J4): the hub
// deploys the agent into a downstream cluster whose kubeconfig it is given.
package imports

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

const (
	workspace = "clusters"
	timeout   = 2 * time.Minute
)

const myCluster = `apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: my-cluster
  namespace: clusters
  labels: {demo: "true", env: dev}
spec:
  kubeConfigSecret: my-cluster-kubeconfig
`

func condition(c *fleet.Cluster, t string) *fleet.Condition {
	for i := range c.Status.Conditions {
		if c.Status.Conditions[i].Type == t {
			return &c.Status.Conditions[i]
		}
	}
	return nil
}

// waitCluster waits until check accepts Cluster clusters/name.
func waitCluster(t *testing.T, hub *framework.Hub, name, what string, check func(*fleet.Cluster) error) *fleet.Cluster {
	t.Helper()
	var got *fleet.Cluster
	framework.Eventually(t, what, timeout, func(ctx context.Context) error {
		c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, name, framework.Get)
		if err != nil {
			return err
		}
		got = c
		return check(c)
	})
	return got
}

func deployedGeneration(want int64) func(*fleet.Cluster) error {
	return func(c *fleet.Cluster) error {
		if c.Status.AgentDeployedGeneration == nil || *c.Status.AgentDeployedGeneration != want {
			return fmt.Errorf("agentDeployedGeneration %v, want %d (Imported: %+v)", c.Status.AgentDeployedGeneration, want, condition(c, "Imported"))
		}
		return nil
	}
}

func ready(c *fleet.Cluster) error {
	if r := condition(c, "Ready"); r == nil || r.Status != corev1.ConditionTrue {
		return fmt.Errorf("not Ready: %+v", r)
	}
	return nil
}

func identity(t *testing.T, ds *framework.Cluster) registration.Credential {
	return framework.Identity(t, ds)
}

func TestHubDeploysTheAgentWithAKubeconfigSecret(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, framework.AllowLocalImports)
	ds := framework.StartControlPlane(t, "downstream")
	hub.MustKubectl("", "create", "namespace", workspace)
	hub.MustKubectl("", "-n", workspace, "create", "secret", "generic", "my-cluster-kubeconfig", "--from-file=value="+ds.Kubeconfig)
	hub.MustKubectl(myCluster, "apply", "-f", "-")

	waitCluster(t, hub, "my-cluster", "the agent to be deployed", deployedGeneration(0))
	out, err := ds.Helm("-n", "cattle-fleet-system", "list", "-q")
	if err != nil || strings.TrimSpace(out) != "fleet-agent" {
		t.Fatalf("helm list on the downstream cluster: %q (err=%v), want fleet-agent", out, err)
	}

	// There is no kubelet: run the agent as the Deployment the hub installed would.
	framework.StartAgent(t, ds)
	cluster := waitCluster(t, hub, "my-cluster", "my-cluster to be Ready", ready)
	if cluster.Spec.ClientID == "" {
		t.Fatal("the hub did not give the Cluster a clientID")
	}
	cred := identity(t, ds)
	if cred.ClusterName != "my-cluster" {
		t.Fatalf("the agent registered as %s, want my-cluster", cred.ClusterName)
	}
	clusters, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(clusters.Items) != 1 {
		t.Fatalf("%d Clusters (err=%v), want only my-cluster", len(clusters.Items), err)
	}

	// Raising redeployAgentGeneration twice deploys the agent afresh twice; each time
	// the agent registers anew and its old identity stops working.
	for gen := int64(1); gen <= 2; gen++ {
		patch := []byte(fmt.Sprintf(`{"spec":{"redeployAgentGeneration":%d}}`, gen))
		if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Patch(context.Background(), "my-cluster", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		waitCluster(t, hub, "my-cluster", fmt.Sprintf("redeployment %d", gen), deployedGeneration(gen))
		framework.Eventually(t, "the agent to register again", timeout, func(ctx context.Context) error {
			secret, err := ds.Client().CoreV1().Secrets(names.SystemNamespace).Get(ctx, names.AgentIdentitySecret, framework.Get)
			if err != nil {
				return err
			}
			token, cert := string(secret.Data["token"]), string(secret.Data["certificate"])
			if token+cert == "" || token+cert == cred.Token+string(cred.Certificate) {
				return fmt.Errorf("identity not replaced yet")
			}
			return nil
		})
		renewed := identity(t, ds)
		if renewed.ClusterName != "my-cluster" {
			t.Fatalf("after redeployment %d the agent is %s", gen, renewed.ClusterName)
		}
		// The API server caches a token's validity for 10 seconds. A certificate for
		// the agent's key stays valid until it expires: only that agent can use it.
		_, old := hub.As(cred.Token)
		framework.Eventually(t, "the previous identity to stop working", 30*time.Second, func(ctx context.Context) error {
			if cred.HasCertificate() {
				return nil
			}
			if _, err := old.FleetV1alpha1().BundleDeployments(cred.DeploymentNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsUnauthorized(err) {
				return fmt.Errorf("after redeployment %d the previous identity still works (err=%v)", gen, err)
			}
			return nil
		})
		cred = renewed
		waitCluster(t, hub, "my-cluster", "my-cluster to be Ready again", ready)
	}
}

func TestImportErrorsAreReadableAndRecover(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, framework.AllowLocalImports)
	ds := framework.StartControlPlane(t, "downstream")
	hub.MustKubectl("", "create", "namespace", workspace)
	hub.MustKubectl(myCluster, "apply", "-f", "-")

	imported := importedFalse
	waitCluster(t, hub, "my-cluster", "a missing Secret", imported("SecretNotFound", "kubeconfig Secret clusters/my-cluster-kubeconfig not found"))

	setSecret(t, hub, map[string]string{"kubeconfig": "wrong key"})
	waitCluster(t, hub, "my-cluster", "a Secret without value", imported("MissingKubeconfig", `has no key "value"`))

	setSecret(t, hub, map[string]string{"value": "this is not a kubeconfig"})
	waitCluster(t, hub, "my-cluster", "an unparsable kubeconfig", imported("InvalidKubeconfig", `key "value" is not a usable kubeconfig`))

	valid, err := os.ReadFile(ds.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	unreachable := strings.Replace(string(valid), fmt.Sprintf("127.0.0.1:%d", ds.Port), "127.0.0.1:1", 1)
	setSecret(t, hub, map[string]string{"value": unreachable})
	waitCluster(t, hub, "my-cluster", "an unreachable API server", imported("Unreachable", "cannot reach the API server https://127.0.0.1:1"))

	setSecret(t, hub, map[string]string{"value": tokenKubeconfig(ds, "not-a-valid-token")})
	waitCluster(t, hub, "my-cluster", "refused credentials", imported("Unauthorized", "401 Unauthorized"))

	// Correcting the Secret is picked up without restarting the hub.
	setSecret(t, hub, map[string]string{"value": string(valid)})
	waitCluster(t, hub, "my-cluster", "the corrected Secret to be used", deployedGeneration(0))

	events := hub.MustKubectl("", "-n", workspace, "get", "events", "--field-selector", "involvedObject.name=my-cluster", "-o", "jsonpath={.items[*].reason}")
	for _, reason := range []string{"SecretNotFound", "MissingKubeconfig", "InvalidKubeconfig", "Unreachable", "Unauthorized", "AgentDeployed"} {
		if !strings.Contains(events, reason) {
			t.Errorf("no %s event on my-cluster (events: %s)", reason, events)
		}
	}
}

// tokenKubeconfig is ds's kubeconfig with token instead of the admin certificate.
func tokenKubeconfig(ds *framework.Cluster, token string) string {
	cfg := ds.RESTConfig()
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: %s
    insecure-skip-tls-verify: true
users:
- name: u
  user:
    token: %s
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`, cfg.Host, token)
}

func TestClusterAPIKubeconfigSecretWorksUnchanged(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, framework.AllowLocalImports)
	ds := framework.StartControlPlane(t, "downstream")
	hub.MustKubectl("", "create", "namespace", workspace)
	kubeconfig, err := os.ReadFile(ds.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// As Cluster API writes it.
	_, err = hub.Client().CoreV1().Secrets(workspace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-one-kubeconfig", Namespace: workspace,
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "capi-one"}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": kubeconfig},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hub.MustKubectl(`apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: capi-one
  namespace: clusters
spec:
  kubeConfigSecret: capi-one-kubeconfig
`, "apply", "-f", "-")
	waitCluster(t, hub, "capi-one", "the agent to be deployed", deployedGeneration(0))
	framework.StartAgent(t, ds)
	waitCluster(t, hub, "capi-one", "capi-one to be Ready", ready)
}

// A minimal clusters.cluster.x-k8s.io CRD: what the hub needs from Cluster API.
const capiCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: clusters.cluster.x-k8s.io
spec:
  group: cluster.x-k8s.io
  names: {kind: Cluster, listKind: ClusterList, plural: clusters, singular: cluster}
  scope: Namespaced
  versions:
  - name: v1beta1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

func TestClusterAPIClustersAreImportedAutomatically(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, framework.AllowLocalImports)
	ds := framework.StartControlPlane(t, "downstream")
	hub.MustKubectl("", "create", "namespace", workspace)
	// Cluster API arrives after the hub started.
	hub.MustKubectl(capiCRD, "apply", "-f", "-")
	hub.MustKubectl("", "wait", "--for=condition=Established", "crd/clusters.cluster.x-k8s.io", "--timeout=60s")
	kubeconfig, err := os.ReadFile(ds.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	_, err = hub.Client().CoreV1().Secrets(workspace).Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-two-kubeconfig", Namespace: workspace,
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "capi-two"}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": kubeconfig},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	hub.MustKubectl(`apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata:
  name: capi-two
  namespace: clusters
  labels: {fleet.cattle.io/auto-import: "true", env: dev}
spec: {}
---
apiVersion: cluster.x-k8s.io/v1beta1
kind: Cluster
metadata:
  name: not-imported
  namespace: clusters
spec: {}
`, "apply", "-f", "-")

	cluster := waitCluster(t, hub, "capi-two", "the Cluster API cluster to be imported and its agent deployed", deployedGeneration(0))
	if cluster.Labels["env"] != "dev" {
		t.Errorf("the imported Cluster lost the label env=dev: %v", cluster.Labels)
	}
	framework.StartAgent(t, ds)
	waitCluster(t, hub, "capi-two", "capi-two to be Ready", ready)
	if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(context.Background(), "not-imported", framework.Get); !apierrors.IsNotFound(err) {
		t.Fatalf("a Cluster API cluster without the auto-import label was imported (err=%v)", err)
	}
}

func TestHelmFailuresRetryAndAgentSettingsRollThroughTheAgentBundle(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, framework.AllowLocalImports, "--kubeconfig-secret-namespaces=shared")
	ds := framework.StartControlPlane(t, "downstream")
	hub.MustKubectl("", "create", "namespace", workspace)
	ctx := context.Background()

	// A Secret in a namespace the hub shares serves only the workspaces it names.
	hub.MustKubectl("", "create", "namespace", "shared")
	hub.MustKubectl("", "-n", "shared", "create", "secret", "generic", "shared-kubeconfig", "--from-literal=value=not a kubeconfig")
	hub.MustKubectl(`apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: from-shared
  namespace: clusters
spec:
  kubeConfigSecret: shared-kubeconfig
  kubeConfigSecretNamespace: shared
`, "apply", "-f", "-")
	importedReason := func(reason, message string) func(c *fleet.Cluster) error {
		return func(c *fleet.Cluster) error {
			if cond := condition(c, "Imported"); cond == nil || cond.Reason != reason || !strings.Contains(cond.Message, message) {
				return fmt.Errorf("Imported is %+v", cond)
			}
			return nil
		}
	}
	waitCluster(t, hub, "from-shared", "a shared Secret that does not name the workspace", importedReason("SecretNotShared", names.AllowedWorkspacesAnnotation))
	hub.MustKubectl("", "-n", "shared", "annotate", "secret", "shared-kubeconfig", names.AllowedWorkspacesAnnotation+"=dev,prod")
	waitCluster(t, hub, "from-shared", "a shared Secret that names other workspaces", importedReason("SecretNotShared", `workspace "clusters"`))
	hub.MustKubectl("", "-n", "shared", "annotate", "--overwrite", "secret", "shared-kubeconfig", names.AllowedWorkspacesAnnotation+"=dev,clusters")
	waitCluster(t, hub, "from-shared", "the shared Secret to be read", importedReason("InvalidKubeconfig", "shared/shared-kubeconfig"))

	// A Secret in another namespace must be allowed by the hub's settings.
	hub.MustKubectl(`apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata:
  name: elsewhere
  namespace: clusters
spec:
  kubeConfigSecret: x
  kubeConfigSecretNamespace: kube-system
`, "apply", "-f", "-")
	waitCluster(t, hub, "elsewhere", "a disallowed Secret namespace", func(c *fleet.Cluster) error {
		if cond := condition(c, "Imported"); cond == nil || cond.Reason != "SecretNamespaceNotAllowed" || !strings.Contains(cond.Message, "--kubeconfig-secret-namespaces") {
			return fmt.Errorf("Imported is %+v", cond)
		}
		return nil
	})

	// Something in the downstream cluster that Helm will not overwrite.
	ds.MustKubectl("", "create", "clusterrolebinding", "fleet-agent-cattle-fleet-system", "--clusterrole=view", "--user=someone")
	hub.MustKubectl("", "-n", workspace, "create", "secret", "generic", "my-cluster-kubeconfig", "--from-file=value="+ds.Kubeconfig)
	hub.MustKubectl(myCluster, "apply", "-f", "-")
	waitCluster(t, hub, "my-cluster", "the Helm failure to be reported", func(c *fleet.Cluster) error {
		cond := condition(c, "Imported")
		if cond == nil || cond.Reason != "HelmFailed" || !strings.Contains(cond.Message, "installing the agent chart into cattle-fleet-system with kubeconfig Secret clusters/my-cluster-kubeconfig") {
			return fmt.Errorf("Imported is %+v", cond)
		}
		return nil
	})
	// Removing the obstacle downstream is picked up by the retries (backoff), with no
	// change to the Cluster or its Secret.
	ds.MustKubectl("", "delete", "clusterrolebinding", "fleet-agent-cattle-fleet-system")
	waitCluster(t, hub, "my-cluster", "the retry to succeed", deployedGeneration(0))
	framework.StartAgent(t, ds)
	waitCluster(t, hub, "my-cluster", "my-cluster to be Ready", ready)

	// Changing the agent's settings reaches the agent through its agent bundle: the
	// same release is upgraded, nothing is reinstalled.
	patch := []byte(`{"spec":{"agentEnvVars":[{"name":"HTTPS_PROXY","value":"http://proxy:3128"}]}}`)
	if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Patch(ctx, "my-cluster", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the agent Deployment to carry the new env var", timeout, func(ctx context.Context) error {
		d, err := ds.Client().AppsV1().Deployments("cattle-fleet-system").Get(ctx, "fleet-agent", framework.Get)
		if err != nil {
			return err
		}
		for _, env := range d.Spec.Template.Spec.Containers[0].Env {
			if env.Name == "HTTPS_PROXY" && env.Value == "http://proxy:3128" {
				return nil
			}
		}
		return fmt.Errorf("env %v", d.Spec.Template.Spec.Containers[0].Env)
	})
	out, err := ds.Helm("history", "-n", "cattle-fleet-system", "fleet-agent")
	if err != nil || !strings.Contains(out, "Install complete") || strings.Count(out, "Upgrade complete") < 2 {
		t.Errorf("helm history fleet-agent: %v\n%s\nwant the hub's install, then upgrades by the agent bundle", err, out)
	}
	if out, _ := ds.Helm("list", "-A", "-q"); strings.TrimSpace(out) != "fleet-agent" {
		t.Errorf("helm list -A -q: %q, want only fleet-agent", out)
	}
	c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, "my-cluster", framework.Get)
	if err != nil || c.Status.AgentDeployedGeneration == nil || *c.Status.AgentDeployedGeneration != 0 {
		t.Errorf("a settings change must not redeploy: %v %+v", err, c.Status)
	}
}

// importedFalse waits for Imported=False with reason and a message containing text.
func importedFalse(reason, text string) func(*fleet.Cluster) error {
	return func(c *fleet.Cluster) error {
		cond := condition(c, "Imported")
		if cond == nil || cond.Status != corev1.ConditionFalse || cond.Reason != reason || !strings.Contains(cond.Message, text) {
			return fmt.Errorf("Imported is %+v, want False/%s with %q", cond, reason, text)
		}
		return nil
	}
}

// withUser is kubeconfig with the user's credentials replaced by user (YAML lines
// under `user:`, indented by four spaces).
func withUser(t *testing.T, kubeconfig []byte, user string) string {
	t.Helper()
	lines := strings.Split(string(kubeconfig), "\n")
	for i, line := range lines {
		if strings.TrimSpace(line) == "user:" && strings.HasPrefix(line, "  ") {
			// The admin kubeconfig's user entry: keep the lines before it, replace the rest
			// of its block.
			j := i + 1
			for j < len(lines) && strings.HasPrefix(lines[j], "    ") {
				j++
			}
			return strings.Join(lines[:i+1], "\n") + "\n" + user + strings.Join(lines[j:], "\n")
		}
	}
	t.Fatalf("no user entry in kubeconfig:\n%s", kubeconfig)
	return ""
}

// The attack of a workspace user who may create Secrets and Clusters: a kubeconfig
// whose user runs a program, or reads the hub's own files, is refused with
// UnsafeKubeconfig naming the field, and nothing runs; the plain kubeconfig of the
// same cluster then imports it.
func TestKubeconfigSecretCannotRunCodeOnTheHub(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, framework.AllowLocalImports)
	ds := framework.StartControlPlane(t, "downstream")
	hub.MustKubectl("", "create", "namespace", workspace)
	valid, err := os.ReadFile(ds.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	marker := filepath.Join(t.TempDir(), "pwned")
	exec := withUser(t, valid, fmt.Sprintf(`    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: /bin/sh
      args: ["-c", "touch %s; echo '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'"]
      interactiveMode: Never
`, marker))
	hub.MustKubectl("", "-n", workspace, "create", "secret", "generic", "my-cluster-kubeconfig", "--from-literal=value="+exec)
	hub.MustKubectl(myCluster, "apply", "-f", "-")
	waitCluster(t, hub, "my-cluster", "the exec plugin to be refused", importedFalse("UnsafeKubeconfig", ".user.exec is not allowed: it runs a program on the hub"))

	// A token file would hand the hub's own ServiceAccount token (or any file it can
	// read) to the server the kubeconfig names.
	tokenFile := filepath.Join(hub.DataDir, "admin.kubeconfig")
	setSecret(t, hub, map[string]string{"value": withUser(t, valid, "    tokenFile: "+tokenFile+"\n")})
	waitCluster(t, hub, "my-cluster", "the token file to be refused", importedFalse("UnsafeKubeconfig", ".user.tokenFile is not allowed"))
	setSecret(t, hub, map[string]string{"value": withUser(t, valid, "    client-certificate: "+filepath.Join(hub.DataDir, "pki", "admin.crt")+"\n    client-key: "+filepath.Join(hub.DataDir, "pki", "admin.key")+"\n")})
	waitCluster(t, hub, "my-cluster", "certificate files to be refused", importedFalse("UnsafeKubeconfig", ".user.client-certificate, users[flotilla].user.client-key is not allowed"))

	if _, err := os.Stat(marker); !os.IsNotExist(err) {
		t.Fatalf("the exec plugin ran on the hub (%s exists: %v)", marker, err)
	}
	out, err := ds.Helm("-n", "cattle-fleet-system", "list", "-q")
	if err != nil || strings.TrimSpace(out) != "" {
		t.Fatalf("helm list downstream: %q (err=%v), want no release yet", out, err)
	}

	// Whoever runs the downstream cluster writes its Helm releases: one that would
	// decompress to 64 MiB is not read.
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	if _, err := zw.Write(make([]byte, 64<<20)); err != nil {
		t.Fatal(err)
	}
	_ = zw.Close()
	ds.MustKubectl("", "create", "namespace", "cattle-fleet-system")
	bomb := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "sh.helm.release.v1.fleet-agent.v1", Namespace: "cattle-fleet-system",
			Labels: map[string]string{"owner": "helm", "name": "fleet-agent", "status": "deployed", "version": "1"}},
		Type: "helm.sh/release.v1",
		Data: map[string][]byte{"release": []byte(base64.StdEncoding.EncodeToString(gz.Bytes()))},
	}
	if _, err := ds.Client().CoreV1().Secrets("cattle-fleet-system").Create(context.Background(), bomb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	setSecret(t, hub, map[string]string{"value": string(valid)})
	waitCluster(t, hub, "my-cluster", "the downstream release bomb to be refused", importedFalse("HelmFailed", "decode to more than"))
	if err := ds.Client().CoreV1().Secrets("cattle-fleet-system").Delete(context.Background(), bomb.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The hub retries with backoff; a change to the Cluster brings it back at once.
	hub.MustKubectl("", "-n", workspace, "annotate", "clusters.fleet.cattle.io", "my-cluster", "retry=now")
	waitCluster(t, hub, "my-cluster", "the plain kubeconfig to be imported", deployedGeneration(0))
	events := hub.MustKubectl("", "-n", workspace, "get", "events", "--field-selector", "involvedObject.name=my-cluster,reason=UnsafeKubeconfig", "-o", "name")
	if strings.TrimSpace(events) == "" {
		t.Error("no UnsafeKubeconfig event on my-cluster")
	}
}

// A kubeconfig that points the hub at its own machine (loopback), at a cloud metadata
// address (link-local) or at the hub's own API server is refused unless an admin
// allows those networks with --import-allowed-networks.
func TestKubeconfigSecretCannotPointAtTheHubsMachine(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	hub.MustKubectl("", "create", "namespace", workspace)
	hubConfig, err := os.ReadFile(hub.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	// The hub's own API server, on loopback.
	setSecret(t, hub, map[string]string{"value": string(hubConfig)})
	hub.MustKubectl(myCluster, "apply", "-f", "-")
	waitCluster(t, hub, "my-cluster", "the hub's own address to be refused",
		importedFalse("UnsafeKubeconfig", fmt.Sprintf("the hub does not connect to 127.0.0.1:%d for an imported cluster: it is a loopback address", hub.Port)))

	metadata := strings.Replace(string(hubConfig), fmt.Sprintf("https://127.0.0.1:%d", hub.Port), "https://169.254.169.254", 1)
	setSecret(t, hub, map[string]string{"value": metadata})
	waitCluster(t, hub, "my-cluster", "the metadata address to be refused",
		importedFalse("UnsafeKubeconfig", "169.254.169.254:443 for an imported cluster: it is a link-local address"))

	// A name that resolves to loopback is caught where the connection is made.
	byName := strings.Replace(string(hubConfig), fmt.Sprintf("https://127.0.0.1:%d", hub.Port), fmt.Sprintf("https://localhost:%d", hub.Port), 1)
	setSecret(t, hub, map[string]string{"value": byName})
	waitCluster(t, hub, "my-cluster", "a name for loopback to be refused", importedFalse("UnsafeKubeconfig", "it is a loopback address"))
}

// setSecret creates or replaces the kubeconfig Secret my-cluster-kubeconfig.
func setSecret(t *testing.T, hub *framework.Hub, data map[string]string) {
	t.Helper()
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "my-cluster-kubeconfig", Namespace: workspace}, StringData: data}
	secrets := hub.Client().CoreV1().Secrets(workspace)
	if _, err := secrets.Create(context.Background(), secret, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		existing, err := secrets.Get(context.Background(), secret.Name, framework.Get)
		if err != nil {
			t.Fatal(err)
		}
		existing.Data, existing.StringData = nil, data
		if _, err := secrets.Update(context.Background(), existing, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	} else if err != nil {
		t.Fatal(err)
	}
}
