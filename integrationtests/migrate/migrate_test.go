// Package migrate tests `hub migrate` between a hub of Fleet's API and a Flotilla
// hub. Here the source is a control plane with the fleet.cattle.io CRDs and objects
// as Fleet leaves them, so that the test runs everywhere; integrationtests/fleet moves
// a cluster from a hub run by Fleet's own controllers.
package migrate

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/dynamic"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/names"
)

const fleetObjects = `apiVersion: v1
kind: Namespace
metadata: {name: fleet-default}
---
apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterGroup
metadata: {name: dev, namespace: fleet-default, labels: {team: a}}
spec: {selector: {matchLabels: {env: dev}}}
---
apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata: {name: registered, namespace: fleet-default, labels: {env: dev, fleet.cattle.io/managed: "true"}}
spec: {clientID: kube-system-uid-of-registered}
---
apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata: {name: imported, namespace: fleet-default}
spec: {kubeConfigSecret: imported-kubeconfig}
---
apiVersion: v1
kind: Secret
metadata: {name: with-values, namespace: fleet-default}
type: fleet.cattle.io/bundle-values/v1alpha1
stringData: {values.yaml: "replicas: 2\n"}
---
apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata: {name: with-values, namespace: fleet-default}
spec:
  valuesHash: 0123abcd
  resources: [{name: cm.yaml, content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: cm}\n"}]
  targets: [{clusterGroup: dev}]
---
apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata: {name: simple-guestbook, namespace: fleet-default, labels: {fleet.cattle.io/repo-name: simple}}
spec:
  resources: [{name: cm.yaml, content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gb}\n"}]
---
apiVersion: v1
kind: Secret
metadata: {name: git-auth, namespace: fleet-default}
type: kubernetes.io/basic-auth
stringData: {username: u, password: p}
---
apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepo
metadata: {name: simple, namespace: fleet-default}
spec: {repo: "https://git.example.com/simple", clientSecretName: git-auth, paths: [simple], disablePolling: true}
`

