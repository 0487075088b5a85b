// Package bundles tests journey J6 and what goes with it: Bundles reach the clusters
// they target, agents install them with Helm and report back, the hub folds the
// states into the columns users read, heartbeats carry node counts, offline clusters
// are not shown Ready, and each agent is upgraded through its own agent bundle.
// Everything runs against a real hub and real downstream control planes.
package bundles

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/names"
)

const (
	workspace = "clusters"
	timeout   = 2 * time.Minute
)

// downstream is a registered downstream cluster with its running agent.
type downstream = framework.Downstream

// register registers a cluster labelled env=<value> for each name (see
// framework.RegisterClusters).
func register(t *testing.T, hub *framework.Hub, labels map[string]string, extra ...string) []*downstream {
	t.Helper()
	return framework.RegisterClusters(t, hub, workspace, labels, extra...)
}

func getCluster(ctx context.Context, hub *framework.Hub, name string) (*fleet.Cluster, error) {
	return hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, name, framework.Get)
}

// waitColumn waits until the Cluster's printed column (a jsonpath of kubectl get)
// reads want.
func waitClusterDisplay(t *testing.T, hub *framework.Hub, name, what string, read func(*fleet.Cluster) string, want string) {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("Cluster %s %s to read %q", name, what, want), timeout, func(ctx context.Context) error {
		c, err := getCluster(ctx, hub, name)
		if err != nil {
			return err
		}
		if got := read(c); got != want {
			return fmt.Errorf("%s is %q; conditions %+v", what, got, c.Status.Conditions)
		}
		return nil
	})
}

func readyBundles(c *fleet.Cluster) string { return c.Status.Display.ReadyBundles }

func readyCondition(c *fleet.Cluster) string {
	for _, cond := range c.Status.Conditions {
		if cond.Type == fleet.ConditionReady {
			return string(cond.Status)
		}
	}
	return ""
}

const manifestsBundle = `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: plain
  namespace: clusters
spec:
  defaultNamespace: plain-app
  resources:
  - name: configmap.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: plain-config
      data:
        greeting: "%s"
        braces: "{{ not a template }}"
  targets:
  - clusterSelector:
      matchLabels:
        env: dev
`

const chartBundle = `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: charted
  namespace: clusters
spec:
  defaultNamespace: charted-app
  helm:
    releaseName: charted
    values:
      replicas: %d
  resources:
  - name: Chart.yaml
    content: |
      apiVersion: v2
      name: charted
      version: 1.0.0
  - name: values.yaml
    content: |
      replicas: 1
  - name: templates/config.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: {{ .Release.Name }}-config
      data:
        replicas: "{{ .Values.replicas }}"
  targets:
  - clusterSelector:
      matchLabels:
        env: dev
`

