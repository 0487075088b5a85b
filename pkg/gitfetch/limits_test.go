package gitfetch

import (
	"bytes"
	"context"
	"crypto/rand"
	"debug/elf"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/flotilla/flotilla/internal/gittest"
	"github.com/flotilla/flotilla/pkg/kubeconfig"
)

// TestMain lets the test binary be the fetch worker Run starts.
func TestMain(m *testing.M) {
	if os.Getenv("GITFETCH_TEST_WORKER") == "1" {
		if err := Work(context.Background(), os.Stdin, os.Stdout); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func allowLoopback(t *testing.T) kubeconfig.AddressPolicy {
	t.Helper()
	allowed, err := kubeconfig.ParsePrefixes([]string{"127.0.0.0/8"})
	if err != nil {
		t.Fatal(err)
	}
	policy := kubeconfig.AddressPolicy{Allowed: allowed}
	Install(&policy)
	return policy
}

func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func listFiles(t *testing.T, dir string) []string {
	var files []string
	_ = filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return nil
	})
	return files
}

// A repository that sends more than the size bound is cut off while it downloads.
func TestADownloadOverTheBoundIsCutOff(t *testing.T) {
	allowLoopback(t)
	git := gittest.Start(t, "", "")
	random := make([]byte, 2<<20) // does not compress
	_, _ = rand.Read(random)
	git.Write("big.bin", random)
	commit := git.Commit("2 MiB of noise")

	dir := filepath.Join(t.TempDir(), "repo")
	err := Checkout(ctx(t), Source{URL: git.URL, Branch: "main"}, commit, dir, 1<<20)
	if ReasonOf(err) != ReasonTooLarge || !strings.Contains(err.Error(), "sent more than") {
		t.Fatalf("Checkout of 2 MiB with a 1 MiB bound: %v (%s)", err, ReasonOf(err))
	}
	if files := listFiles(t, dir); len(files) > 0 && strings.Contains(strings.Join(files, " "), "big.bin") {
		t.Errorf("the file was written: %v", files)
	}
	// The answer to a look at the branch is bounded too.
	if _, err := Head(ctx(t), Source{URL: git.URL, Branch: "main"}, 64); ReasonOf(err) != ReasonTooLarge {
		t.Errorf("Head with a 64-byte bound: %v (%s)", err, ReasonOf(err))
	}
	if err := Checkout(ctx(t), Source{URL: git.URL, Branch: "main"}, commit, filepath.Join(t.TempDir(), "ok"), 8<<20); err != nil {
		t.Errorf("within the bound: %v", err)
	}
}

// Files that compress to almost nothing are refused from their declared sizes,
// before they are written out.
func TestFilesOverTheBoundAreNotWritten(t *testing.T) {
	allowLoopback(t)
	git := gittest.Start(t, "", "")
	git.Write("zeros.bin", make([]byte, 16<<20)) // 16 MiB, a few KiB in the pack
	git.Write("fleet.yaml", []byte("defaultNamespace: x\n"))
	commit := git.Commit("16 MiB of zeros")

	dir := filepath.Join(t.TempDir(), "repo")
	err := Checkout(ctx(t), Source{URL: git.URL, Branch: "main"}, commit, dir, 1<<20)
	if ReasonOf(err) != ReasonTooLarge || !strings.Contains(err.Error(), "files take more than") {
		t.Fatalf("Checkout of 16 MiB of zeros with a 1 MiB bound: %v (%s)", err, ReasonOf(err))
	}
	for _, f := range listFiles(t, dir) {
		if strings.HasSuffix(f, "zeros.bin") || strings.HasSuffix(f, "fleet.yaml") {
			t.Errorf("written before the check: %s", f)
		}
	}
}

