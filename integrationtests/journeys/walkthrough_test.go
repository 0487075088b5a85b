package journeys

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

// TestReadmeWalkthrough runs every command of the README's "Try it on one machine"
// section, as written, in a directory laid out like the repository's root (bin/ and
// charts/). The commands are its assertions: each `kubectl wait` fails the script when
// its condition does not come.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	root := framework.RepoRoot(t)
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := walkthrough(string(readme))
	if err != nil {
		t.Fatal(err)
	}

	dir := framework.ShortTempDir(t, "flt-walk-")
	for link, target := range map[string]string{"bin": framework.BinDir(t), "charts": filepath.Join(root, "charts")} {
		if err := os.Symlink(target, filepath.Join(dir, link)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", "set -euxo pipefail\n"+script)
	cmd.Dir = dir
	cmd.Env = append(withoutKubeconfig(os.Environ()), "PATH="+framework.BinDir(t)+":"+os.Getenv("PATH"))
	// Its own process group, so that the hub, control planes and agents it starts in
	// the background end with it, whatever happens.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		}
	})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Errorf("the README walkthrough failed: %v\n%s", err, out)
		for _, log := range []string{"hub", "dev", "prod", "dev-agent", "prod-agent"} {
			t.Logf("try/%s.log (tail):\n%s", log, framework.Tail(filepath.Join(dir, "try", log+".log"), 40))
		}
		return
	}
	t.Logf("the walkthrough's last lines:\n%s", lastLines(string(out), 6))
	// What the README shows as the output.
	for _, want := range []string{"hello from the hub", "fleet-agent"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the walkthrough's output lacks %q:\n%s", want, out)
		}
	}
	listed := regexp.MustCompile(`(?m)^clusters\s+prod\s+1/1\s`).MatchString(string(out)) &&
		regexp.MustCompile(`(?m)^clusters\s+cluster-[0-9a-f]{12}\s+2/2\s`).MatchString(string(out))
	if !listed {
		t.Errorf("hub cluster list does not show prod with 1/1 and the dev cluster with 2/2 bundles ready:\n%s", out)
	}
}

// walkthrough is the shell code of the README's walkthrough: the ```sh blocks between
// the <!-- walkthrough --> and <!-- /walkthrough --> markers, in order.
func walkthrough(readme string) (string, error) {
	_, section, ok := strings.Cut(readme, "<!-- walkthrough -->")
	if ok {
		section, _, ok = strings.Cut(section, "<!-- /walkthrough -->")
	}
	if !ok {
		return "", fmt.Errorf("README.md has no <!-- walkthrough --> ... <!-- /walkthrough --> section")
	}
	var script strings.Builder
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(section, -1)
	for _, b := range blocks {
		script.WriteString(b[1])
	}
	if len(blocks) < 3 {
		return "", fmt.Errorf("the README walkthrough has %d sh blocks; expected the set-up, J1, J3 and more", len(blocks))
	}
	return script.String(), nil
}

func withoutKubeconfig(env []string) []string {
	var out []string
	for _, e := range env {
		if !strings.HasPrefix(e, "KUBECONFIG=") {
			out = append(out, e)
		}
	}
	return out
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