// TestBundlesReachMatchingClusters is J6: a Bundle of plain manifests and one with a
// chart, both targeting env=dev, reach exactly the two matching clusters of three.
func TestBundlesReachMatchingClusters(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	clusters := register(t, hub, map[string]string{"dev-a": "dev", "dev-b": "dev", "prod-c": "prod"})
	byName := map[string]*downstream{}
	for _, d := range clusters {
		byName[d.Name] = d
	}
	devA, devB, prodC := byName["dev-a"], byName["dev-b"], byName["prod-c"]

	// Before any bundle, each cluster deploys its own agent bundle.
	for _, d := range clusters {
		waitClusterDisplay(t, hub, d.ClusterName, "BUNDLES-READY", readyBundles, "1/1")
	}
	start := time.Now()
	hub.MustKubectl(fmt.Sprintf(manifestsBundle, "hello"), "apply", "-f", "-")
	hub.MustKubectl(fmt.Sprintf(chartBundle, 2), "apply", "-f", "-")
	for _, name := range []string{"plain", "charted"} {
		waitBundleReady(t, hub, name, "2/2")
	}
	t.Logf("Bundles created to all BundleDeployments Ready on 2 clusters: %s", time.Since(start).Round(time.Millisecond))

	for _, d := range []*downstream{devA, devB} {
		waitClusterDisplay(t, hub, d.ClusterName, "BUNDLES-READY", readyBundles, "3/3")
		cm := getConfigMap(t, d, "plain-app", "plain-config")
		if cm.Data["greeting"] != "hello" || cm.Data["braces"] != "{{ not a template }}" {
			t.Errorf("%s: plain-config data %v", d.Name, cm.Data)
		}
		if cm := getConfigMap(t, d, "charted-app", "charted-config"); cm.Data["replicas"] != "2" {
			t.Errorf("%s: charted-config data %v, want replicas=2 from the Bundle's helm.values", d.Name, cm.Data)
		}
	}
	waitClusterDisplay(t, hub, prodC.ClusterName, "BUNDLES-READY", readyBundles, "1/1")
	if _, err := prodC.Client().CoreV1().Namespaces().Get(context.Background(), "plain-app", framework.Get); !apierrors.IsNotFound(err) {
		t.Errorf("prod-c got namespace plain-app (err=%v): it is not targeted", err)
	}
	out := hub.MustKubectl("", "-n", workspace, "get", "clusters.fleet.cattle.io")
	if !strings.Contains(out, "3/3") || !strings.Contains(out, "1/1") {
		t.Errorf("kubectl get clusters:\n%s", out)
	}
	t.Logf("kubectl get clusters.fleet.cattle.io:\n%s", out)
	t.Logf("kubectl get bundles:\n%s", hub.MustKubectl("", "-n", workspace, "get", "bundles.fleet.cattle.io"))

	// One Content per distinct set of resources: the two bundles, and one agent chart
	// shared by all three agent bundles.
	contents, err := hub.Fleet().FleetV1alpha1().Contents().List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(contents.Items) != 3 {
		t.Errorf("%d Contents, want 3 (two bundles and the shared agent chart)", len(contents.Items))
	}
	// The agent bundles name that Content instead of each carrying the chart.
	agentChart := ""
	for _, d := range clusters {
		b, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(context.Background(), names.AgentBundle(d.ClusterName), framework.Get)
		if err != nil {
			t.Fatal(err)
		}
		if b.Spec.ContentsID == "" || len(b.Spec.Resources) != 0 || (agentChart != "" && b.Spec.ContentsID != agentChart) {
			t.Errorf("agent bundle %s: contentsId %q and %d resources, want the shared Content %q and none inline", b.Name, b.Spec.ContentsID, len(b.Spec.Resources), agentChart)
		}
		agentChart = b.Spec.ContentsID
	}

	// A ClusterGroup of the dev clusters counts them and their bundles.
	hub.MustKubectl(`apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterGroup
metadata:
  name: dev
  namespace: clusters
spec:
  selector:
    matchLabels:
      env: dev
`, "apply", "-f", "-")
	waitGroup(t, hub, "dev", "2/2", "6/6")

	// Changing the Bundle upgrades both clusters.
	hub.MustKubectl(fmt.Sprintf(manifestsBundle, "bonjour"), "apply", "-f", "-")
	hub.MustKubectl(fmt.Sprintf(chartBundle, 3), "apply", "-f", "-")
	for _, d := range []*downstream{devA, devB} {
		framework.Eventually(t, d.Name+" to get the changed bundles", timeout, func(ctx context.Context) error {
			plain, err := d.Client().CoreV1().ConfigMaps("plain-app").Get(ctx, "plain-config", framework.Get)
			if err != nil {
				return err
			}
			charted, err := d.Client().CoreV1().ConfigMaps("charted-app").Get(ctx, "charted-config", framework.Get)
			if err != nil {
				return err
			}
			if plain.Data["greeting"] != "bonjour" || charted.Data["replicas"] != "3" {
				return fmt.Errorf("greeting %q replicas %q", plain.Data["greeting"], charted.Data["replicas"])
			}
			return nil
		})
		if out, err := d.Helm("history", "-n", "charted-app", "charted", "--max", "10"); err != nil || !strings.Contains(out, "Upgrade complete") {
			t.Errorf("%s: helm history charted: %v\n%s", d.Name, err, out)
		}
	}
	waitBundleReady(t, hub, "plain", "2/2")

	// Relabelling a cluster out of the selector removes its releases.
	hub.MustKubectl("", "-n", workspace, "label", "--overwrite", "clusters.fleet.cattle.io", devB.ClusterName, "env=prod")
	framework.Eventually(t, "dev-b's releases to be uninstalled", timeout, func(ctx context.Context) error {
		out, err := devB.Helm("list", "-A", "-q")
		if err != nil {
			return err
		}
		if strings.Contains(out, "plain") || strings.Contains(out, "charted") {
			return fmt.Errorf("helm list -A:\n%s", out)
		}
		return nil
	})
	if _, err := devB.Client().CoreV1().ConfigMaps("plain-app").Get(context.Background(), "plain-config", framework.Get); !apierrors.IsNotFound(err) {
		t.Errorf("plain-config still on dev-b after its release was removed (err=%v)", err)
	}
	waitBundleReady(t, hub, "plain", "1/1")
	waitClusterDisplay(t, hub, devB.ClusterName, "BUNDLES-READY", readyBundles, "1/1")
	waitGroup(t, hub, "dev", "1/1", "3/3")
	t.Logf("kubectl get clustergroups:\n%s", hub.MustKubectl("", "-n", workspace, "get", "clustergroups.fleet.cattle.io"))

	// One agent release per cluster: the agent bundle upgraded the one helm installed.
	for _, d := range clusters {
		out, err := d.Helm("list", "-A", "--filter", "fleet-agent", "-o", "json")
		if err != nil {
			t.Fatal(err)
		}
		if strings.Count(out, `"name":"fleet-agent"`) != 1 || strings.Contains(out, `"revision":"1"`) {
			t.Errorf("%s: helm list -A shows, for fleet-agent: %s (want one release, upgraded by its agent bundle)", d.Name, out)
		}
	}
}

