package gitfetch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/flotilla/flotilla/pkg/kubeconfig"
)

// WorkerCommand is the hidden subcommand of the hub that runs one checkout.
const WorkerCommand = "gitfetch-worker"

// Job is one checkout, as the hub hands it to its worker process on stdin (never
// on the command line: it holds the credential).
type Job struct {
	Source   Source                   `json:"source"`
	Commit   string                   `json:"commit"`
	Dir      string                   `json:"dir"`
	MaxBytes int64                    `json:"maxBytes"`
	Policy   kubeconfig.AddressPolicy `json:"policy"`
}

type outcome struct {
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// workerEnv are the variables of the hub's environment a worker gets.
var workerEnv = []string{"PATH", "TMPDIR", "SSL_CERT_FILE", "SSL_CERT_DIR"}

// Limits bound a worker process.
type Limits struct {
	// Memory bounds the worker's data segment (RLIMIT_DATA), in bytes: a
	// repository made to inflate into gigabytes makes it fail, not the hub.
	Memory int64
}

// Run does job in a child process of the hub (exe WorkerCommand), with limits:
// go-git inflates objects in memory while it indexes a pack, and a hostile
// repository can make that take gigabytes, so that happens outside the hub.
// Cancelling ctx kills the child.
func Run(ctx context.Context, exe string, job Job, limits Limits) error {
	in, err := json.Marshal(job)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, exe, WorkerCommand)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return err
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &limitedBuffer{&stdout, 64 << 10}, &limitedBuffer{&stderr, 64 << 10}
	// Only what a fetch needs of the hub's environment.
	cmd.Env = []string{} // not nil: nil would pass the whole environment
	if limits.Memory > 0 {
		cmd.Env = append(cmd.Env, fmt.Sprintf("GOMEMLIMIT=%d", limits.Memory*3/4))
	}
	for _, name := range workerEnv {
		if v, ok := os.LookupEnv(name); ok {
			cmd.Env = append(cmd.Env, name+"="+v)
		}
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the fetch worker: %w", err)
	}
	// The child waits for its job on stdin: the limits are in place before it reads.
	if err := limit(cmd.Process.Pid, limits, job.MaxBytes); err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return fmt.Errorf("limiting the fetch worker: %w", err)
	}
	_, werr := stdin.Write(in)
	stdin.Close()
	err = cmd.Wait()
	var out outcome
	if jerr := json.Unmarshal(stdout.Bytes(), &out); jerr == nil && (out.Reason != "" || err == nil) {
		if out.Reason == "" {
			return nil
		}
		return &Error{out.Reason, errors.New(out.Message)}
	}
	if ctx.Err() != nil {
		return &Error{ReasonTimedOut, fmt.Errorf("fetching %s took too long: %w", job.Source.URL, ctx.Err())}
	}
	if outOfMemory(stderr.String()) || (limits.Memory > 0 && killedByFault(err)) {
		return &Error{ReasonTooLarge, fmt.Errorf("fetching %s took more than %d bytes of memory (--gitrepo-fetch-memory)", job.Source.URL, limits.Memory)}
	}
	if err == nil {
		err = werr
	}
	return &Error{ReasonFetchFailed, fmt.Errorf("the fetch worker failed: %v: %s", err, lastLine(stderr.String()))}
}

// limit sets the worker's resource limits: its memory, the size of any one file
// it writes, and its open files.
func limit(pid int, limits Limits, maxBytes int64) error {
	set := func(resource int, v uint64) error {
		return unix.Prlimit(pid, resource, &unix.Rlimit{Cur: v, Max: v}, nil)
	}
	if limits.Memory > 0 {
		if err := set(unix.RLIMIT_DATA, uint64(limits.Memory)); err != nil {
			return err
		}
	}
	// The pack and every file are each within the size bound; a little more for
	// the pack's index and headers.
	if err := set(unix.RLIMIT_FSIZE, uint64(maxBytes)+1<<20); err != nil {
		return err
	}
	return set(unix.RLIMIT_NOFILE, 1024)
}

// killedByFault tells whether the worker died of SIGSEGV or SIGBUS before it could
// print anything. A static Go binary does that only when the kernel cannot give
// it memory it needs at once (a stack, a signal frame) under RLIMIT_DATA; the
// runtime's own "out of memory" is the other way the limit shows.
func killedByFault(err error) bool {
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		return false
	}
	status, ok := exit.Sys().(syscall.WaitStatus)
	return ok && status.Signaled() && (status.Signal() == syscall.SIGSEGV || status.Signal() == syscall.SIGBUS)
}

func outOfMemory(stderr string) bool {
	return strings.Contains(stderr, "out of memory") || strings.Contains(stderr, "cannot allocate memory")
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}

// Work is the worker's side: it reads a Job from in, does it and writes the outcome
// to out.
func Work(ctx context.Context, in io.Reader, out io.Writer) error {
	// A file over RLIMIT_FSIZE fails the write instead of killing the process.
	signal.Ignore(syscall.SIGXFSZ)
	var job Job
	if err := json.NewDecoder(io.LimitReader(in, 1<<20)).Decode(&job); err != nil {
		return fmt.Errorf("reading the job: %w", err)
	}
	policy := job.Policy
	Install(&policy)
	var o outcome
	if err := Checkout(ctx, job.Source, job.Commit, job.Dir, job.MaxBytes); err != nil {
		o.Reason, o.Message = ReasonOf(err), err.Error()
		if errors.Is(err, syscall.EFBIG) {
			o.Reason = ReasonTooLarge
		}
	}
	return json.NewEncoder(out).Encode(o)
}

// limitedBuffer keeps at most max bytes of what is written to it.
type limitedBuffer struct {
	buf *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.buf.Len(); room > 0 {
		l.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}
