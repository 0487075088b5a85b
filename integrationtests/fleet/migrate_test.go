package fleet

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/names"
)

const fleetWorkspace = "fleet-default"

// fleetHub is a Fleet hub as a test fixture: a control plane with Fleet's charts
// installed (fleet-crd and fleet, without hooks, as no Pod runs) and Fleet's
// controllers, built from rancher/fleet, run as the chart's Deployment runs them.
type fleetHub struct {
	*framework.Cluster
}

func startFleetHub(t *testing.T, controller string) *fleetHub {
	t.Helper()
	hub := framework.StartControlPlane(t, "fleet-hub")
	cfg := hub.RESTConfig()
	hub.MustHelm("install", "--no-hooks", "fleet-crd", framework.FleetChart(t, "fleet-crd"))
	values, err := yaml.Marshal(map[string]string{"apiServerURL": cfg.Host, "apiServerCA": string(cfg.CAData)})
	if err != nil {
		t.Fatal(err)
	}
	valuesFile := filepath.Join(t.TempDir(), "fleet-values.yaml")
	if err := os.WriteFile(valuesFile, values, 0o600); err != nil {
		t.Fatal(err)
	}
	hub.MustHelm("-n", "cattle-fleet-system", "install", "--create-namespace", "--no-hooks", "fleet", framework.FleetChart(t, "fleet"),
		"--values", valuesFile, "--set", "agentTLSMode=strict", "--set", "bootstrap.enabled=false", "--set", "gitops.enabled=false",
		"--set", "helmops.enabled=false", "--set", "metrics.enabled=false", "--set", "agentCheckinInterval=20s")
	for _, container := range []string{"fleet-controller", "fleet-agentmanagement"} {
		runContainer(t, hub, "cattle-fleet-system", "fleet-controller", container, "Fleet's "+container, controller,
			"FLEET_PPROF_DISABLED=true", "FLEET_METRICS_BIND_ADDRESS=0", "FLEET_HEALTHPROBE_BIND_ADDRESS=0")
	}
	return &fleetHub{hub}
}

// token creates a ClusterRegistrationToken on the Fleet hub and returns the path of
// its values.yaml once Fleet has written it.
func (f *fleetHub) token(t *testing.T, name string) string {
	t.Helper()
	// Fleet's bootstrap, turned off here, would have made the workspace.
	_, _ = f.Kubectl("", "create", "namespace", fleetWorkspace)
	f.MustKubectl("apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterRegistrationToken\nmetadata: {name: "+name+", namespace: "+fleetWorkspace+"}\nspec: {ttl: 1h}\n", "apply", "-f", "-")
	path := filepath.Join(t.TempDir(), "values.yaml")
	framework.Eventually(t, "Fleet to write the token's values", timeout, func(ctx context.Context) error {
		s, err := f.Client().CoreV1().Secrets(fleetWorkspace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.Data["values"]) == 0 {
			return fmt.Errorf("no values yet")
		}
		return os.WriteFile(path, s.Data["values"], 0o600)
	})
	return path
}

