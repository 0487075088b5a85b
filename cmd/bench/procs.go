package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/pprof"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/flotilla/flotilla/internal/procstat"
)

// process is a hub or control plane the benchmark started.
type process struct {
	name   string
	cmd    *exec.Cmd
	log    string
	exited chan struct{}
	bin    string
	args   []string
}

func startProcess(name, logPath, bin string, args ...string) (*process, error) {
	p := &process{name: name, log: logPath, bin: bin, args: args}
	return p, p.start(os.O_CREATE | os.O_WRONLY | os.O_TRUNC)
}

// start runs the process, writing to its log opened with flag.
func (p *process) start(flag int) error {
	logFile, err := os.OpenFile(p.log, flag, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(p.bin, p.args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", p.name, err)
	}
	exited := make(chan struct{})
	p.cmd, p.exited = cmd, exited
	go func() { _ = cmd.Wait(); logFile.Close(); close(exited) }()
	return nil
}

// kill ends the process with SIGKILL, as a crash would, and waits for it.
func (p *process) kill() {
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.exited
}

// restart starts the ended process again with the same arguments, appending to its log.
func (p *process) restart() error {
	return p.start(os.O_CREATE | os.O_WRONLY | os.O_APPEND)
}

// stop ends the process with SIGTERM, and SIGKILL after 20 s.
func (p *process) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(20 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.exited
	}
}

// usage is what the kernel accounts to a process.
type usage = procstat.Usage

func (p *process) usage() (usage, error) { return procstat.Of(p.cmd.Process.Pid) }

// waitHTTP waits until url answers 200.
func waitHTTP(ctx context.Context, url string, p *process) error {
	for {
		resp, err := http.Get(url)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited; see %s", p.name, p.log)
		case <-ctx.Done():
			return fmt.Errorf("%s did not answer %s: %w (log: %s)", p.name, url, ctx.Err(), p.log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitAPI waits until the API server of p answers /readyz.
func waitAPI(ctx context.Context, kube kubernetes.Interface, p *process) error {
	for {
		if _, err := kube.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx); err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited; see %s", p.name, p.log)
		case <-ctx.Done():
			return fmt.Errorf("the API server of the %s was not ready: %w (log: %s)", p.name, ctx.Err(), p.log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitFile waits until path exists.
func waitFile(ctx context.Context, path string, p *process) error {
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return fmt.Errorf("%s exited; see %s", p.name, p.log)
		case <-ctx.Done():
			return fmt.Errorf("%s did not write %s: %w (log: %s)", p.name, path, ctx.Err(), p.log)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// profile writes 15-second CPU profiles of the control plane (kube-apiserver's
// /debug/pprof), of the hub (its metrics address) and of the simulated agents into
// dir, named with prefix, taken together starting a second from now.
func profile(ctx context.Context, dir, prefix string, kube kubernetes.Interface, hubURL string) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "bench: profiles:", err)
		return
	}
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Second):
	}
	const path = "/debug/pprof/profile?seconds=15"
	done := make(chan struct{})
	go func() {
		defer close(done)
		data, err := kube.Discovery().RESTClient().Get().AbsPath("/debug/pprof/profile").Param("seconds", "15").DoRaw(ctx)
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, prefix+"controlplane.pprof"), data, 0o644)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: control plane profile:", err)
		}
	}()
	// The simulated agents share the machine: profile them over the same 15 s.
	if err := profileSelf(filepath.Join(dir, prefix+"agents.pprof"), 15*time.Second); err != nil {
		fmt.Fprintln(os.Stderr, "bench: agents' profile:", err)
	}
	if err := download(hubURL+path, filepath.Join(dir, prefix+"hub.pprof")); err != nil {
		fmt.Fprintln(os.Stderr, "bench: hub profile:", err)
	}
	<-done
}

// profileSelf starts a CPU profile of this process, the simulated agents, and stops
// it after d, in the background.
func profileSelf(path string, d time.Duration) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return err
	}
	time.AfterFunc(d, func() {
		pprof.StopCPUProfile()
		f.Close()
	})
	return nil
}

// heapProfile writes the hub's heap profile to dir/hub-heap.pprof.
func heapProfile(dir, hubURL string) {
	if err := download(hubURL+"/debug/pprof/heap", filepath.Join(dir, "hub-heap.pprof")); err != nil {
		fmt.Fprintln(os.Stderr, "bench: hub heap profile:", err)
	}
}

func download(url, path string) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}