func TestHubMigrateCopiesAFleetHubsObjects(t *testing.T) {
	t.Parallel()
	source := framework.StartControlPlane(t, "fleet-api")
	source.MustKubectl("", "apply", "-f", filepath.Join(framework.RepoRoot(t), "charts/fleet-like/hub/crds"))
	framework.Eventually(t, "the CRDs to be served", time.Minute, func(ctx context.Context) error {
		_, err := source.Kubectl(fleetObjects, "apply", "-f", "-")
		return err
	})
	// As Fleet records a registered cluster's agent.
	clusters := dynamicFor(t, source).Resource(fleet.SchemeGroupVersion.WithResource("clusters")).Namespace("fleet-default")
	c, err := clusters.Get(context.Background(), "registered", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = unstructured.SetNestedField(c.Object, names.SystemNamespace, "status", "agent", "namespace")
	_ = unstructured.SetNestedField(c.Object, time.Now().UTC().Format(time.RFC3339), "status", "agent", "lastSeen")
	if _, err := clusters.UpdateStatus(context.Background(), c, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The imported cluster runs Fleet's agent as Fleet's import leaves it.
	imported := framework.StartControlPlane(t, "imported")
	standInForFleetsImportedAgent(t, imported)
	source.MustKubectl("", "-n", "fleet-default", "create", "secret", "generic", "imported-kubeconfig", "--from-file=value="+imported.Kubeconfig)

	hub := framework.StartHub(t, framework.AllowLocalImports)
	migrate := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(filepath.Join(framework.BinDir(t), "hub"), append([]string{"migrate", "--from", source.Kubeconfig, "--kubeconfig", hub.Kubeconfig}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("hub migrate %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	expect := func(out string, lines ...string) {
		t.Helper()
		for _, want := range lines {
			if !strings.Contains(out, want) {
				t.Errorf("hub migrate does not say %q:\n%s", want, out)
			}
		}
	}

	plan := migrate("--dry-run")
	expect(plan,
		"copy        Cluster                    fleet-default/registered",
		"move agent  Cluster                    fleet-default/registered",
		"copy        Cluster                    fleet-default/imported",
		"copy        Secret                     fleet-default/imported-kubeconfig",
		"move agent  Cluster                    fleet-default/imported: imported with kubeconfig Secret imported-kubeconfig",
		"copy        Bundle                     fleet-default/with-values",
		"copy        Secret                     fleet-default/with-values",
		"skip        Bundle                     fleet-default/simple-guestbook: made by GitRepo simple",
		"copy        GitRepo                    fleet-default/simple",
		"copy        Secret                     fleet-default/git-auth",
		"# would move: ")
	if _, err := hub.Client().CoreV1().Namespaces().Get(context.Background(), "fleet-default", metav1.GetOptions{}); err == nil {
		t.Error("the dry run made the workspace on the Flotilla hub")
	}

	out := migrate("--agent-token-ttl", "2h")
	expect(out, "move agent  Cluster                    fleet-default/registered: Bundle fleet-agent-to-flotilla-registered on the Fleet hub")
	f := hub.Fleet().FleetV1alpha1()
	ctx := context.Background()
	moved, err := f.Clusters("fleet-default").Get(ctx, "registered", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if moved.Spec.ClientID != "kube-system-uid-of-registered" || moved.Labels["env"] != "dev" || moved.Labels["fleet.cattle.io/managed"] != "" {
		t.Errorf("copied Cluster: clientID %q, labels %v", moved.Spec.ClientID, moved.Labels)
	}
	if b, err := f.Bundles("fleet-default").Get(ctx, "with-values", metav1.GetOptions{}); err != nil || b.Spec.ValuesHash != "0123abcd" {
		t.Errorf("copied Bundle: %v", err)
	}
	if s, err := hub.Client().CoreV1().Secrets("fleet-default").Get(ctx, "with-values", metav1.GetOptions{}); err != nil || string(s.Data["values.yaml"]) != "replicas: 2\n" {
		t.Errorf("the Bundle's values Secret: %v", err)
	}
	if s, err := hub.Client().CoreV1().Secrets("fleet-default").Get(ctx, "git-auth", metav1.GetOptions{}); err != nil || string(s.Data["password"]) != "p" {
		t.Errorf("the GitRepo's Secret: %v", err)
	}
	if _, err := f.Bundles("fleet-default").Get(ctx, "simple-guestbook", metav1.GetOptions{}); err == nil {
		t.Error("a GitRepo's Bundle was copied; the GitRepo makes its own")
	}
	token, err := f.ClusterRegistrationTokens("fleet-default").Get(ctx, "migrate-registered", metav1.GetOptions{})
	if err != nil || token.Labels[names.ClusterLabel] != "registered" || token.Spec.TTL == nil || token.Spec.TTL.Duration != 2*time.Hour {
		t.Fatalf("the token bound to the moved Cluster: %+v, %v", token, err)
	}

	// On the Fleet hub: the Cluster's agent is no longer Fleet's to manage, and a
	// Bundle for it alone deploys Flotilla's agent with that token.
	c, err = clusters.Get(ctx, "registered", metav1.GetOptions{})
	if err != nil || c.GetLabels()["fleet.cattle.io/non-managed-agent"] != "true" {
		t.Errorf("Fleet's Cluster labels %v (err=%v)", c.GetLabels(), err)
	}
	b, err := dynamicFor(t, source).Resource(fleet.SchemeGroupVersion.WithResource("bundles")).Namespace("fleet-default").Get(ctx, "fleet-agent-to-flotilla-registered", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	release, _, _ := unstructured.NestedString(b.Object, "spec", "helm", "releaseName")
	tokenName, _, _ := unstructured.NestedString(b.Object, "spec", "helm", "values", "tokenName")
	url, _, _ := unstructured.NestedString(b.Object, "spec", "helm", "values", "apiServerURL")
	if release != names.AgentRelease || tokenName != "migrate-registered" || url == "" {
		t.Errorf("the migration Bundle: release %q, token %q, hub %q", release, tokenName, url)
	}

	// The imported cluster: the Flotilla hub replaces Fleet's agent with its own, which
	// registers as the same Cluster.
	framework.Eventually(t, "the Flotilla hub to deploy its agent into the imported cluster", 3*time.Minute, func(ctx context.Context) error {
		c, err := f.Clusters("fleet-default").Get(ctx, "imported", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.Status.AgentDeployedGeneration == nil {
			return fmt.Errorf("not deployed yet: %+v", c.Status.Conditions)
		}
		return nil
	})
	framework.StartAgent(t, imported)
	framework.Eventually(t, "the imported Cluster to be Ready on the Flotilla hub", 3*time.Minute, func(ctx context.Context) error {
		c, err := f.Clusters("fleet-default").Get(ctx, "imported", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if ready := conditions.Get(c.Status.Conditions, fleet.ConditionReady); ready == nil || ready.Status != corev1.ConditionTrue {
			return fmt.Errorf("conditions %+v", c.Status.Conditions)
		}
		return nil
	})
	if releases := strings.Fields(imported.MustHelm("list", "-A", "-q", "--all")); len(releases) != 1 || releases[0] != names.AgentRelease {
		t.Errorf("releases in the imported cluster %v, want the hub's %s alone", releases, names.AgentRelease)
	}
	if _, err := imported.Client().NetworkingV1().NetworkPolicies(names.SystemNamespace).Get(ctx, "default-allow-all", metav1.GetOptions{}); err == nil {
		t.Error("Fleet's agent's NetworkPolicy is left behind")
	}
	cm, err := imported.Client().CoreV1().ConfigMaps(names.SystemNamespace).Get(ctx, "fleet-agent", metav1.GetOptions{})
	if err != nil || cm.Annotations["meta.helm.sh/release-name"] != names.AgentRelease {
		t.Errorf("the ConfigMap Fleet's import applied is not the hub's release's: %v %v", cm.Annotations, err)
	}
	events := hub.MustKubectl("", "-n", "fleet-default", "get", "events", "--field-selector", "involvedObject.name=imported,reason=FleetAgentReplaced", "-o", "name")
	if strings.TrimSpace(events) == "" {
		t.Error("no FleetAgentReplaced event on the imported Cluster")
	}

	// Again: nothing new, nothing overwritten.
	again := migrate()
	expect(again, "exists      Cluster                    fleet-default/registered", "exists      Bundle                     fleet-default/with-values")
	if strings.Contains(again, "\ncopy ") {
		t.Errorf("a second run copies again:\n%s", again)
	}
}

// fleetsImportedAgent is what Fleet's import leaves in a cluster: objects applied as a
// wrangler object set, adopted by its agent bundle's release fleet-agent-<cluster>,
// which also has objects of its own.
const fleetsImportedAgent = `apiVersion: v1
kind: ServiceAccount
metadata: {name: fleet-agent}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: fleet-agent}
spec:
  selector: {matchLabels: {app: fleet-agent}}
  template:
    metadata: {labels: {app: fleet-agent}}
    spec:
      serviceAccountName: fleet-agent
      containers: [{name: fleet-agent, image: "rancher/fleet-agent:v0.13.0"}]
---
apiVersion: networking.k8s.io/v1
kind: NetworkPolicy
metadata: {name: default-allow-all}
spec: {podSelector: {}, ingress: [{}], egress: [{}], policyTypes: [Ingress, Egress]}
`

// standInForFleetsImportedAgent puts into ds what Fleet's import and agent bundle
// leave there: a ConfigMap applied outside Helm (marked as Fleet's object set), and
// the release fleet-agent-imported with the agent's Deployment and ServiceAccount.
func standInForFleetsImportedAgent(t *testing.T, ds *framework.Cluster) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{
		"Chart.yaml":           "apiVersion: v2\nname: fleet-agent\nversion: 0.13.0\n",
		"templates/agent.yaml": fleetsImportedAgent,
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	ds.MustHelm("-n", names.SystemNamespace, "install", "--create-namespace", "fleet-agent-imported", dir)
	ds.MustKubectl("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fleet-agent, namespace: "+names.SystemNamespace+
		", annotations: {objectset.rio.cattle.io/id: fleet-agent-bootstrap}}\ndata: {config: '{}'}\n", "apply", "-f", "-")
}

func dynamicFor(t *testing.T, c *framework.Cluster) dynamic.Interface {
	t.Helper()
	client, err := dynamic.NewForConfig(c.RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	return client
}
