package pods

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

// containerdSocket reads a node's containerd socket from its configuration.
func containerdSocket(t *testing.T, c *framework.Cluster) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(c.DataDir, "node", "containerd", "config.toml"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^\s*address = "([^"]+)"`).FindSubmatch(data)
	if m == nil {
		t.Fatalf("no grpc address in the containerd config:\n%s", data)
	}
	return string(m[1])
}

// processesMentioning lists the processes whose command line holds s.
func processesMentioning(s string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(cmdline), s) {
			continue
		}
		out = append(out, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
	}
	return out
}

func runPause(t *testing.T, c *framework.Cluster) {
	t.Helper()
	c.MustKubectl("", "create", "deployment", "pause", "--image=flotilla/pause:"+framework.ImageTag(t))
	if out, err := c.Kubectl("", "rollout", "status", "deployment/pause", "--timeout=120s"); err != nil {
		t.Fatalf("rollout: %v\n%s", err, out)
	}
}

// A node that stops leaves nothing behind: no Pod, shim, bridge, mount or
// kube-proxy rule.
func TestANodeStoppedLeavesNothingBehind(t *testing.T) {
	c := framework.StartNodeCluster(t, "teardown")
	runPause(t, c)
	socket := containerdSocket(t, c)
	if shims := processesMentioning(socket); len(shims) == 0 {
		t.Fatalf("no process uses %s while a Pod runs", socket)
	}
	if err := c.Process.Stop(); err != nil {
		t.Fatalf("stopping the control plane and its node: %v", err)
	}
	if left := processesMentioning(socket); len(left) > 0 {
		t.Errorf("processes left running:\n%s", strings.Join(left, "\n"))
	}
	if out, err := exec.Command("ip", "link", "show", "flotilla0").CombinedOutput(); err == nil {
		t.Errorf("the bridge is still there:\n%s", out)
	}
	mounts, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(mounts), "\n") {
		if strings.Contains(line, c.DataDir) {
			t.Errorf("still mounted: %s", line)
		}
	}
	if out, _ := exec.Command("iptables", "-w", "-t", "nat", "-S").CombinedOutput(); strings.Contains(string(out), "KUBE-SERVICES") {
		t.Errorf("kube-proxy's rules are still there:\n%s", out)
	}
}

// A node killed outright (kill -9 of flotilla-node and its components) leaves its
// Pods running under containerd's shims; started again on its data directory it
// stops them, cleans up and runs the cluster's Pods again.
func TestANodeKilledComesBackClean(t *testing.T) {
	c := framework.StartNodeCluster(t, "killed")
	runPause(t, c)
	socket := containerdSocket(t, c)
	nodeDir := filepath.Join(c.DataDir, "node")
	var pids []int
	for _, p := range processesMentioning(nodeDir) {
		var pid int
		if _, err := fmt.Sscanf(p, "%d:", &pid); err == nil && !strings.Contains(p, "containerd-shim") {
			pids = append(pids, pid)
		}
	}
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
	// The control plane notices its node is gone and stops.
	select {
	case <-c.Process.Exited():
	case <-time.After(2 * time.Minute):
		t.Fatal("the control plane kept running without its node")
	}
	if left := processesMentioning(socket); len(left) == 0 {
		t.Log("no shim outlived the kill (nothing for the restart to clean)")
	}
	restarted := time.Now()
	c.Process.Restart()
	// The Pod runs again in a container started after the restart, and containerd
	// runs only its sandbox and container: none left from before the kill.
	framework.Eventually(t, "the Pod running again, alone", 3*time.Minute, func(ctx context.Context) error {
		out, err := c.Kubectl("", "get", "pods", "-l", "app=pause", "-o", "jsonpath={.items[*].status.containerStatuses[*].state.running.startedAt}")
		if err != nil {
			return err
		}
		started, err := time.Parse(time.RFC3339, strings.TrimSpace(out))
		if err != nil || started.Before(restarted.Add(-time.Second)) {
			return fmt.Errorf("container started at %q", out)
		}
		tasks, err := exec.Command("ctr", "--address", socket, "--namespace", "k8s.io", "tasks", "ls", "-q").CombinedOutput()
		if err != nil {
			return fmt.Errorf("ctr tasks ls: %v: %s", err, tasks)
		}
		if n := len(strings.Fields(string(tasks))); n != 2 {
			return fmt.Errorf("containerd runs %d tasks, want 2 (one Pod's sandbox and container)", n)
		}
		return nil
	})
}
