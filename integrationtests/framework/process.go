package framework

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla/flotilla/internal/freeport"
)

// BinDir is where the hub, agent and helm binaries are: $FLOTILLA_BIN, or the
// repository's bin/ as `make build tools` leaves it.
func BinDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("FLOTILLA_BIN")
	if dir == "" {
		dir = filepath.Join(RepoRoot(t), "bin")
	}
	if _, err := os.Stat(filepath.Join(dir, "hub")); err != nil {
		t.Fatalf("no hub binary in %s: run `make build tools` first, or run the tests with `make integration`", dir)
	}
	return dir
}

// RepoRoot is the repository's top directory.
func RepoRoot(t testing.TB) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot locate the framework source")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Process is a Flotilla program started by a test.
type Process struct {
	t       testing.TB
	name    string
	args    []string
	env     []string
	logPath string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error
}

// startProcess runs bin with args, logging its output to logPath (appending, so a
// restarted process keeps one log), and stops it when the test ends.
func startProcess(t testing.TB, name, logPath, bin string, args ...string) *Process {
	t.Helper()
	return startWithCleanup(t, &Process{t: t, name: name, args: append([]string{bin}, args...), logPath: logPath})
}

// startWithCleanup starts p and stops it when the test ends, showing the end of its log if the
// test failed.
func startWithCleanup(t testing.TB, p *Process) *Process {
	t.Helper()
	p.start()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() {
			t.Logf("last lines of the %s log (%s):\n%s", p.name, p.logPath, Tail(p.logPath, 40))
		}
	})
	return p
}

// StartProgram runs a program that is not Flotilla's (Fleet's agent, say) with env
// added to the test's environment, logging to a file of its own, and stops it when
// the test ends.
func StartProgram(t testing.TB, name, bin string, env []string, args ...string) *Process {
	t.Helper()
	logPath := filepath.Join(ShortTempDir(t, "flt-prog-"), filepath.Base(bin)+".log")
	return startWithCleanup(t, &Process{t: t, name: name, args: append([]string{bin}, args...), env: append([]string{}, env...), logPath: logPath})
}

func (p *Process) start() {
	p.t.Helper()
	logFile, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		p.t.Fatalf("opening %s: %v", p.logPath, err)
	}
	cmd := exec.Command(p.args[0], p.args[1:]...)
	if p.env != nil {
		cmd.Env = append(os.Environ(), p.env...)
	}
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	// Its own process group, so a test interrupted by Ctrl-C stops it too through Cleanup.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		p.t.Fatalf("starting %s: %v", p.name, err)
	}
	p.cmd = cmd
	p.exited = make(chan struct{})
	go func() {
		p.waitErr = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
}

// Exited is closed when the process has ended.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Pid is the process's ID.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Stop sends SIGTERM and waits for a clean exit; after 30 seconds it kills.
func (p *Process) Stop() error {
	if p.cmd == nil {
		return nil
	}
	select {
	case <-p.exited:
		return p.waitErr
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.exited
		return fmt.Errorf("%s did not stop within 30s of SIGTERM and was killed", p.name)
	}
	return p.waitErr
}

// Kill ends the process with SIGKILL, as a crash would.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// AddArgs adds arguments for the next Restart (a later flag wins over an earlier one).
func (p *Process) AddArgs(args ...string) { p.args = append(p.args, args...) }

// Restart starts the process again with the same arguments.
func (p *Process) Restart() {
	p.t.Helper()
	select {
	case <-p.exited:
	default:
		p.t.Fatalf("%s is still running", p.name)
	}
	p.start()
}

// Log returns what the process has written so far.
func (p *Process) Log() string {
	data, _ := os.ReadFile(p.logPath)
	return string(data)
}

// Tail is the last lines of the file at path (or why it cannot be read).
func Tail(path string, lines int) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	all := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}

// freePort is a free loopback TCP port (see internal/freeport).
func freePort(t testing.TB) int {
	t.Helper()
	port, err := freeport.Pick()
	if err != nil {
		t.Fatalf("finding a free port: %v", err)
	}
	return port
}

