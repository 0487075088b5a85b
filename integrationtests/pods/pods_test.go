// Package pods runs the journeys with real Pods: downstream clusters are control
// planes with a node (hub controlplane --node: containerd, kubelet, kube-proxy,
// scheduler) that runs the agent, the hub and Bundles' workloads from the images
// make images builds. Where this machine cannot run a node, each test skips with one
// line saying why. One node runs on a machine at a time, so no test here is parallel.
package pods

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

func TestJourneyJ1WithAnAgentPod(t *testing.T) {
	ds := framework.StartNodeCluster(t, "downstream")
	hub := framework.StartHubForPods(t)
	out := framework.RunJourney(t, "integrationtests/journeys/j1.sh", "HUB="+hub.Kubeconfig, "DS="+ds.Kubeconfig, "AGENT=")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "helm install to Ready") || strings.HasPrefix(line, "J1 passed") {
			t.Log(line)
		}
	}
	t.Logf("agent Pod memory (working set): %s", podMemory(t, ds, "cattle-fleet-system", "app=fleet-agent"))
	// The agent bundle took the release over without replacing the Pod that registered.
	if rs := strings.Fields(ds.MustKubectl("", "-n", "cattle-fleet-system", "get", "replicasets", "-l", "app=fleet-agent", "-o", "name")); len(rs) != 1 {
		t.Errorf("the agent's Pod was replaced after it registered: ReplicaSets %v", rs)
	}
}

// podMemory is the working set of the Pods matching selector, as the kubelet's
// summary API reports it through the API server.
func podMemory(t *testing.T, c *framework.Cluster, namespace, selector string) string {
	t.Helper()
	pods := strings.Fields(c.MustKubectl("", "-n", namespace, "get", "pods", "-l", selector, "-o", "jsonpath={.items[*].metadata.name}"))
	node := c.MustKubectl("", "get", "nodes", "-o", "jsonpath={.items[0].metadata.name}")
	var found []string
	framework.Eventually(t, "memory of "+strings.Join(pods, ", "), 2*time.Minute, func(ctx context.Context) error {
		raw, err := c.Kubectl("", "get", "--raw", "/api/v1/nodes/"+node+"/proxy/stats/summary")
		if err != nil {
			return err
		}
		var summary struct {
			Pods []struct {
				PodRef     struct{ Name, Namespace string }
				Containers []struct {
					Memory *struct {
						WorkingSetBytes *uint64
					}
				}
			}
		}
		if err := json.Unmarshal([]byte(raw), &summary); err != nil {
			return err
		}
		found = found[:0]
		for _, p := range summary.Pods {
			for _, name := range pods {
				if p.PodRef.Namespace != namespace || p.PodRef.Name != name {
					continue
				}
				// Pod-level figures read 0 on cgroup v1 machines here; the containers' add up.
				var bytes uint64
				for _, c := range p.Containers {
					if c.Memory == nil || c.Memory.WorkingSetBytes == nil {
						return fmt.Errorf("no memory figure yet for %s", name)
					}
					bytes += *c.Memory.WorkingSetBytes
				}
				found = append(found, fmt.Sprintf("%s %.1f MiB", name, float64(bytes)/(1<<20)))
			}
		}
		if len(found) < len(pods) {
			return fmt.Errorf("the summary has %d of %d Pods", len(found), len(pods))
		}
		return nil
	})
	return strings.Join(found, ", ")
}

