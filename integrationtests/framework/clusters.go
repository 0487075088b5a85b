package framework

import (
	"context"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
)

// startTimeout bounds how long a hub or control plane may take to become ready. It
// is generous because tests run side by side on small machines; it is a guard against
// hanging, not an assertion about speed.
const startTimeout = 3 * time.Minute

// Hub is a running hub with its embedded control plane.
type Hub struct {
	Cluster
}

// StartHub starts `hub` with an embedded control plane on a fresh port and data
// directory, and returns once the API serves the fleet.cattle.io CRDs.
func StartHub(t testing.TB, extraArgs ...string) *Hub {
	t.Helper()
	h := &Hub{Cluster: newCluster(t, "hub", "flt-hub-")}
	args := append([]string{
		"--data-dir", h.DataDir,
		"--bind-address", "127.0.0.1",
		"--secure-port", strconv.Itoa(h.Port),
	}, extraArgs...)
	h.Process = startProcess(t, "hub", filepath.Join(h.DataDir, "hub.log"), filepath.Join(BinDir(t), "hub"), args...)
	h.WaitReady()
	return h
}

// WaitReady waits until the hub's API server is up and its CRDs are established.
func (h *Hub) WaitReady() {
	h.t.Helper()
	h.waitAPIReady(startTimeout)
	waitFor(h.t, "the fleet.cattle.io CRDs", startTimeout, h.Process.Exited(), func(ctx context.Context) (bool, error) {
		cfg, err := clientcmd.BuildConfigFromFlags("", h.Kubeconfig)
		if err != nil {
			return false, err
		}
		client, err := clientset.NewForConfig(cfg)
		if err != nil {
			return false, err
		}
		crd, err := client.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "clusters.fleet.cattle.io", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		for _, c := range crd.Status.Conditions {
			if c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

// Restart stops the hub with SIGTERM and starts it again on the same data directory
// and port.
func (h *Hub) Restart() {
	h.t.Helper()
	if err := h.Process.Stop(); err != nil {
		h.t.Fatalf("stopping the hub: %v\n%s", err, tail(h.Process.logPath, 40))
	}
	h.Process.Restart()
	h.WaitReady()
}

// StartControlPlane starts `hub controlplane`, a downstream cluster, on a fresh port
// and data directory, and returns once its API server is ready.
func StartControlPlane(t testing.TB, name string) *Cluster {
	t.Helper()
	c := newCluster(t, name, "flt-ds-")
	c.Process = startProcess(t, name, filepath.Join(c.DataDir, "controlplane.log"), filepath.Join(BinDir(t), "hub"),
		"controlplane", "--data-dir", c.DataDir, "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(c.Port))
	c.waitAPIReady(startTimeout)
	return &c
}

func newCluster(t testing.TB, name, dirPrefix string) Cluster {
	dir := shortTempDir(t, dirPrefix)
	return Cluster{
		Name:       name,
		DataDir:    dir,
		Kubeconfig: filepath.Join(dir, "admin.kubeconfig"),
		Port:       freePort(t),
		t:          t,
	}
}
