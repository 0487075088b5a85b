package gitrepo

import (
	"context"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

// stallingServer accepts connections and never answers them: a Git server too slow to
// ever reply. held counts the connections a client keeps open to it.
type stallingServer struct {
	URL  string
	held atomic.Int64
}

func startStallingServer(t *testing.T) *stallingServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &stallingServer{URL: "http://" + ln.Addr().String() + "/repo.git"}
	var mu sync.Mutex
	var conns []net.Conn
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			s.held.Add(1)
			go func() {
				_, _ = io.Copy(io.Discard, c) // until the client gives up
				s.held.Add(-1)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return s
}

// The attack of issue 35 on GitOps: one workspace's GitRepos point at a Git server
// that never answers, to hold every fetch slot of the hub. A workspace holds at most
// all but one slot, so another workspace's GitRepo is fetched at once while the slow
// fetches still hang; the per-fetch deadline then frees the slow ones' slots and says
// so in their status.
func TestOneWorkspacesSlowGitServerDoesNotStallAnother(t *testing.T) {
	t.Parallel()
	slow := startStallingServer(t)
	git := startGitServer(t)
	// One checkout slot: four slots to look at a branch, three of them for one workspace.
	hub := framework.StartHub(t, "--gitrepo-allowed-networks=127.0.0.0/8", "--gitrepo-concurrent-fetches=1", "--gitrepo-fetch-timeout=60s")
	const attacker = "slow-team"
	hub.MustKubectl("", "create", "namespace", attacker)
	const slowRepos = 6
	for i := range slowRepos {
		y := strings.Replace(gitRepo(fmt.Sprintf("slow-%d", i), slow.URL, "main", ""), "namespace: "+workspace, "namespace: "+attacker, 1)
		hub.MustKubectl(y, "apply", "-f", "-")
	}
	framework.Eventually(t, "the slow GitRepos to hold the looks their workspace may", time.Minute, func(context.Context) error {
		if n := slow.held.Load(); n < 3 {
			return fmt.Errorf("%d connections to the slow server", n)
		}
		return nil
	})

	gitAuthIn(t, hub, workspace)
	hub.MustKubectl(gitRepo("on-time", git.URL, "main", "git-auth", "single-cluster/manifests"), "apply", "-f", "-")
	if reason, message := accepted(t, hub, "on-time", "True"); reason != "" {
		t.Fatalf("on-time: %s %s", reason, message)
	}
	if n := slow.held.Load(); n < 3 {
		t.Fatalf("only %d slow fetches hang after the other workspace's GitRepo was fetched: it may have waited for their deadline", n)
	}
	if n := slow.held.Load(); n > 3 {
		t.Fatalf("the slow workspace holds %d looks at once, more than all but one of four", n)
	}
	hub.MustKubectl("", "-n", workspace, "get", "bundles.fleet.cattle.io", "on-time-single-cluster-manifests")

	// The deadline frees the slots, and each slow GitRepo says why it was not fetched.
	framework.Eventually(t, "each slow GitRepo to be refused for its deadline", 4*time.Minute, func(context.Context) error {
		out, err := hub.Kubectl("", "-n", attacker, "get", "gitrepos.fleet.cattle.io", "-o",
			`jsonpath={range .items[*]}{.metadata.name}={.status.conditions[?(@.type=="Accepted")].reason}{"\n"}{end}`)
		if err != nil {
			return err
		}
		if got := strings.Count(out, "=TimedOut"); got != slowRepos {
			return fmt.Errorf("%d of %d TimedOut:\n%s", got, slowRepos, out)
		}
		return nil
	})
}
