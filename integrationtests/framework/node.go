package framework

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/pkg/node/launch"
)

// NodeIP is the address a node, and a hub its agent Pods must reach, are found at.
func NodeIP(t testing.TB) net.IP {
	t.Helper()
	ip, err := launch.DefaultIP("")
	if err != nil {
		t.Fatal(err)
	}
	return ip
}

// RequireNode skips the test, with one line that says why, when this machine cannot
// run a node (flotilla-node check: root, cgroups, containerd, runc, CNI plugins).
func RequireNode(t testing.TB) {
	t.Helper()
	out, err := exec.Command(filepath.Join(BinDir(t), launch.Program), "check").CombinedOutput()
	if err != nil {
		t.Skipf("no node on this machine, so no real Pods: %s", strings.TrimSpace(string(out)))
	}
}

var (
	imagesOnce sync.Once
	imagesDir  string
	imagesErr  error
)

// NodeImages is a directory of the image tarballs make images writes (hub, agent,
// pause): $FLOTILLA_IMAGES as make integration sets it, or else written once per test
// binary with make image-tarballs.
func NodeImages(t testing.TB) string {
	t.Helper()
	if dir := os.Getenv("FLOTILLA_IMAGES"); dir != "" {
		return dir
	}
	imagesOnce.Do(func() {
		imagesDir, imagesErr = os.MkdirTemp("", "flt-images-")
		if imagesErr != nil {
			return
		}
		out, err := exec.Command("make", "-C", RepoRoot(t), "--no-print-directory", "image-tarballs", "IMAGES_DIR="+imagesDir, "BIN="+BinDir(t)).CombinedOutput()
		if err != nil {
			imagesErr = fmt.Errorf("make image-tarballs: %v\n%s", err, out)
		}
	})
	if imagesErr != nil {
		t.Fatal(imagesErr)
	}
	return imagesDir
}

// StartNodeCluster starts `hub controlplane --node`: a control plane and a node that
// runs Pods from the images of NodeImages, listening on every address so that Pods
// reach it. It skips the test where no node can run, and returns once the Node is
// Ready. One node runs on a machine at a time: tests that use one do not run in
// parallel.
func StartNodeCluster(t testing.TB, name string, extraArgs ...string) *Cluster {
	t.Helper()
	RequireNode(t)
	images := NodeImages(t)
	c := newCluster(t, name, "flt-node-")
	args := append([]string{"controlplane", "--data-dir", c.DataDir, "--bind-address", "0.0.0.0", "--secure-port", strconv.Itoa(c.Port),
		"--node", "--node-images", images}, extraArgs...)
	c.Process = startProcess(t, name, filepath.Join(c.DataDir, "controlplane.log"), filepath.Join(BinDir(t), "hub"), args...)
	t.Cleanup(func() {
		if t.Failed() {
			for _, component := range []string{"node", "kubelet", "containerd"} {
				log := filepath.Join(c.DataDir, "node", "logs", component+".log")
				t.Logf("last lines of the %s log (%s):\n%s", component, log, Tail(log, 30))
			}
		}
	})
	// hub controlplane --node announces itself once the Node is Ready.
	c.waitAPIReady(startTimeout)
	client := c.Client()
	waitFor(t, name+" Node Ready", startTimeout, c.Process, func(ctx context.Context) (bool, error) {
		nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		for _, n := range nodes.Items {
			for _, cond := range n.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					return true, nil
				}
			}
		}
		return false, fmt.Errorf("no Ready Node among %d", len(nodes.Items))
	})
	return &c
}

// ImageTag is the tag make images gives the images: the charts' appVersion.
func ImageTag(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("make", "-C", RepoRoot(t), "--no-print-directory", "-s", "print-image-tag").Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("make print-image-tag: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// BuildImages writes the image tarballs make images writes, tagged tag, into a
// fresh directory and returns it.
func BuildImages(t testing.TB, tag string) string {
	t.Helper()
	dir := ShortTempDir(t, "flt-images-")
	out, err := exec.Command("make", "-C", RepoRoot(t), "--no-print-directory", "image-tarballs", "IMAGES_DIR="+dir, "IMAGE_TAG="+tag, "BIN="+BinDir(t)).CombinedOutput()
	if err != nil {
		t.Fatalf("make image-tarballs IMAGE_TAG=%s: %v\n%s", tag, err, out)
	}
	return dir
}

// LoadImages loads image tarballs into the node of a cluster StartNodeCluster
// started (flotilla-node load).
func (c *Cluster) LoadImages(sources ...string) {
	c.t.Helper()
	args := append([]string{"load", "--data-dir", filepath.Join(c.DataDir, "node")}, sources...)
	if out, err := exec.Command(filepath.Join(BinDir(c.t), launch.Program), args...).CombinedOutput(); err != nil {
		c.t.Fatalf("flotilla-node load: %v\n%s", err, out)
	}
}
