package gitrepo

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/internal/procstat"
)

// TestManyGitReposPolling measures the hub with FLOTILLA_GITREPO_SCALE GitRepos (make
// bench-gitrepo: 100) polling every 15 s: the time until every one is Accepted, then
// over a minute of polling the hub's CPU and memory, the looks at the branch, and
// that nothing is fetched again while the branch stands still. The hub runs against
// a control plane of its own (hub --kubeconfig), so its numbers are its own.
func TestManyGitReposPolling(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("FLOTILLA_GITREPO_SCALE"))
	if n <= 0 {
		t.Skip("set FLOTILLA_GITREPO_SCALE (make bench-gitrepo)")
	}
	git := startGitServer(t)
	api := framework.StartControlPlane(t, "gitrepo-api")
	hub := framework.StartHubOn(t, api, "--gitrepo-allowed-networks=127.0.0.0/8")
	gitAuthIn(t, hub, workspace)
	var all strings.Builder
	for i := 0; i < n; i++ {
		y := gitRepo(fmt.Sprintf("repo-%03d", i), git.URL, "main", "git-auth", "single-cluster/manifests")
		all.WriteString(strings.Replace(y, "pollingInterval: 2s", "pollingInterval: 15s", 1) + "---\n")
	}
	start := time.Now()
	hub.MustKubectl(all.String(), "apply", "-f", "-")
	framework.Eventually(t, "every GitRepo Accepted", 10*time.Minute, func(ctx context.Context) error {
		out, err := hub.Kubectl("", "-n", workspace, "get", "gitrepos.fleet.cattle.io", "-o",
			`jsonpath={range .items[*]}{.status.conditions[?(@.type=="Accepted")].status}{"\n"}{end}`)
		if err != nil {
			return err
		}
		if got := strings.Count(out, "True"); got < n {
			return fmt.Errorf("%d of %d", got, n)
		}
		return nil
	})
	t.Logf("%d GitRepos applied to all Accepted (each checked out once): %s; checkouts %d", n, time.Since(start).Round(100*time.Millisecond), git.Pulls.Load())

	pid := hub.Process.Pid()
	const window = 60 * time.Second
	u0, looks0, pulls0 := usage(t, pid), git.Looks.Load(), git.Pulls.Load()
	time.Sleep(window)
	u1, looks1, pulls1 := usage(t, pid), git.Looks.Load(), git.Pulls.Load()
	cpu0, cpu1 := u0.CPUSeconds+u0.ChildrenCPUSeconds, u1.CPUSeconds+u1.ChildrenCPUSeconds
	rss, hwm := u1.RSSMiB, u1.PeakRSSMiB
	t.Logf("over %s of polling: hub CPU %.2f s (%.1f%% of one core), RSS %.1f MiB (peak %.1f MiB), %d looks at the branch, %d checkouts",
		window, cpu1-cpu0, 100*(cpu1-cpu0)/window.Seconds(), rss, hwm, looks1-looks0, pulls1-pulls0)
	if pulls1 != pulls0 {
		t.Errorf("%d checkouts of a branch that did not move", pulls1-pulls0)
	}
	if looks1-looks0 < int64(n) {
		t.Errorf("%d looks at the branch in %s by %d GitRepos polling every 15 s", looks1-looks0, window, n)
	}
}

// usage is the hub's CPU time, its workers' included, and its memory.
func usage(t *testing.T, pid int) procstat.Usage {
	t.Helper()
	u, err := procstat.Of(pid)
	if err != nil {
		t.Fatal(err)
	}
	return u
}