// A cluster registered with a Fleet hub by Fleet's agent, with a Bundle Fleet
// deployed there, moves to a Flotilla hub with `hub migrate`, and nobody touches it:
// the dry run lists what would move and changes nothing; the migration copies the
// Cluster and the Bundle, the Fleet hub deploys Flotilla's agent over Fleet's, which
// registers with the Flotilla hub as the same Cluster, and the Bundle is deployed from
// there.
func TestHubMigrateMovesAClusterFromAFleetHub(t *testing.T) {
	controller := framework.FleetBinary(t, "fleetcontroller")
	agentBin := framework.FleetBinary(t, "fleetagent")
	fleetCLI := framework.FleetBinary(t, "fleet")
	agentChart := framework.FleetChart(t, "fleet-agent")
	t.Parallel()
	fleetHub := startFleetHub(t, controller)
	ds := framework.StartControlPlane(t, "moved", "--simulate-workloads")

	// The cluster joins the Fleet hub as Fleet's documentation says.
	if out, err := ds.Helm("-n", names.SystemNamespace, "install", "--create-namespace", "--values", fleetHub.token(t, "join"),
		"--set-string", "labels.env=dev", "fleet-agent", agentChart); err != nil {
		t.Fatalf("helm install of Fleet's fleet-agent chart: %v\n%s", err, out)
	}
	fleetAgent := startFleetAgent(t, agentBin, ds)
	var clusterName string
	framework.Eventually(t, "the cluster to register with the Fleet hub", timeout, func(ctx context.Context) error {
		list, err := fleetHub.Fleet().FleetV1alpha1().Clusters(fleetWorkspace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if len(list.Items) == 0 {
			return fmt.Errorf("no Cluster yet")
		}
		c := list.Items[0]
		if c.Status.Agent.LastSeen.IsZero() {
			return fmt.Errorf("Cluster %s: its agent has not reported", c.Name)
		}
		clusterName = c.Name
		return nil
	})
	fleetHub.MustKubectl("apiVersion: fleet.cattle.io/v1alpha1\nkind: ClusterGroup\nmetadata: {name: default, namespace: "+fleetWorkspace+"}\nspec: {selector: {}}\n", "apply", "-f", "-")
	apply := exec.Command(fleetCLI, "apply", "-n", fleetWorkspace, "--kubeconfig", fleetHub.Kubeconfig, "manifests", ".")
	apply.Dir = filepath.Join(framework.RepoRoot(t), "integrationtests/conformance/testdata/fleet-examples/single-cluster/manifests")
	if out, err := apply.CombinedOutput(); err != nil {
		t.Fatalf("fleet apply: %v\n%s", err, out)
	}
	framework.Eventually(t, "Fleet to deploy the Bundle", timeout, func(ctx context.Context) error {
		_, err := ds.Client().AppsV1().Deployments("fleet-manifest-example").Get(ctx, "frontend", metav1.GetOptions{})
		return err
	})

	flotilla := framework.StartHub(t)
	migrate := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(framework.BinDir(t), "hub"), append([]string{"migrate", "--from", fleetHub.Kubeconfig, "--kubeconfig", flotilla.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hub migrate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// The dry run says what would move, and moves nothing.
	plan := migrate("--dry-run")
	t.Logf("hub migrate --dry-run:\n%s", plan)
	for _, want := range []string{
		"copy        Cluster                    " + fleetWorkspace + "/" + clusterName,
		"move agent  Cluster                    " + fleetWorkspace + "/" + clusterName,
		"copy        Bundle                     " + fleetWorkspace + "/manifests",
		"skip        Bundle                     " + fleetWorkspace + "/fleet-agent-" + clusterName,
		"copy        ClusterGroup               " + fleetWorkspace + "/default",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("the dry run does not say %q", want)
		}
	}
	if list, err := flotilla.Fleet().FleetV1alpha1().Clusters(fleetWorkspace).List(context.Background(), metav1.ListOptions{}); err == nil && len(list.Items) > 0 {
		t.Errorf("the dry run made %d Clusters on the Flotilla hub", len(list.Items))
	}
	if c, err := fleetHub.Fleet().FleetV1alpha1().Clusters(fleetWorkspace).Get(context.Background(), clusterName, metav1.GetOptions{}); err != nil || c.Labels["fleet.cattle.io/non-managed-agent"] != "" {
		t.Errorf("the dry run changed the Fleet hub's Cluster (%v)", err)
	}

	started := time.Now()
	out := migrate()
	t.Logf("hub migrate:\n%s", out)

	// The Fleet hub deploys Flotilla's agent over Fleet's; its Pod would then run
	// Flotilla's agent.
	waitFlotillasAgentDeployed(t, ds, "the Fleet hub to deploy Flotilla's agent")
	if err := fleetAgent.Stop(); err != nil {
		t.Logf("stopping Fleet's agent: %v", err)
	}
	framework.StartAgent(t, ds)

	framework.Eventually(t, "the Cluster to be Ready on the Flotilla hub", 2*timeout, func(ctx context.Context) error {
		c, err := flotilla.Fleet().FleetV1alpha1().Clusters(fleetWorkspace).Get(ctx, clusterName, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !isReady(conditions.Get(c.Status.Conditions, fleet.ConditionReady)) || c.Annotations[names.AgentKeyAnnotation] == "" {
			return fmt.Errorf("conditions %+v, key %q", c.Status.Conditions, c.Annotations[names.AgentKeyAnnotation])
		}
		return nil
	})
	framework.Eventually(t, "the Bundle to be Ready on the Flotilla hub", timeout, func(ctx context.Context) error {
		b, err := flotilla.Fleet().FleetV1alpha1().Bundles(fleetWorkspace).Get(ctx, "manifests", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !isReady(conditions.Get(b.Status.Conditions, fleet.ConditionReady)) || b.Status.Summary.DesiredReady != 1 {
			return fmt.Errorf("status %+v", b.Status)
		}
		return nil
	})
	t.Logf("from hub migrate to the migrated Cluster and its Bundle Ready on the Flotilla hub: %s", time.Since(started).Round(time.Second))
	clusters, err := flotilla.Fleet().FleetV1alpha1().Clusters(fleetWorkspace).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(clusters.Items) != 1 {
		t.Errorf("Clusters on the Flotilla hub: %d (err=%v), want the one moved", len(clusters.Items), err)
	}
	releases := ds.MustHelm("list", "-A", "-q", "--all")
	if n := len(strings.Fields(releases)); n != 2 {
		t.Errorf("helm list -A downstream shows %d releases, want fleet-agent and the Bundle's:\n%s", n, releases)
	}
}

// A cluster a Fleet hub imported with a kubeconfig Secret, running Fleet's agent,
// moves with `hub migrate`: the Flotilla hub gets the Cluster and its Secret, replaces
// Fleet's agent release with its own, and the cluster registers as the same Cluster.
func TestHubMigrateMovesAClusterFleetImported(t *testing.T) {
	controller := framework.FleetBinary(t, "fleetcontroller")
	agentBin := framework.FleetBinary(t, "fleetagent")
	t.Parallel()
	fleetHub := startFleetHub(t, controller)
	ds := framework.StartControlPlane(t, "imported", "--simulate-workloads")

	_, _ = fleetHub.Kubectl("", "create", "namespace", fleetWorkspace)
	fleetHub.MustKubectl("", "-n", fleetWorkspace, "create", "secret", "generic", "imported-kubeconfig", "--from-file=value="+ds.Kubeconfig)
	fleetHub.MustKubectl("apiVersion: fleet.cattle.io/v1alpha1\nkind: Cluster\nmetadata: {name: imported, namespace: "+fleetWorkspace+", labels: {env: dev}}\nspec: {kubeConfigSecret: imported-kubeconfig}\n", "apply", "-f", "-")
	framework.Eventually(t, "Fleet to import the cluster", timeout, func(ctx context.Context) error {
		_, err := ds.Client().AppsV1().Deployments(names.SystemNamespace).Get(ctx, "fleet-agent", metav1.GetOptions{})
		return err
	})
	fleetAgent := startFleetAgent(t, agentBin, ds)
	framework.Eventually(t, "Fleet's agent to deploy its agent bundle", timeout, func(ctx context.Context) error {
		out, err := ds.Helm("-n", names.SystemNamespace, "list", "-q")
		if err != nil {
			return err
		}
		if strings.TrimSpace(out) != "fleet-agent-imported" {
			return fmt.Errorf("releases %q", out)
		}
		return nil
	})

	flotilla := framework.StartHub(t, framework.AllowLocalImports)
	started := time.Now()
	cmd := exec.Command(filepath.Join(framework.BinDir(t), "hub"), "migrate", "--from", fleetHub.Kubeconfig, "--kubeconfig", flotilla.Kubeconfig)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hub migrate: %v\n%s", err, out)
	}
	t.Logf("hub migrate:\n%s", out)
	if !strings.Contains(string(out), "move agent  Cluster                    "+fleetWorkspace+"/imported: imported with kubeconfig Secret imported-kubeconfig") {
		t.Errorf("hub migrate does not say it moves the imported cluster's agent")
	}

	waitFlotillasAgentDeployed(t, ds, "the Flotilla hub to replace Fleet's agent")
	if err := fleetAgent.Stop(); err != nil {
		t.Logf("stopping Fleet's agent: %v", err)
	}
	framework.StartAgent(t, ds)
	framework.Eventually(t, "the imported Cluster to be Ready on the Flotilla hub", 2*timeout, func(ctx context.Context) error {
		c, err := flotilla.Fleet().FleetV1alpha1().Clusters(fleetWorkspace).Get(ctx, "imported", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !isReady(conditions.Get(c.Status.Conditions, fleet.ConditionReady)) {
			return fmt.Errorf("conditions %+v", c.Status.Conditions)
		}
		return nil
	})
	t.Logf("from hub migrate to the imported Cluster Ready on the Flotilla hub: %s", time.Since(started).Round(time.Second))
	if releases := strings.Fields(ds.MustHelm("list", "-A", "-q", "--all")); len(releases) != 1 || releases[0] != names.AgentRelease {
		t.Errorf("releases downstream %v, want the Flotilla hub's %s alone", releases, names.AgentRelease)
	}
}
