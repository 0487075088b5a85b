// Package launch starts flotilla-node from another program (hub controlplane --node)
// and holds what both sides agree on: the credential file names and the node's
// default name and address. It is apart from package node so that the hub does not
// link the node's runtime.
package launch

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Program is the name of the node's binary.
const Program = "flotilla-node"

// Names of the files the control plane writes into a node's credentials directory
// and that the node's components read.
const (
	CAFile                 = "ca.crt"
	KubeletKubeconfig      = "kubelet.kubeconfig"
	ProxyKubeconfig        = "kube-proxy.kubeconfig"
	SchedulerKubeconfig    = "kube-scheduler.kubeconfig"
	KubeletServingCertFile = "kubelet-serving.crt"
	KubeletServingKeyFile  = "kubelet-serving.key"
	// DefaultClusterCIDR is the address range of a node's Pods.
	DefaultClusterCIDR = "10.42.0.0/16"
)

// Options are the flotilla-node run flags Start passes.
type Options struct {
	DataDir, CredentialsDir, Name string
	IP                            net.IP
	Images                        []string
}

// LogFile is where the node under dataDir logs.
func LogFile(dataDir string) string { return filepath.Join(dataDir, "logs", "node.log") }

// Process is a flotilla-node started by another program (hub controlplane --node).
type Process struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
	// Log is the file its output goes to.
	Log string
}

// FindProgram finds flotilla-node next to the running executable, or else in PATH.
func FindProgram() (string, error) {
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), Program)
		if _, err := os.Stat(beside); err == nil {
			return beside, nil
		}
	}
	path, err := exec.LookPath(Program)
	if err != nil {
		return "", fmt.Errorf("%s is not next to this program or in PATH: build it with make build", Program)
	}
	return path, nil
}

// Start runs "flotilla-node run" for cfg. The node stops, cleaning up, when ctx
// ends; Wait waits for that.
func Start(ctx context.Context, cfg Options) (*Process, error) {
	program, err := FindProgram()
	if err != nil {
		return nil, err
	}
	args := []string{"run", "--data-dir=" + cfg.DataDir, "--credentials-dir=" + cfg.CredentialsDir}
	if cfg.Name != "" {
		args = append(args, "--node-name="+cfg.Name)
	}
	if cfg.IP != nil {
		args = append(args, "--node-ip="+cfg.IP.String())
	}
	if len(cfg.Images) > 0 {
		args = append(args, "--images="+strings.Join(cfg.Images, ","))
	}
	logFile := LogFile(cfg.DataDir)
	if err := os.MkdirAll(filepath.Dir(logFile), 0o700); err != nil {
		return nil, err
	}
	log, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(program, args...)
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group: Ctrl-C in a terminal reaches the program that started
	// it, which stops it with one SIGTERM and lets it clean up.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		log.Close()
		return nil, fmt.Errorf("starting %s: %w", program, err)
	}
	proc := &Process{cmd: cmd, done: make(chan struct{}), Log: logFile}
	go func() {
		proc.err = cmd.Wait()
		log.Close()
		close(proc.done)
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = cmd.Process.Signal(syscall.SIGTERM)
		case <-proc.done:
		}
	}()
	return proc, nil
}

// Done is closed when the node has stopped.
func (p *Process) Done() <-chan struct{} { return p.done }

// Wait waits for the node to stop and says why it did.
func (p *Process) Wait() error {
	<-p.done
	if p.err != nil {
		return fmt.Errorf("%s: %w (see %s)", Program, p.err, p.Log)
	}
	return nil
}

// WaitReady waits until the Node called name reports Ready, or the node stops.
func (p *Process) WaitReady(ctx context.Context, client kubernetes.Interface, name string, timeout time.Duration) error {
	var last string
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		select {
		case <-p.done:
			return false, errors.New("the node stopped while starting")
		default:
		}
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			last = err.Error()
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				last = fmt.Sprintf("Ready=%s %s: %s", c.Status, c.Reason, c.Message)
				return c.Status == corev1.ConditionTrue, nil
			}
		}
		return false, nil
	})
	if err != nil {
		return fmt.Errorf("node %s not Ready: %w (last: %s; see %s)", name, err, last, p.Log)
	}
	return nil
}

// DefaultName is the name a Node gets unless told otherwise: the host name, in lower
// case, as the kubelet itself would pick.
func DefaultName() (string, error) {
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("reading the host name for the Node's name: %w", err)
	}
	return strings.ToLower(strings.TrimSpace(host)), nil
}

// DefaultIP is the address a Node gets unless told otherwise: this machine's first
// IPv4 address that is not loopback, link-local or inside the Pod network (the
// bridge's own address).
func DefaultIP(clusterCIDR string) (net.IP, error) {
	if clusterCIDR == "" {
		clusterCIDR = DefaultClusterCIDR
	}
	_, pods, err := net.ParseCIDR(clusterCIDR)
	if err != nil {
		return nil, err
	}
	addrs, err := net.InterfaceAddrs()
	if err != nil {
		return nil, fmt.Errorf("listing this machine's addresses: %w", err)
	}
	for _, addr := range addrs {
		ipNet, ok := addr.(*net.IPNet)
		if !ok || ipNet.IP.To4() == nil || ipNet.IP.IsLoopback() || ipNet.IP.IsLinkLocalUnicast() || pods.Contains(ipNet.IP) {
			continue
		}
		return ipNet.IP.To4(), nil
	}
	return nil, errors.New("this machine has no IPv4 address but loopback for the Node (the API server refuses loopback node addresses): set --node-ip")
}
