// Package node runs a one-node Kubernetes node beside a control plane the project
// started: containerd from Debian's package, and the upstream kubelet, kube-proxy and
// kube-scheduler as child processes of the flotilla-node binary. It is what lets the
// tests run the agent, the hub and Bundles' workloads as real Pods from the images
// "make images" builds, with no registry to pull from.
package node

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	"golang.org/x/sys/unix"

	"github.com/flotilla/flotilla/pkg/node/launch"
)

// The subcommands of flotilla-node that are the upstream Kubernetes components.
const (
	KubeletCommand   = "kubelet"
	ProxyCommand     = "kube-proxy"
	SchedulerCommand = "kube-scheduler"
)

// Config says where a node keeps its state and which control plane it joins.
type Config struct {
	// DataDir holds containerd's images and containers, the kubelet's Pods, the CNI
	// configuration and the components' logs.
	DataDir string
	// CredentialsDir holds the kubeconfigs and certificates the control plane issued
	// for this node (see the file names in this package).
	CredentialsDir string
	// Name is the Node's name: the host name unless set. The control plane's node
	// credential is issued for it.
	Name string
	// IP is the Node's address, the one Pods and the API server reach it at.
	IP net.IP
	// Images are image tarballs (docker-archive, as "make images" writes them), or
	// directories of them, loaded into containerd before the kubelet starts.
	Images []string
	// SandboxImage is the "pause" image every Pod's sandbox runs; it must be among
	// Images. Empty picks the loaded image whose repository ends in /pause.
	SandboxImage string
	// PodCIDR is the range the node's Pods get addresses from.
	PodCIDR string
	// ClusterCIDR is the Pod range of the whole cluster; kube-proxy masquerades
	// traffic to Services from outside it.
	ClusterCIDR string
	// Bridge is the name of the Linux bridge the Pods are attached to.
	Bridge string
}

// RegisterFlags adds a node's flags to fs.
func RegisterFlags(fs *pflag.FlagSet, cfg *Config) {
	fs.StringVar(&cfg.DataDir, "data-dir", "", "directory for containerd's images and containers, the kubelet's Pods and the logs (required)")
	fs.StringVar(&cfg.CredentialsDir, "credentials-dir", "", "directory of the kubeconfigs and certificates the control plane issued for this node (hub controlplane --node writes them; required)")
	fs.StringVar(&cfg.Name, "node-name", "", "the Node's name (default: the host name)")
	fs.IPVar(&cfg.IP, "node-ip", nil, "the Node's address (default: this machine's first non-loopback IPv4 address)")
	fs.StringSliceVar(&cfg.Images, "images", nil, "image tarballs, or directories of them, to load into containerd (e.g. bin/images from make images)")
	fs.StringVar(&cfg.SandboxImage, "sandbox-image", "", "the pause image of every Pod's sandbox (default: the loaded image named .../pause)")
	fs.StringVar(&cfg.PodCIDR, "pod-cidr", defaultPodCIDR, "addresses of this node's Pods")
	fs.StringVar(&cfg.ClusterCIDR, "cluster-cidr", defaultClusterCIDR, "addresses of the cluster's Pods")
	fs.StringVar(&cfg.Bridge, "bridge", defaultBridge, "name of the Linux bridge the Pods are attached to")
}

func (cfg *Config) complete() error {
	if cfg.DataDir == "" || cfg.CredentialsDir == "" {
		return errors.New("--data-dir and --credentials-dir are required")
	}
	var err error
	if cfg.DataDir, err = filepath.Abs(cfg.DataDir); err != nil {
		return err
	}
	if cfg.CredentialsDir, err = filepath.Abs(cfg.CredentialsDir); err != nil {
		return err
	}
	if cfg.Name == "" {
		if cfg.Name, err = launch.DefaultName(); err != nil {
			return err
		}
	}
	if cfg.IP == nil {
		if cfg.IP, err = launch.DefaultIP(cfg.ClusterCIDR); err != nil {
			return err
		}
	}
	for _, cidr := range []string{cfg.PodCIDR, cfg.ClusterCIDR} {
		if _, _, err := net.ParseCIDR(cidr); err != nil {
			return fmt.Errorf("%q is not an address range: %w", cidr, err)
		}
	}
	return nil
}