// ShortTempDir is a test directory with a short path: etcd's Unix sockets live in
// it, and socket paths are limited to about 100 characters.
func ShortTempDir(t testing.TB, prefix string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("kept %s for inspection", dir)
			return
		}
		os.RemoveAll(dir)
	})
	return dir
}

// waitFor polls cond every interval until it returns true or timeout passes, failing
// the test with the last error cond gave. When p (which may be nil) is what is awaited
// and the wait times out, p is sent SIGQUIT first so that its log ends with the Go
// runtime's dump of every goroutine: a process that hangs tells where.
func waitFor(t testing.TB, what string, timeout time.Duration, p *Process, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var lastErr error
	var exited <-chan struct{}
	if p != nil {
		exited = p.exited
	}
	for {
		ok, err := cond(ctx)
		if ok {
			return
		}
		if err != nil {
			lastErr = err
		}
		select {
		case <-exited:
			t.Fatalf("waiting for %s: the process exited", what)
		case <-ctx.Done():
			if p != nil {
				_ = p.cmd.Process.Signal(syscall.SIGQUIT)
				select {
				case <-p.exited:
				case <-time.After(5 * time.Second):
				}
				t.Fatalf("waiting for %s: timed out after %s (last error: %v); its goroutines are dumped at the end of %s", what, timeout, lastErr, p.logPath)
			}
			t.Fatalf("waiting for %s: timed out after %s (last error: %v)", what, timeout, lastErr)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Cluster is a running Kubernetes API: a hub's or a downstream control plane's.
type Cluster struct {
	// Name tells clusters apart in logs.
	Name string
	// DataDir is the control plane's --data-dir.
	DataDir string
	// Kubeconfig is the path of the admin kubeconfig, for kubectl and helm.
	Kubeconfig string
	// Port is the API server's port on 127.0.0.1.
	Port int
	// Process is the running hub or control plane.
	Process *Process

	t testing.TB
}

// RESTConfig returns an admin client configuration read from the kubeconfig.
func (c *Cluster) RESTConfig() *rest.Config {
	c.t.Helper()
	cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
	if err != nil {
		c.t.Fatalf("reading %s: %v", c.Kubeconfig, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	return cfg
}

// Client returns an admin clientset.
func (c *Cluster) Client() kubernetes.Interface {
	c.t.Helper()
	client, err := kubernetes.NewForConfig(c.RESTConfig())
	if err != nil {
		c.t.Fatal(err)
	}
	return client
}

// Kubectl runs the real kubectl against this cluster and returns its combined output.
func (c *Cluster) Kubectl(stdin string, args ...string) (string, error) {
	return run(stdin, "kubectl", append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
}

// MustKubectl is Kubectl that fails the test on error.
func (c *Cluster) MustKubectl(stdin string, args ...string) string {
	c.t.Helper()
	out, err := c.Kubectl(stdin, args...)
	if err != nil {
		c.t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Helm runs the helm CLI built by `make tools` against this cluster.
func (c *Cluster) Helm(args ...string) (string, error) {
	return run("", filepath.Join(BinDir(c.t), "helm"), append([]string{"--kubeconfig", c.Kubeconfig}, args...)...)
}

// MustHelm is Helm that fails the test on error.
func (c *Cluster) MustHelm(args ...string) string {
	c.t.Helper()
	out, err := c.Helm(args...)
	if err != nil {
		c.t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func run(stdin, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &out
	// Keep helm's caches and config inside the test's temporary space.
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+os.TempDir()+"/flotilla-helm-cache",
		"HELM_CONFIG_HOME="+os.TempDir()+"/flotilla-helm-config", "HELM_DATA_HOME="+os.TempDir()+"/flotilla-helm-data")
	err := cmd.Run()
	return out.String(), err
}

// waitAPIReady waits until the API server of c answers /readyz.
func (c *Cluster) waitAPIReady(timeout time.Duration) {
	c.t.Helper()
	waitFor(c.t, c.Name+" API server", timeout, c.Process, func(ctx context.Context) (bool, error) {
		if _, err := os.Stat(c.Kubeconfig); err != nil {
			return false, err
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", c.Kubeconfig)
		if err != nil {
			return false, err
		}
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return false, err
		}
		_, err = client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return err == nil, err
	})
}
