package framework

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// startTimeout bounds how long a hub or control plane may take to become ready. It
// is generous because tests run side by side on small machines; it is a guard against
// hanging, not an assertion about speed.
const startTimeout = 3 * time.Minute

// Hub is a running hub with its embedded control plane.
type Hub struct {
	Cluster
	// HealthURL is the base URL of the hub's /healthz and /readyz.
	HealthURL string
	// MetricsURL is the URL of the hub's /metrics.
	MetricsURL string
}

// AllowLocalImports lets a hub import clusters whose API servers listen on this
// machine's loopback address, as every downstream control plane of the tests does
// (see --import-allowed-networks).
const AllowLocalImports = "--import-allowed-networks=127.0.0.0/8"

// StartHub starts `hub` with an embedded control plane on a fresh port and data
// directory, and returns once the API serves the fleet.cattle.io CRDs.
func StartHub(t testing.TB, extraArgs ...string) *Hub {
	t.Helper()
	return startHub(t, func(*Hub) []string { return extraArgs })
}

// StartHubForPods is StartHub for agents that run as Pods on a node (StartNodeCluster):
// the hub listens on every address and tells agents the node's address, which Pods
// reach, rather than loopback.
func StartHubForPods(t testing.TB, extraArgs ...string) *Hub {
	t.Helper()
	return startHub(t, func(h *Hub) []string {
		url := "https://" + net.JoinHostPort(NodeIP(t).String(), strconv.Itoa(h.Port))
		return append([]string{"--bind-address", "0.0.0.0", "--api-server-url", url}, extraArgs...)
	})
}

func startHub(t testing.TB, extraArgs func(*Hub) []string) *Hub {
	t.Helper()
	h := &Hub{Cluster: newCluster(t, "hub", "flt-hub-")}
	healthAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	h.HealthURL = "http://" + healthAddr
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	h.MetricsURL = "http://" + metricsAddr + "/metrics"
	args := append([]string{
		"--metrics-bind-address", metricsAddr,
		"--data-dir", h.DataDir,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(h.Port),
		"--health-probe-bind-address", healthAddr,
	}, extraArgs(h)...)
	h.Process = startProcess(t, "hub", filepath.Join(h.DataDir, "hub.log"), filepath.Join(BinDir(t), "hub"), args...)
	h.WaitReady()
	return h
}

// StartHubOn runs `hub --kubeconfig` against an existing cluster, as the hub runs
// when it is deployed on a real cluster, and returns once its CRDs are established.
func StartHubOn(t testing.TB, cluster *Cluster, extraArgs ...string) *Hub {
	t.Helper()
	h := &Hub{Cluster: *cluster}
	h.Name = "hub-on-" + cluster.Name
	healthAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	h.HealthURL = "http://" + healthAddr
	metricsAddr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	h.MetricsURL = "http://" + metricsAddr + "/metrics"
	args := append([]string{"--kubeconfig", cluster.Kubeconfig, "--health-probe-bind-address", healthAddr, "--metrics-bind-address", metricsAddr}, extraArgs...)
	h.Process = startProcess(t, h.Name, filepath.Join(ShortTempDir(t, "flt-hubon-"), "hub.log"), filepath.Join(BinDir(t), "hub"), args...)
	h.WaitReady()
	return h
}

// WaitReady waits until the hub reports ready on /readyz: its API server is up, the
// CRDs are established and its system namespaces exist.
func (h *Hub) WaitReady() {
	h.t.Helper()
	waitFor(h.t, h.Name+" /readyz", startTimeout, h.Process, func(ctx context.Context) (bool, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, h.HealthURL+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return false, fmt.Errorf("/readyz answered %s", resp.Status)
		}
		return true, nil
	})
}

// Restart stops the hub with SIGTERM and starts it again on the same data directory
// and port, with extra arguments added to its command line.
func (h *Hub) Restart(extraArgs ...string) {
	h.t.Helper()
	if err := h.Process.Stop(); err != nil {
		h.t.Fatalf("stopping the hub: %v\n%s", err, Tail(h.Process.logPath, 40))
	}
	h.Process.AddArgs(extraArgs...)
	h.Process.Restart()
	h.WaitReady()
}

// StartControlPlane starts `hub controlplane`, a downstream cluster, on a fresh port
// and data directory, with extra flags, and returns once its API server is ready.
func StartControlPlane(t testing.TB, name string, extraArgs ...string) *Cluster {
	t.Helper()
	c := newCluster(t, name, "flt-ds-")
	args := append([]string{"controlplane", "--data-dir", c.DataDir, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(c.Port)}, extraArgs...)
	c.Process = startProcess(t, name, filepath.Join(c.DataDir, "controlplane.log"), filepath.Join(BinDir(t), "hub"), args...)
	c.waitAPIReady(startTimeout)
	return &c
}

// StartForeignHub runs the hub (`hub --kubeconfig`) against a control plane that
// authorizes like any cluster not Flotilla's own: the hub then creates RBAC objects
// for every cluster identity, as it does on a cluster it is installed into by Helm.
func StartForeignHub(t testing.TB, extraArgs ...string) *Hub {
	t.Helper()
	return StartHubOn(t, StartControlPlane(t, "foreign-hub-host", "--identity-authorizer=false"), extraArgs...)
}

func newCluster(t testing.TB, name, dirPrefix string) Cluster {
	dir := ShortTempDir(t, dirPrefix)
	return Cluster{
		Name:       name,
		DataDir:    dir,
		Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		Port:       freePort(t),
		t:          t,
	}
}
