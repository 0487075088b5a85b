package node

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
	criapi "k8s.io/cri-api/pkg/apis"
	runtimeapi "k8s.io/cri-api/pkg/apis/runtime/v1"
	remote "k8s.io/cri-client/pkg"
)

// podStopGrace is how long, in seconds, a container gets between SIGTERM and
// SIGKILL when the node stops.
const podStopGrace = 15

// stopPods stops and removes every Pod sandbox in containerd: the kubelet, stopped
// first, leaves its containers running, and stopping a sandbox also releases its
// network (the CNI DEL that returns its address and removes its rules).
func stopPods(ctx context.Context, p paths) {
	if _, err := os.Stat(p.socketPath()); err != nil {
		return
	}
	runtime, err := connectCRI(ctx, p)
	if err != nil {
		logrus.WithError(err).Warn("Connecting to containerd to stop the Pods")
		return
	}
	defer func() { _ = runtime.Close(ctx) }()
	sandboxes, err := runtime.ListPodSandbox(ctx, nil)
	if err != nil {
		logrus.WithError(err).Warn("Listing the Pods to stop")
		return
	}
	for _, sandbox := range sandboxes {
		log := logrus.WithField("pod", sandbox.GetMetadata().GetNamespace()+"/"+sandbox.GetMetadata().GetName())
		// Containers first, with SIGTERM and a grace period (stopping the sandbox
		// kills them at once), so that an agent finishes its Helm operation.
		containers, err := runtime.ListContainers(ctx, &runtimeapi.ContainerFilter{PodSandboxId: sandbox.Id})
		if err != nil {
			log.WithError(err).Warn("Listing a Pod's containers")
		}
		for _, c := range containers {
			if err := runtime.StopContainer(ctx, c.Id, podStopGrace); err != nil {
				log.WithError(err).WithField("container", c.GetMetadata().GetName()).Warn("Stopping a container")
			}
		}
		if err := runtime.StopPodSandbox(ctx, sandbox.Id); err != nil {
			log.WithError(err).Warn("Stopping a Pod")
		}
		if err := runtime.RemovePodSandbox(ctx, sandbox.Id); err != nil {
			log.WithError(err).Warn("Removing a Pod")
		}
	}
}

// connectCRI connects to containerd's CRI service. Building the client checks
// that the service answers: before containerd's CRI plugin is initialized it
// fails with "server is not initialized yet".
func connectCRI(ctx context.Context, p paths) (criapi.RuntimeService, error) {
	return remote.NewRemoteRuntimeServiceBuilder().WithEndpoint(p.endpoint()).WithConnectionTimeout(10 * time.Second).Build(ctx)
}

// criReady says why containerd's CRI cannot list the Pods yet, or nil.
func criReady(ctx context.Context, p paths) error {
	if _, err := os.Stat(p.socketPath()); err != nil {
		return err
	}
	runtime, err := connectCRI(ctx, p)
	if err != nil {
		return err
	}
	defer func() { _ = runtime.Close(ctx) }()
	_, err = runtime.ListPodSandbox(ctx, nil)
	return err
}

// cleanUpMachine removes what a node changed outside its data directory, and the
// mounts inside it: kube-proxy's iptables chains, the Pod bridge, and the volume and
// container mounts the kubelet and containerd left. It is safe to run when there is
// nothing to clean.
func cleanUpMachine(ctx context.Context, p paths, bridge string, removeSocket bool) {
	if self, err := os.Executable(); err == nil {
		// kube-proxy's own clean-up of the chains it creates.
		if out, err := exec.CommandContext(ctx, self, ProxyCommand, "--cleanup", "--v=0").CombinedOutput(); err != nil {
			logrus.WithError(err).WithField("output", strings.TrimSpace(string(out))).Debug("kube-proxy --cleanup")
		}
	}
	removeKubeletChains(ctx)
	if link, err := netlink.LinkByName(bridge); err == nil {
		if err := netlink.LinkDel(link); err != nil {
			logrus.WithError(err).WithField("bridge", bridge).Warn("Removing the Pod bridge")
		}
	}
	for _, mount := range mountsUnder(p.dataDir) {
		if err := unix.Unmount(mount, unix.MNT_DETACH); err != nil {
			logrus.WithError(err).WithField("mount", mount).Warn("Unmounting")
		}
	}
	if removeSocket && p.socketPath() != filepath.Join(p.containerdState(), "containerd.sock") {
		_ = os.RemoveAll(filepath.Dir(p.socketPath()))
	}
}

// kubeletChains are the iptables chains the kubelet creates (and kube-proxy's
// --cleanup leaves): where they are, and the rules that jump to them.
var kubeletChains = []struct {
	table, chain string
	jumpsFrom    []string
}{
	{"filter", "KUBE-FIREWALL", []string{"INPUT", "OUTPUT"}},
	{"filter", "KUBE-KUBELET-CANARY", nil},
	{"nat", "KUBE-KUBELET-CANARY", nil},
	{"mangle", "KUBE-KUBELET-CANARY", nil},
	{"mangle", "KUBE-IPTABLES-HINT", nil},
}

// removeKubeletChains removes the kubelet's chains, for IPv4 and IPv6. Chains that
// are not there are no error.
func removeKubeletChains(ctx context.Context) {
	for _, program := range []string{"iptables", "ip6tables"} {
		for _, c := range kubeletChains {
			run := func(args ...string) {
				_ = exec.CommandContext(ctx, program, append([]string{"-w", "-t", c.table}, args...)...).Run()
			}
			for _, from := range c.jumpsFrom {
				run("-D", from, "-j", c.chain)
			}
			run("-F", c.chain)
			run("-X", c.chain)
		}
	}
}

// mountsUnder lists the mount points under dir, deepest first.
func mountsUnder(dir string) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer f.Close()
	var mounts []string
	scanner := bufio.NewScanner(f)
	for scanner.Scan() {
		fields := strings.Fields(scanner.Text())
		if len(fields) < 5 {
			continue
		}
		// Octal escapes (\040 for a space) are left: such paths are not the node's.
		if point := fields[4]; point == dir || strings.HasPrefix(point, dir+"/") {
			mounts = append(mounts, point)
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts
}

// kernelTunables are the settings the kubelet (vm.overcommit_memory, kernel.panic,
// kernel.panic_on_oops) and kube-proxy change on the machine; the node puts them
// back when it stops.
var kernelTunables = []string{
	"/proc/sys/vm/overcommit_memory",
	"/proc/sys/kernel/panic",
	"/proc/sys/kernel/panic_on_oops",
	"/proc/sys/net/ipv4/conf/all/route_localnet",
}

type tunables map[string][]byte

func saveTunables() tunables {
	saved := tunables{}
	for _, path := range kernelTunables {
		if value, err := os.ReadFile(path); err == nil {
			saved[path] = value
		}
	}
	return saved
}

func (t tunables) restore() {
	for path, value := range t {
		if now, err := os.ReadFile(path); err == nil && string(now) == string(value) {
			continue
		}
		if err := os.WriteFile(path, value, 0o644); err != nil {
			logrus.WithError(err).WithField("setting", path).Warn("Restoring a kernel setting the node changed")
		}
	}
}
