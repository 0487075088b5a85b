package node

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/sirupsen/logrus"
)

// supervisor runs the node's components as child processes, each logging to its own
// file, and reports the first that exits.
type supervisor struct {
	paths    paths
	mu       sync.Mutex
	children map[string]*child
	exited   chan exit
}

type child struct {
	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

type exit struct {
	name string
	err  error
}

func newSupervisor(p paths) *supervisor {
	return &supervisor{paths: p, children: map[string]*child{}, exited: make(chan exit, 8)}
}

func (s *supervisor) start(name, program string, args ...string) error {
	logFile, err := os.OpenFile(s.paths.log(name), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	cmd := exec.Command(program, args...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	// A node killed outright takes its components with it; a signal to the node's
	// process group (Ctrl-C) reaches only the node, which stops them in order.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("starting %s: %w", name, err)
	}
	c := &child{cmd: cmd, done: make(chan struct{})}
	s.mu.Lock()
	s.children[name] = c
	s.mu.Unlock()
	go func() {
		c.err = cmd.Wait()
		logFile.Close()
		close(c.done)
		select {
		case s.exited <- exit{name: name, err: c.err}:
		default:
		}
	}()
	return nil
}

// stop ends the named components in order: SIGTERM, then SIGKILL after 20 seconds
// or when ctx ends.
func (s *supervisor) stop(ctx context.Context, names ...string) {
	for _, name := range names {
		s.mu.Lock()
		c := s.children[name]
		s.mu.Unlock()
		if c == nil {
			continue
		}
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-c.done:
		case <-time.After(20 * time.Second):
			logrus.WithField("component", name).Warn("Did not stop within 20s of SIGTERM; killing it")
			_ = c.cmd.Process.Kill()
			<-c.done
		case <-ctx.Done():
			_ = c.cmd.Process.Kill()
			<-c.done
		}
	}
}