// Run starts the node and keeps it running until ctx ends or one of its components
// stops; then it stops the Pods and the components and removes the bridge, the
// iptables rules and the mounts it made.
func Run(ctx context.Context, cfg Config) error {
	if err := cfg.complete(); err != nil {
		return err
	}
	if err := Preflight(); err != nil {
		return err
	}
	unlock, err := lockMachine()
	if err != nil {
		return err
	}
	defer unlock()
	p := paths{dataDir: cfg.DataDir}
	for _, dir := range []string{filepath.Dir(p.containerdConfig()), p.cniConfDir(), p.cniIPAMDir(), p.kubeletRoot(), p.podLogs(), filepath.Dir(p.socketPath())} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
	}
	images, err := imageTarballs(cfg.Images)
	if err != nil {
		return err
	}
	if cfg.SandboxImage == "" {
		if cfg.SandboxImage, err = sandboxImage(images); err != nil {
			return err
		}
	}
	if err := writeConfigs(p, cfg); err != nil {
		return err
	}
	log := logrus.WithField("node", cfg.Name)
	tunables := saveTunables()
	sup := newSupervisor(p)
	defer func() {
		teardownCtx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		sup.stop(teardownCtx, "kube-scheduler", "kube-proxy", "kubelet")
		stopPods(teardownCtx, p)
		sup.stop(teardownCtx, "containerd")
		cleanUpMachine(teardownCtx, p, cfg.Bridge, true)
		tunables.restore()
		log.Info("Node stopped and cleaned up")
	}()

	if err := sup.start("containerd", "containerd", "--config", p.containerdConfig()); err != nil {
		return err
	}
	if err := waitForContainerd(ctx, p, sup); err != nil {
		return err
	}
	// A node killed before it could clean up (kill -9) leaves its Pods running under
	// containerd's shims, and its bridge, rules and mounts: stop those Pods through
	// containerd first (the kubelet starts them again from the API), then clean up.
	stopPods(ctx, p)
	cleanUpMachine(ctx, p, cfg.Bridge, false)
	for _, image := range images {
		if err := importImage(ctx, p, image.file); err != nil {
			return err
		}
		log.WithFields(logrus.Fields{"images": strings.Join(image.tags, ", "), "file": image.file}).Info("Loaded images")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	creds := func(file string) string { return filepath.Join(cfg.CredentialsDir, file) }
	if err := sup.start("kubelet", self, KubeletCommand,
		"--config="+p.kubeletConfig(),
		"--kubeconfig="+creds(launch.KubeletKubeconfig),
		"--root-dir="+p.kubeletRoot(),
		"--node-ip="+cfg.IP.String(),
		"--hostname-override="+cfg.Name,
		"--v=1",
	); err != nil {
		return err
	}
	if err := sup.start("kube-proxy", self, ProxyCommand, "--config="+p.proxyConfig(), "--v=1"); err != nil {
		return err
	}
	if err := sup.start("kube-scheduler", self, SchedulerCommand,
		"--kubeconfig="+creds(launch.SchedulerKubeconfig),
		"--authentication-kubeconfig="+creds(launch.SchedulerKubeconfig),
		"--authorization-kubeconfig="+creds(launch.SchedulerKubeconfig),
		"--leader-elect=false",
		"--bind-address=127.0.0.1",
		"--secure-port=10259",
		"--v=1",
	); err != nil {
		return err
	}
	log.WithFields(logrus.Fields{"ip": cfg.IP.String(), "logs": filepath.Dir(p.log("kubelet"))}).Info("Node started")

	select {
	case <-ctx.Done():
		return nil
	case exit := <-sup.exited:
		return fmt.Errorf("%s stopped: %v (see %s)", exit.name, exit.err, p.log(exit.name))
	}
}

func writeConfigs(p paths, cfg Config) error {
	cni, err := cniConfig(p, cfg.Bridge, cfg.PodCIDR)
	if err != nil {
		return err
	}
	kubelet, err := kubeletConfig(p, cfg.CredentialsDir, cfg.PodCIDR)
	if err != nil {
		return err
	}
	proxy, err := proxyConfig(cfg.CredentialsDir, cfg.Name, cfg.IP, cfg.ClusterCIDR)
	if err != nil {
		return err
	}
	for file, content := range map[string][]byte{
		p.containerdConfig(): []byte(containerdConfig(p, cfg.SandboxImage)),
		filepath.Join(p.cniConfDir(), "10-flotilla.conflist"): cni,
		p.kubeletConfig(): kubelet,
		p.proxyConfig():   proxy,
	} {
		if err := os.WriteFile(file, content, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// machineLock is held by the node running on this machine: two nodes would share
// the kubelet's ports and rewrite each other's iptables rules.
const machineLock = "/run/flotilla-node.lock"

func lockMachine() (unlock func(), err error) {
	f, err := os.OpenFile(machineLock, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		return nil, fmt.Errorf("another node runs on this machine (it holds %s); stop it first: one machine runs one node", machineLock)
	}
	return func() { f.Close() }, nil
}

// waitForContainerd waits until containerd answers on its socket and its CRI
// plugin is initialized: it loads the Pods a killed node left only then, and until
// then it refuses the calls that would stop them.
func waitForContainerd(ctx context.Context, p paths, sup *supervisor) error {
	deadline := time.Now().Add(time.Minute)
	var last error
	for time.Now().Before(deadline) {
		if last = criReady(ctx, p); last == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case exit := <-sup.exited:
			return fmt.Errorf("containerd stopped while starting: %v (see %s)", exit.err, sup.paths.log("containerd"))
		case <-time.After(100 * time.Millisecond):
		}
	}
	return fmt.Errorf("containerd's CRI did not answer on %s within a minute: %v (see %s)", p.socketPath(), last, sup.paths.log("containerd"))
}