// registerAgentPod registers ds with hub the J1 way, labelled env=dev: helm install
// of the fleet-agent chart with a token's values; the agent runs as a Pod.
func registerAgentPod(t *testing.T, hub *framework.Hub, ds *framework.Cluster) string {
	t.Helper()
	values := hub.CreateToken("clusters", "pods", "")
	framework.InstallAgent(t, ds, values, "--set-string", "labels.env=dev")
	var name string
	framework.Eventually(t, "a Ready Cluster", 3*time.Minute, func(ctx context.Context) error {
		out, err := hub.Kubectl("", "-n", "clusters", "get", "clusters.fleet.cattle.io", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.status.conditions[?(@.type=="Ready")].status}{"\n"}{end}`)
		if err != nil {
			return err
		}
		fields := strings.Fields(out)
		if len(fields) != 2 || fields[1] != "True" {
			return fmt.Errorf("clusters: %q", out)
		}
		name = fields[0]
		return nil
	})
	return name
}

func TestJourneyJ6ARealDeploymentRollsOut(t *testing.T) {
	ds := framework.StartNodeCluster(t, "dev")
	hub := framework.StartHubForPods(t)
	registerAgentPod(t, hub, ds)

	bundle := func(image string) string {
		return `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: hello
  namespace: clusters
spec:
  defaultNamespace: hello
  resources:
  - name: hello.yaml
    content: |
      apiVersion: apps/v1
      kind: Deployment
      metadata:
        name: hello
      spec:
        replicas: 2
        selector:
          matchLabels: {app: hello}
        template:
          metadata:
            labels: {app: hello}
          spec:
            containers:
            - name: hello
              image: ` + image + `
              imagePullPolicy: IfNotPresent
              securityContext: {runAsNonRoot: true, readOnlyRootFilesystem: true, allowPrivilegeEscalation: false}
  targets:
  - clusterSelector:
      matchLabels: {env: dev}
`
	}
	bundleState := func() string {
		out, _ := hub.Kubectl("", "-n", "clusters", "get", "bundles.fleet.cattle.io", "hello", "-o",
			`jsonpath={.status.display.readyClusters} {.status.display.state} {.status.conditions[?(@.type=="Ready")].status} {.status.conditions[?(@.type=="Ready")].message}`)
		return out
	}

	// An image the node does not have: the kubelet cannot start it and nothing can
	// pull it, so the Bundle must not turn Ready.
	hub.MustKubectl(bundle("flotilla/not-loaded:1.0"), "apply", "-f", "-")
	framework.Eventually(t, "the Deployment created downstream", 2*time.Minute, func(ctx context.Context) error {
		_, err := ds.Kubectl("", "-n", "hello", "get", "deployment", "hello")
		return err
	})
	framework.Eventually(t, "the downstream Pods failing to get their image", 2*time.Minute, func(ctx context.Context) error {
		out, err := ds.Kubectl("", "-n", "hello", "get", "pods", "-o", "jsonpath={.items[*].status.containerStatuses[*].state.waiting.reason}")
		if err != nil || !strings.Contains(out, "Err") && !strings.Contains(out, "BackOff") {
			return fmt.Errorf("container states %q (%v)", out, err)
		}
		return nil
	})
	// The Bundle says why, in the kubelet's words, and is not Ready.
	framework.Eventually(t, "the Bundle to tell the image problem", 2*time.Minute, func(ctx context.Context) error {
		if state := bundleState(); !strings.Contains(state, "not-loaded") || !strings.Contains(state, "Pull") {
			return fmt.Errorf("Bundle: %s", state)
		}
		return nil
	})
	if state := bundleState(); strings.HasPrefix(state, "1/1") {
		t.Fatalf("the Bundle is ready with no Pod running: %s", state)
	} else {
		t.Logf("Bundle with an image the node lacks: %s", state)
	}

	// The image the node has: the kubelet runs the Pods and reports them ready.
	applied := time.Now()
	hub.MustKubectl(bundle("flotilla/pause:"+framework.ImageTag(t)), "apply", "-f", "-")
	if out, err := hub.Kubectl("", "-n", "clusters", "wait", "--for=condition=Ready", "bundles.fleet.cattle.io/hello", "--timeout=180s"); err != nil {
		t.Fatalf("the Bundle did not turn Ready: %v\n%s\nstate: %s\ndownstream:\n%s", err, out, bundleState(),
			ds.MustKubectl("", "-n", "hello", "get", "pods", "-o", "wide"))
	}
	t.Logf("kubectl apply to Bundle Ready with 2 running Pods: %s", time.Since(applied).Round(100*time.Millisecond))
	ready := ds.MustKubectl("", "-n", "hello", "get", "deployment", "hello", "-o", "jsonpath={.status.readyReplicas}/{.status.replicas}")
	if ready != "2/2" {
		t.Fatalf("Bundle Ready while the Deployment has %s ready replicas", ready)
	}
	t.Logf("downstream:\n%s", ds.MustKubectl("", "-n", "hello", "get", "pods", "-o", "wide"))
}

// The hub is upgraded to deploy a new agent image: every agent upgrades itself
// through its agent bundle, its Pod is replaced, and the new Pod carries on as the
// same cluster.
func TestTheAgentUpgradesItselfToANewImage(t *testing.T) {
	ds := framework.StartNodeCluster(t, "downstream")
	hub := framework.StartHubForPods(t)
	name := registerAgentPod(t, hub, ds)
	agentPod := func() (pod, image, phase string) {
		out, _ := ds.Kubectl("", "-n", "cattle-fleet-system", "get", "pods", "-l", "app=fleet-agent", "-o",
			`jsonpath={range .items[*]}{.metadata.name} {.spec.containers[0].image} {.status.phase}{"\n"}{end}`)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if f := strings.Fields(lines[0]); len(lines) == 1 && len(f) == 3 {
			return f[0], f[1], f[2]
		}
		return "", "", out
	}
	oldPod, oldImage, _ := agentPod()
	identity := ds.MustKubectl("", "-n", "cattle-fleet-system", "get", "secret", "fleet-agent", "-o", "jsonpath={.data.clusterName}")

	const newTag = "0.0.0-upgrade-test"
	ds.LoadImages(filepath.Join(framework.BuildImages(t, newTag), "agent.tar"))
	newImage := "flotilla/agent:" + newTag
	upgraded := time.Now()
	hub.Restart("--agent-image-tag=" + newTag)

	framework.Eventually(t, "a new agent Pod running "+newImage, 3*time.Minute, func(ctx context.Context) error {
		pod, image, phase := agentPod()
		if pod == oldPod || image != newImage || phase != "Running" {
			return fmt.Errorf("agent Pods: %s %s %s", pod, image, phase)
		}
		return nil
	})
	newPod, _, _ := agentPod()
	framework.Eventually(t, "the agent bundle Ready at the new image", 3*time.Minute, func(ctx context.Context) error {
		out, err := hub.Kubectl("", "-n", "clusters", "get", "bundles.fleet.cattle.io", "fleet-agent-"+name, "-o",
			`jsonpath={.status.conditions[?(@.type=="Ready")].status} {.spec.helm.values.image.tag}`)
		if err != nil || out != "True "+newTag {
			return fmt.Errorf("agent bundle: %q (%v)", out, err)
		}
		return nil
	})
	t.Logf("hub restarted with a new agent image to the agent bundle Ready: %s (Pod %s %s replaced by %s %s)",
		time.Since(upgraded).Round(100*time.Millisecond), oldPod, oldImage, newPod, newImage)

	// The same cluster: one Cluster, the identity kept, checking in from the new Pod.
	if after := ds.MustKubectl("", "-n", "cattle-fleet-system", "get", "secret", "fleet-agent", "-o", "jsonpath={.data.clusterName}"); after != identity {
		t.Errorf("the agent's identity changed from %s to %s", identity, after)
	}
	// The heartbeat Lease in the cluster's namespace, renewed by the new Pod.
	since := time.Now()
	namespace := hub.MustKubectl("", "-n", "clusters", "get", "clusters.fleet.cattle.io", name, "-o", "jsonpath={.status.namespace}")
	framework.Eventually(t, "a heartbeat from the new agent", 2*time.Minute, func(ctx context.Context) error {
		out, err := hub.Kubectl("", "-n", namespace, "get", "lease", "fleet-agent", "-o", "jsonpath={.spec.renewTime}")
		if err != nil {
			return err
		}
		if renewed, err := time.Parse(time.RFC3339Nano, out); err != nil || !renewed.After(since) {
			return fmt.Errorf("Lease renewed at %q, not after %s", out, since.Format(time.RFC3339Nano))
		}
		return nil
	})
	if clusters := strings.TrimSpace(hub.MustKubectl("", "-n", "clusters", "get", "clusters.fleet.cattle.io", "-o", "name")); clusters != "cluster.fleet.cattle.io/"+name {
		t.Errorf("Clusters after the upgrade: %s", clusters)
	}
	if releases := ds.MustKubectl("", "get", "secrets", "-A", "-l", "owner=helm,name=fleet-agent", "-o", "jsonpath={.items[*].metadata.labels.status}"); strings.Count(releases, "deployed") != 1 || strings.Contains(releases, "pending") {
		t.Errorf("fleet-agent release revisions: %s", releases)
	}
}

func TestJourneyJ3WithTheAgentPodTheHubInstalls(t *testing.T) {
	ds := framework.StartNodeCluster(t, "downstream")
	hub := framework.StartHubForPods(t, framework.AllowLocalImports)
	out := framework.RunJourney(t, "integrationtests/journeys/j3.sh", "HUB="+hub.Kubeconfig, "DS="+ds.Kubeconfig, "AGENT=")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "kubectl apply to Ready") || strings.HasPrefix(line, "J3 passed") {
			t.Log(line)
		}
	}
	t.Logf("downstream:\n%s", ds.MustKubectl("", "-n", "cattle-fleet-system", "get", "pods", "-o", "wide"))
}

// The hub chart installed with helm on a cluster with a node: the hub runs as a Pod
// from its image, with the chart's ServiceAccount, and registers the cluster it runs
// on through an agent Pod (as Fleet's "local" cluster).
func TestTheHubChartRunsTheHubAsAPod(t *testing.T) {
	host := framework.StartNodeCluster(t, "hub-host", "--identity-authorizer=false")
	url := "https://" + net.JoinHostPort(framework.NodeIP(t).String(), strconv.Itoa(host.Port))
	chart := filepath.Join(framework.RepoRoot(t), "charts", "fleet-like", "hub")
	installed := time.Now()
	if out, err := host.Helm("install", "flotilla", chart, "-n", "cattle-fleet-system", "--create-namespace",
		"--set", "apiServerURL="+url, "--wait", "--timeout", "3m"); err != nil {
		t.Fatalf("helm install of the hub chart: %v\n%s\n%s", err, out,
			host.MustKubectl("", "-n", "cattle-fleet-system", "describe", "pods"))
	}
	t.Logf("helm install of the hub chart to a Ready hub Pod: %s", time.Since(installed).Round(100*time.Millisecond))

	hub := &framework.Hub{Cluster: *host}
	values := hub.CreateToken("clusters", "local", "")
	const agentNamespace = "cattle-fleet-local-system"
	registered := time.Now()
	if out, err := host.Helm("install", "fleet-agent", framework.AgentChart(t), "-n", agentNamespace, "--create-namespace",
		"--values", values, "--set", "agentNamespace="+agentNamespace, "--set-string", "labels.name=local"); err != nil {
		t.Fatalf("helm install of the agent chart: %v\n%s", err, out)
	}
	framework.Eventually(t, "the cluster Ready through the hub Pod", 3*time.Minute, func(ctx context.Context) error {
		out, err := host.Kubectl("", "-n", "clusters", "get", "clusters.fleet.cattle.io", "-l", "name=local", "-o",
			`jsonpath={.items[*].status.conditions[?(@.type=="Ready")].status}`)
		if err != nil || out != "True" {
			return fmt.Errorf("Ready: %q %v", out, err)
		}
		return nil
	})
	t.Logf("helm install of the agent to a Ready Cluster: %s", time.Since(registered).Round(100*time.Millisecond))
	t.Logf("hub Pod memory (working set): %s", podMemory(t, host, "cattle-fleet-system", "app=flotilla-hub"))
	t.Logf("agent Pod memory (working set): %s", podMemory(t, host, agentNamespace, "app=fleet-agent"))
	if log := host.MustKubectl("", "-n", "cattle-fleet-system", "logs", "deployment/flotilla-hub"); strings.Contains(log, "forbidden") {
		t.Errorf("the hub Pod was refused something its RBAC should allow:\n%s", log)
	}
}