func waitGroup(t *testing.T, hub *framework.Hub, name, clusters, bundles string) {
	t.Helper()
	framework.Eventually(t, "ClusterGroup "+name+" to count "+clusters+" clusters and "+bundles+" bundles", timeout, func(ctx context.Context) error {
		g, err := hub.Fleet().FleetV1alpha1().ClusterGroups(workspace).Get(ctx, name, framework.Get)
		if err != nil {
			return err
		}
		if g.Status.Display.ReadyClusters != clusters || g.Status.Display.ReadyBundles != bundles || fmt.Sprint(g.Status.ClusterCount) != strings.Split(clusters, "/")[1] {
			return fmt.Errorf("status %+v", g.Status)
		}
		return nil
	})
}

func waitBundleReady(t *testing.T, hub *framework.Hub, name, want string) {
	t.Helper()
	framework.Eventually(t, "Bundle "+name+" to be Ready "+want, timeout, func(ctx context.Context) error {
		b, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(ctx, name, framework.Get)
		if err != nil {
			return err
		}
		if b.Status.Display.ReadyClusters != want || b.Status.Summary.Ready != b.Status.Summary.DesiredReady {
			return fmt.Errorf("ready %q, summary %+v, conditions %+v", b.Status.Display.ReadyClusters, b.Status.Summary, b.Status.Conditions)
		}
		return nil
	})
}

func getConfigMap(t *testing.T, d *downstream, namespace, name string) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	defer func() {
		if t.Failed() {
			out, _ := d.Kubectl("", "get", "configmaps", "-A")
			rels, _ := d.Helm("list", "-A")
			t.Logf("%s: kubectl get configmaps -A:\n%s\nhelm list -A:\n%s", d.Name, out, rels)
		}
	}()
	framework.Eventually(t, fmt.Sprintf("ConfigMap %s/%s on %s", namespace, name, d.Name), timeout, func(ctx context.Context) error {
		var err error
		cm, err = d.Client().CoreV1().ConfigMaps(namespace).Get(ctx, name, framework.Get)
		return err
	})
	return cm
}