// Too many files are refused before they are written out.
func TestTooManyFilesAreRefused(t *testing.T) {
	allowLoopback(t)
	defer func(old int64) { maxFiles = old }(maxFiles)
	maxFiles = 500 // the bound, smaller, so the test makes fewer files
	git := gittest.Start(t, "", "")
	for i := 0; i < 6; i++ {
		dir := filepath.Join(git.Work, "d", fmt.Sprint(i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for j := 0; j < 100; j++ {
			// Empty files: one blob, many names.
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprint(j)), nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}
	}
	commit := git.Commit("many files")
	err := Checkout(ctx(t), Source{URL: git.URL, Branch: "main"}, commit, filepath.Join(t.TempDir(), "repo"), 1<<30)
	if ReasonOf(err) != ReasonTooLarge || !strings.Contains(err.Error(), "files and folders") {
		t.Fatalf("Checkout of 600 files: %v (%s)", err, ReasonOf(err))
	}
}

// A repository made to inflate into much memory while it is indexed (a delta on a
// large, compressible base) makes the worker process fail, within its memory
// limit, and not the process that started it.
func TestTheWorkerIsBoundInMemory(t *testing.T) {
	policy := allowLoopback(t)
	git := gittest.Start(t, "", "")
	base := bytes.Repeat([]byte("flotilla "), 32<<20/9)
	git.Write("a.bin", base)
	git.Commit("a large file")
	git.Write("a.bin", append(base, "and a change"...))
	git.Git(git.Work, "config", "core.bigFileThreshold", "1g")
	commit := git.Commit("a change at its end: a delta on it")
	git.Git(git.Bare, "config", "core.bigFileThreshold", "1g")
	git.Git(git.Bare, "repack", "-q", "-a", "-d", "-f")

	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// The hub is built static (CGO_ENABLED=0, as make does); a dynamic test binary's
	// loader and libc fail in their own ways under a small RLIMIT_DATA.
	if f, err := elf.Open(exe); err == nil {
		dynamic := false
		for _, p := range f.Progs {
			dynamic = dynamic || p.Type == elf.PT_INTERP
		}
		f.Close()
		if dynamic {
			t.Skip("the test binary is linked dynamically; run with CGO_ENABLED=0, as make unit does")
		}
	}
	t.Setenv("GITFETCH_TEST_WORKER", "1")
	workerEnv = append(workerEnv, "GITFETCH_TEST_WORKER")
	src := Source{URL: git.URL, Revision: commit}
	job := Job{Source: src, Commit: commit, Dir: filepath.Join(t.TempDir(), "small"), MaxBytes: 1 << 30, Policy: policy}
	err = Run(ctx(t), exe, job, Limits{Memory: 32 << 20})
	if ReasonOf(err) != ReasonTooLarge || !strings.Contains(err.Error(), "bytes of memory") {
		t.Fatalf("a 32 MiB delta base with 32 MiB of memory: %v (%s)", err, ReasonOf(err))
	}
	// With room, the same job works: the limit is what stopped it.
	job.Dir = filepath.Join(t.TempDir(), "large")
	if err := Run(ctx(t), exe, job, Limits{Memory: 1 << 30}); err != nil {
		t.Fatalf("with 1 GiB of memory: %v", err)
	}
	if data, err := os.ReadFile(filepath.Join(job.Dir, "a.bin")); err != nil || !bytes.HasSuffix(data, []byte("and a change")) {
		t.Errorf("the checkout: %d bytes, %v", len(data), err)
	}
}

// A worker the kernel kills with SIGSEGV or SIGBUS under a memory limit ran out of
// memory; an exit with a status, or another signal, is not that.
func TestKilledByFault(t *testing.T) {
	for _, tc := range []struct {
		script string
		want   bool
	}{
		{"kill -SEGV $$", true},
		{"kill -BUS $$", true},
		{"kill -TERM $$", false},
		{"exit 2", false},
		{"true", false},
	} {
		t.Run(tc.script, func(t *testing.T) {
			err := exec.Command("/bin/sh", "-c", tc.script).Run()
			if got := killedByFault(err); got != tc.want {
				t.Errorf("killedByFault(%v) = %v, want %v", err, got, tc.want)
			}
		})
	}
}
