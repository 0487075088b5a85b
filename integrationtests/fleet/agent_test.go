package fleet

import (
	"context"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

const (
	workspace = "clusters"
	timeout   = 3 * time.Minute
)

// startFleetAgent runs Fleet's agent against ds as its chart's Deployment runs it.
func startFleetAgent(t *testing.T, bin string, ds *framework.Cluster) *framework.Process {
	t.Helper()
	p := runContainer(t, ds, names.SystemNamespace, "fleet-agent", "fleet-agent", "Fleet's agent of "+ds.Name, bin,
		// Its status report, every 15 minutes by default, is its check-in.
		"CHECKIN_INTERVAL=20s",
		// Ports it would have to itself in a Pod.
		"FLEET_AGENT_PPROF_DISABLED=true", "FLEET_AGENT_METRICS_BIND_ADDRESS=0", "FLEET_AGENT_PROBE_BIND_ADDRESS=0")
	framework.StandInForAgentPod(t, ds, names.SystemNamespace, p.Exited())
	return p
}

// runContainer runs bin against cluster as the container of a Deployment in
// namespace runs it (there is no kubelet to run the Pod): with the container's
// arguments and environment, the namespace for a field reference to the Pod's, extra
// environment after, and cluster's admin kubeconfig.
func runContainer(t *testing.T, cluster *framework.Cluster, namespace, deployment, container, name, bin string, extraEnv ...string) *framework.Process {
	t.Helper()
	d, err := cluster.Client().AppsV1().Deployments(namespace).Get(context.Background(), deployment, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	env := []string{"KUBECONFIG=" + cluster.Kubeconfig}
	var args []string
	found := false
	for _, c := range d.Spec.Template.Spec.Containers {
		if c.Name != container {
			continue
		}
		found, args = true, c.Args
		for _, e := range c.Env {
			switch {
			case e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.namespace":
				env = append(env, e.Name+"="+namespace)
			case e.ValueFrom == nil:
				env = append(env, e.Name+"="+e.Value)
			}
		}
	}
	if !found {
		t.Fatalf("Deployment %s/%s has no container %s", namespace, deployment, container)
	}
	return framework.StartProgram(t, name, bin, append(env, extraEnv...), args...)
}

const configBundle = `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: for-fleet-agents
  namespace: clusters
spec:
  defaultNamespace: fleet-agent-app
  resources:
  - name: configmap.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: deployed-by-fleets-agent
      data:
        greeting: hello
  targets:
  - clusterSelector:
      matchLabels:
        agent: fleet
`

func TestFleetsAgentRegistersAndDeploys(t *testing.T) {
	agentBin := framework.FleetBinary(t, "fleetagent")
	chart := framework.FleetChart(t, "fleet-agent")
	fleetCLI := framework.FleetBinary(t, "fleet")
	t.Parallel()
	hub := framework.StartHub(t)
	// Its Deployments report themselves rolled out, so that Bundles of them turn Ready.
	ds := framework.StartControlPlane(t, "fleet-agent-ds", "--simulate-workloads")
	values := hub.CreateToken(workspace, "for-fleet", "1h")

	// Fleet's chart, installed as Fleet's documentation says, with a Flotilla token's
	// values.yaml.
	if out, err := ds.Helm("-n", names.SystemNamespace, "install", "--create-namespace", "--values", values,
		"--set-string", "labels.agent=fleet", "fleet-agent", chart); err != nil {
		t.Fatalf("helm install of Fleet's fleet-agent chart: %v\n%s", err, out)
	}
	agent := startFleetAgent(t, agentBin, ds)

	// Fleet's agent writes its identity into the fleet-agent Secret, as Fleet's hub
	// would have it.
	var clusterName string
	framework.Eventually(t, "Fleet's agent to register", timeout, func(ctx context.Context) error {
		secret, err := ds.Client().CoreV1().Secrets(names.SystemNamespace).Get(ctx, "fleet-agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(secret.Data["kubeconfig"]) == 0 || len(secret.Data["clusterName"]) == 0 {
			return fmt.Errorf("fleet-agent Secret lacks kubeconfig or clusterName: %v", slices.Sorted(maps.Keys(secret.Data)))
		}
		clusterName = string(secret.Data["clusterName"])
		return nil
	})
	kubeSystem, err := ds.Client().CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if want := names.ClusterForClientID(string(kubeSystem.UID)); clusterName != want {
		t.Errorf("registered as %s, want %s", clusterName, want)
	}
	if _, err := ds.Client().CoreV1().Secrets(names.SystemNamespace).Get(context.Background(), "fleet-agent-bootstrap", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("the bootstrap Secret is still there (err=%v)", err)
	}

	// The hub kept what Fleet's agent cannot prove: no key is recorded, and the
	// request is answered and listed as Fleet's kind.
	cluster, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(context.Background(), clusterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if cluster.Labels["agent"] != "fleet" {
		t.Errorf("Cluster labels %v, want agent=fleet", cluster.Labels)
	}
	if key := cluster.Annotations[names.AgentKeyAnnotation]; key != "" {
		t.Errorf("the Cluster records a key %q that Fleet's agent never proved", key)
	}
	out := hub.MustKubectl("", "-n", workspace, "get", "clusterregistrations")
	if !strings.Contains(out, clusterName) || !strings.Contains(out, "true") {
		t.Errorf("kubectl get clusterregistrations does not show the granted registration:\n%s", out)
	}

	// Its status report is its check-in.
	framework.Eventually(t, "Fleet's agent to check in", timeout, func(ctx context.Context) error {
		c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, clusterName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.Agent.LastSeen.IsZero() || c.Status.Agent.Namespace != names.SystemNamespace {
			return fmt.Errorf("agent status %+v", c.Status.Agent)
		}
		return nil
	})

	// A Bundle is deployed by Fleet's agent, and its status reported.
	hub.MustKubectl(configBundle, "apply", "-f", "-")
	framework.Eventually(t, "Fleet's agent to deploy the Bundle", timeout, func(ctx context.Context) error {
		cm, err := ds.Client().CoreV1().ConfigMaps("fleet-agent-app").Get(ctx, "deployed-by-fleets-agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["greeting"] != "hello" {
			return fmt.Errorf("ConfigMap data %v", cm.Data)
		}
		return nil
	})
	waitBundleDeploymentReady(t, hub, clusterName, "for-fleet-agents")

	// And a fleet-examples folder applied with Fleet's CLI, to the cluster group of
	// all clusters, as tests/test.sh applies it.
	hub.MustKubectl("apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterGroup\nmetadata: {name: default, namespace: "+workspace+"}\nspec: {selector: {}}\n", "apply", "-f", "-")
	apply := exec.Command(fleetCLI, "apply", "-n", workspace, "--kubeconfig", hub.Kubeconfig, "manifests", ".")
	apply.Dir = filepath.Join(framework.RepoRoot(t), "integrationtests/conformance/testdata/fleet-examples/single-cluster/manifests")
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("fleet apply: %v\n%s", err, out)
	}
	waitBundleDeploymentReady(t, hub, clusterName, "manifests")
	if _, err := ds.Client().AppsV1().Deployments("fleet-manifest-example").Get(context.Background(), "frontend", metav1.GetOptions{}); err != nil {
		t.Errorf("the guestbook of fleet-examples' single-cluster/manifests: %v", err)
	}
	// It is still running: nothing the hub answered made it give up.
	select {
	case <-agent.Exited():
		t.Fatalf("Fleet's agent exited:\n%s", agent.Log())
	default:
	}

	// The agent bundle reaches Fleet's agent too, which deploys it as it would Fleet's
	// own: a helm upgrade of its fleet-agent release to Flotilla's chart. One release,
	// its second revision.
	waitFlotillasAgentDeployed(t, ds, "Fleet's agent to deploy the agent bundle over its own release")
	history := ds.MustHelm("-n", names.SystemNamespace, "history", "fleet-agent", "-o", "json")
	if !strings.Contains(history, `"revision":2`) || !strings.Contains(history, `"chart":"fleet-agent-0.1.0"`) || strings.Contains(history, `"revision":3`) {
		t.Errorf("helm history of fleet-agent: %s", history)
	}

	// The Deployment's Pod would now run Flotilla's agent in place of Fleet's.
	if err := agent.Stop(); err != nil {
		t.Logf("stopping Fleet's agent: %v", err)
	}
	flotillaAgent := framework.StartAgent(t, ds)

	// It carries on as the same Cluster and binds its key to it.
	framework.Eventually(t, "Flotilla's agent to bind its key to the Cluster", timeout, func(ctx context.Context) error {
		c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, clusterName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Annotations[names.AgentKeyAnnotation] == "" {
			return fmt.Errorf("no key recorded on Cluster %s", clusterName)
		}
		return nil
	})
	key, err := registration.Downstream{Client: ds.Client(), Namespace: names.SystemNamespace}.Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cluster, err = hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(context.Background(), clusterName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := cluster.Annotations[names.AgentKeyAnnotation], registration.Fingerprint(key.PublicKey()); got != want {
		t.Errorf("the Cluster records key %s, the agent holds %s", got, want)
	}
	clusters, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(clusters.Items) != 1 {
		t.Errorf("%d Clusters in %s, want the one Fleet's agent registered", len(clusters.Items), workspace)
	}
	identity := framework.Identity(t, ds)
	if identity.ClusterName != clusterName || !identity.CanRecover(time.Now()) || identity.KeyUnbound || !identity.HasCertificate() {
		t.Errorf("stored identity: cluster %s, can recover %t, key unbound %t, certificate %t", identity.ClusterName, identity.CanRecover(time.Now()), identity.KeyUnbound, identity.HasCertificate())
	}
	secret, err := ds.Client().CoreV1().Secrets(names.SystemNamespace).Get(context.Background(), "fleet-agent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := secret.Data["kubeconfig"]; ok {
		t.Errorf("the fleet-agent Secret still holds Fleet's agent's kubeconfig, whose token the hub revoked")
	}
	if !strings.Contains(hub.MustKubectl("", "-n", workspace, "get", "events", "--field-selector", "involvedObject.name="+clusterName), "KeyBound") {
		t.Errorf("no KeyBound event on Cluster %s", clusterName)
	}

	// Flotilla's agent reports the Cluster Ready and takes over the release Fleet's
	// agent made for the Bundle: a change of the Bundle upgrades it, with no second
	// release.
	framework.Eventually(t, "the Cluster to be Ready with Flotilla's agent", timeout, func(ctx context.Context) error {
		c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, clusterName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !isReady(conditions.Get(c.Status.Conditions, fleet.ConditionReady)) {
			return fmt.Errorf("conditions %+v", c.Status.Conditions)
		}
		return nil
	})
	hub.MustKubectl(strings.Replace(configBundle, "greeting: hello", "greeting: hello-from-flotilla", 1), "apply", "-f", "-")
	framework.Eventually(t, "Flotilla's agent to upgrade the Bundle's release", timeout, func(ctx context.Context) error {
		cm, err := ds.Client().CoreV1().ConfigMaps("fleet-agent-app").Get(ctx, "deployed-by-fleets-agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if cm.Data["greeting"] != "hello-from-flotilla" {
			return fmt.Errorf("ConfigMap data %v", cm.Data)
		}
		return nil
	})
	releases := ds.MustHelm("list", "-A", "-q", "--all")
	if n := len(strings.Fields(releases)); n != 3 {
		t.Errorf("helm list -A shows %d releases, want fleet-agent and the two Bundles':\n%s", n, releases)
	}
	select {
	case <-flotillaAgent.Exited():
		t.Fatalf("Flotilla's agent exited:\n%s", flotillaAgent.Log())
	default:
	}
}

// waitFlotillasAgentDeployed waits until the downstream fleet-agent Deployment runs
// Flotilla's agent image: a Pod of it would then run Flotilla's agent.
func waitFlotillasAgentDeployed(t *testing.T, ds *framework.Cluster, what string) {
	t.Helper()
	framework.Eventually(t, what, timeout, func(ctx context.Context) error {
		d, err := ds.Client().AppsV1().Deployments(names.SystemNamespace).Get(ctx, "fleet-agent", metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, c := range d.Spec.Template.Spec.Containers {
			if strings.HasPrefix(c.Image, "flotilla/agent:") {
				return nil
			}
		}
		return fmt.Errorf("the fleet-agent Deployment runs %v", d.Spec.Template.Spec.Containers)
	})
}

// waitBundleDeploymentReady waits until the BundleDeployment of Bundle bundle (in the
// workspace) for cluster has applied its current deployment and is Ready.
func waitBundleDeploymentReady(t *testing.T, hub *framework.Hub, cluster, bundle string) {
	t.Helper()
	framework.Eventually(t, "the BundleDeployment of "+bundle+" to be Ready", timeout, func(ctx context.Context) error {
		bds, err := hub.Fleet().FleetV1alpha1().BundleDeployments(names.ClusterNamespace(workspace, cluster)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for _, bd := range bds.Items {
			if bd.Labels[names.BundleNamespaceLabel] == workspace && bd.Labels[names.BundleNameLabel] == bundle {
				if bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID && isReady(conditions.Get(bd.Status.Conditions, fleet.ConditionReady)) {
					return nil
				}
				return fmt.Errorf("BundleDeployment %s: applied %q of %q, conditions %+v", bd.Name, bd.Status.AppliedDeploymentID, bd.Spec.DeploymentID, bd.Status.Conditions)
			}
		}
		return fmt.Errorf("no BundleDeployment of Bundle %s among %d", bundle, len(bds.Items))
	})
}

func isReady(c *fleet.Condition) bool { return c != nil && c.Status == corev1.ConditionTrue }