// TestHeartbeatShowsNodesAndOfflineClusters: nodes appear in NODES-READY and
// SAMPLE-NODE; a stopped agent turns its Cluster Ready=Unknown after the configured
// time, and a restarted one brings it back.
func TestHeartbeatShowsNodesAndOfflineClusters(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, "--cluster-offline-after", "10s")
	d := register(t, hub, map[string]string{"nodes": "dev"}, "--set", "checkinInterval=2s")[0]
	ctx := context.Background()
	for name, status := range map[string]corev1.ConditionStatus{"node-b": corev1.ConditionTrue, "node-a": corev1.ConditionFalse, "node-c": corev1.ConditionTrue} {
		node, err := d.Client().CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		node.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, LastHeartbeatTime: metav1.Now()}}
		if _, err := d.Client().CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitClusterDisplay(t, hub, d.ClusterName, "NODES-READY", func(c *fleet.Cluster) string { return c.Status.Display.ReadyNodes }, "2/3")
	waitClusterDisplay(t, hub, d.ClusterName, "SAMPLE-NODE", func(c *fleet.Cluster) string { return c.Status.Display.SampleNode }, "node-b")
	c, err := getCluster(ctx, hub, d.ClusterName)
	if err != nil {
		t.Fatal(err)
	}
	if c.Status.Agent.KubernetesVersion != "v1.37.2" || c.Status.Agent.AgentVersion == "" {
		t.Errorf("agent status %+v: want the downstream Kubernetes version and the agent version", c.Status.Agent)
	}
	waitClusterDisplay(t, hub, d.ClusterName, "Ready", readyCondition, "True")
	out := hub.MustKubectl("", "-n", workspace, "get", "clusters.fleet.cattle.io", d.ClusterName)
	if !strings.Contains(out, "2/3") || !strings.Contains(out, "node-b") {
		t.Errorf("kubectl get clusters:\n%s", out)
	}

	// A node turning Ready is reported without waiting for the next interval.
	node, err := d.Client().CoreV1().Nodes().Get(ctx, "node-a", framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	node.Status.Conditions[0].Status = corev1.ConditionTrue
	if _, err := d.Client().CoreV1().Nodes().UpdateStatus(ctx, node, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitClusterDisplay(t, hub, d.ClusterName, "NODES-READY", func(c *fleet.Cluster) string { return c.Status.Display.ReadyNodes }, "3/3")
	waitClusterDisplay(t, hub, d.ClusterName, "SAMPLE-NODE", func(c *fleet.Cluster) string { return c.Status.Display.SampleNode }, "node-a")

	// With nothing new to report, the agent renews its Lease instead of patching the
	// Cluster: the Cluster stays Ready on the Lease alone, well past the 10s after
	// its last status report.
	framework.Eventually(t, "the agent's Lease renewed 15s after its last status report", timeout, func(ctx context.Context) error {
		c, err := getCluster(ctx, hub, d.ClusterName)
		if err != nil {
			return err
		}
		lease, err := hub.Client().CoordinationV1().Leases(c.Status.Namespace).Get(ctx, names.AgentLease, framework.Get)
		if err != nil {
			return err
		}
		if lease.Spec.RenewTime == nil || lease.Spec.RenewTime.Sub(c.Status.Agent.LastSeen.Time) < 15*time.Second {
			return fmt.Errorf("Lease renewed at %v, status reported at %v", lease.Spec.RenewTime, c.Status.Agent.LastSeen)
		}
		return nil
	})
	if c, err = getCluster(ctx, hub, d.ClusterName); err != nil || readyCondition(c) != "True" {
		t.Fatalf("the cluster is not Ready while its agent renews its Lease (%v):\n%s", err, hub.MustKubectl("", "-n", workspace, "get", "clusters.fleet.cattle.io", d.ClusterName))
	}

	// The agent stops: after 10s without a check-in the cluster is offline, not Ready.
	if err := d.Agent.Stop(); err != nil {
		t.Fatal(err)
	}
	waitClusterDisplay(t, hub, d.ClusterName, "Ready", readyCondition, "Unknown")
	out = hub.MustKubectl("", "-n", workspace, "get", "clusters.fleet.cattle.io", d.ClusterName)
	if !strings.Contains(out, "the agent has not checked in since") {
		t.Errorf("kubectl get clusters does not say the cluster is offline:\n%s", out)
	}
	events := hub.MustKubectl("", "-n", workspace, "get", "events", "--field-selector", "reason=Offline,involvedObject.name="+d.ClusterName)
	if !strings.Contains(events, "The cluster is offline") {
		t.Errorf("no Offline event:\n%s", events)
	}
	d.Agent.Restart()
	waitClusterDisplay(t, hub, d.ClusterName, "Ready", readyCondition, "True")
}

const driftBundle = `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: %s
  namespace: clusters
spec:
  defaultNamespace: %s
  correctDrift:
    enabled: %v
  resources:
  - name: cm.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: settings
      data:
        mode: strict
  targets:
  - clusterName: %s
`

// TestDriftIsShownAndCorrected: a changed or deleted downstream object is put back
// when the Bundle asks for it, and shown as Modified when it does not.
func TestDriftIsShownAndCorrected(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	d := register(t, hub, map[string]string{"drift": "dev"})[0]
	ctx := context.Background()
	hub.MustKubectl(fmt.Sprintf(driftBundle, "corrected", "corrected", true, d.ClusterName), "apply", "-f", "-")
	hub.MustKubectl(fmt.Sprintf(driftBundle, "watched", "watched", false, d.ClusterName), "apply", "-f", "-")
	waitBundleReady(t, hub, "corrected", "1/1")
	waitBundleReady(t, hub, "watched", "1/1")
	cms := d.Client().CoreV1().ConfigMaps

	// Deleted: put back.
	if err := cms("corrected").Delete(ctx, "settings", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	getConfigMap(t, d, "corrected", "settings")
	// Changed: put back.
	if _, err := cms("corrected").Patch(ctx, "settings", "application/merge-patch+json", []byte(`{"data":{"mode":"lax"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the changed ConfigMap to be put back", timeout, func(ctx context.Context) error {
		cm, err := cms("corrected").Get(ctx, "settings", framework.Get)
		if err != nil {
			return err
		}
		if cm.Data["mode"] != "strict" {
			return fmt.Errorf("mode is %q", cm.Data["mode"])
		}
		return nil
	})

	// Without correctDrift the change stays and is reported.
	if _, err := cms("watched").Patch(ctx, "settings", "application/merge-patch+json", []byte(`{"data":{"mode":"lax"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the Bundle to show the modification", timeout, func(ctx context.Context) error {
		b, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(ctx, "watched", framework.Get)
		if err != nil {
			return err
		}
		if b.Status.Summary.Modified != 1 || !strings.Contains(readyMessage(b.Status.Conditions), "Modified(1)") ||
			!strings.Contains(readyMessage(b.Status.Conditions), "modified configmap watched/settings") {
			return fmt.Errorf("summary %+v conditions %+v", b.Status.Summary, b.Status.Conditions)
		}
		return nil
	})
	if cm, err := cms("watched").Get(ctx, "settings", framework.Get); err != nil || cm.Data["mode"] != "lax" {
		t.Errorf("the watched ConfigMap was changed back (%v, %v)", cm.Data, err)
	}

	// Deleting a Bundle removes its BundleDeployment and its release downstream.
	hub.MustKubectl("", "-n", workspace, "delete", "bundle", "corrected")
	framework.Eventually(t, "the deleted Bundle's release to be uninstalled", timeout, func(ctx context.Context) error {
		if out, err := d.Helm("list", "-n", "corrected", "-q"); err != nil || strings.TrimSpace(out) != "" {
			return fmt.Errorf("helm list: %q %v", out, err)
		}
		if _, err := cms("corrected").Get(ctx, "settings", framework.Get); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ConfigMap still there (err=%v)", err)
		}
		return nil
	})
}

func readyMessage(conds []fleet.Condition) string {
	for _, c := range conds {
		if c.Type == fleet.ConditionReady {
			return c.Message
		}
	}
	return ""
}

// TestBadBundlesSayWhy: what cannot be deployed is reported where users look.
func TestBadBundlesSayWhy(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	d := register(t, hub, map[string]string{"bad": "dev"})[0]

	hub.MustKubectl(fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: broken-chart
  namespace: clusters
spec:
  resources:
  - name: Chart.yaml
    content: "apiVersion: v2\nname: broken\nversion: 1.0.0\n"
  - name: templates/cm.yaml
    content: "{{ .Values.missing.field }}"
  targets:
  - clusterName: %s
`, d.ClusterName), "apply", "-f", "-")
	framework.Eventually(t, "the Helm error to reach the Bundle", timeout, func(ctx context.Context) error {
		b, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(ctx, "broken-chart", framework.Get)
		if err != nil {
			return err
		}
		msg := readyMessage(b.Status.Conditions)
		if b.Status.Summary.ErrApplied != 1 || !strings.Contains(msg, "ErrApplied(1)") || !strings.Contains(msg, "nil pointer evaluating interface {}.field") {
			return fmt.Errorf("summary %+v, Ready message %q", b.Status.Summary, msg)
		}
		return nil
	})
	waitClusterDisplay(t, hub, d.ClusterName, "BUNDLES-READY", readyBundles, "1/2")
	out := hub.MustKubectl("", "-n", workspace, "get", "clusters.fleet.cattle.io", d.ClusterName)
	if !strings.Contains(out, "ErrApplied(1) [Bundle clusters/broken-chart") {
		t.Errorf("kubectl get clusters does not show the failing bundle:\n%s", out)
	}

	// A Bundle naming a Content that does not exist says so, and deploys once the
	// Content exists: here the hub stores it for another Bundle with those resources.
	resources := []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: stored\n"}}
	stored, err := content.Encode(resources)
	if err != nil {
		t.Fatal(err)
	}
	named := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "named-content", Namespace: workspace},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "named-content"},
			ContentsID:              stored.Name, Targets: []fleet.BundleTarget{{ClusterName: d.ClusterName}},
		},
	}
	if _, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Create(context.Background(), named, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitProcessed(t, hub, "named-content", "ContentNotFound", stored.Name+`", which does not exist`)
	both := named.DeepCopy()
	both.Name, both.Spec.Resources = "both", resources
	if _, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Create(context.Background(), both, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitProcessed(t, hub, "both", "InvalidResources", "spec.resources and spec.contentsId are both set")
	inline := named.DeepCopy()
	inline.Name, inline.Spec.ContentsID, inline.Spec.Resources, inline.Spec.DefaultNamespace = "inline", "", resources, "inline"
	if _, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Create(context.Background(), inline, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitBundleReady(t, hub, "named-content", "1/1")

	hub.MustKubectl(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: bad-selector
  namespace: clusters
spec:
  resources:
  - name: cm.yaml
    content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
  targets:
  - clusterSelector:
      matchExpressions:
      - key: env
        operator: Sideways
`, "apply", "-f", "-")
	waitProcessed(t, hub, "bad-selector", "InvalidTargets", "target000", "Sideways")
}

// waitProcessed waits until the Bundle's Processed condition has reason and a message
// containing each of parts.
func waitProcessed(t *testing.T, hub *framework.Hub, name, reason string, parts ...string) {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("Bundle %s to be refused with %s", name, reason), timeout, func(ctx context.Context) error {
		b, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(ctx, name, framework.Get)
		if err != nil {
			return err
		}
		for _, c := range b.Status.Conditions {
			if c.Type != fleet.ConditionProcessed || c.Reason != reason {
				continue
			}
			for _, part := range parts {
				if !strings.Contains(c.Message, part) {
					return fmt.Errorf("Processed message %q lacks %q", c.Message, part)
				}
			}
			return nil
		}
		return fmt.Errorf("conditions %+v", b.Status.Conditions)
	})
}
