package gitrepo

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/internal/freeport"
	"github.com/flotilla/flotilla/internal/procstat"
)

// floodOutcome is how the hub ended one flooding connection: the status it answered,
// or closed for a connection it closed without an answer.
type floodOutcome struct {
	status int
	body   string
	closed bool
}

// flood opens n connections to addr from the address from, at once. With a body, each
// sends a push event's header stating a body of 1 MiB and, unless answered at once,
// 900 KiB of it; without, nothing at all. Each waits for the hub's answer for up to
// wait. flood returns once the connections are open; answered waits for the outcomes.
func flood(t *testing.T, addr, from string, n int, withBody bool, wait time.Duration) (answered func() []floodOutcome) {
	t.Helper()
	var mu sync.Mutex
	var outcomes []floodOutcome
	var open, done sync.WaitGroup
	for range n {
		open.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}, Timeout: 10 * time.Second}
			conn, err := d.Dial("tcp", addr)
			open.Done()
			if err != nil {
				t.Errorf("dialing the webhook from %s: %v", from, err)
				return
			}
			defer conn.Close()
			answer := bufio.NewReader(conn)
			if withBody {
				fmt.Fprintf(conn, "POST / HTTP/1.1\r\nHost: hub\r\nX-GitHub-Event: push\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", 1<<20)
				// A connection refused is answered before its body is sent.
				_ = conn.SetReadDeadline(time.Now().Add(time.Second))
				var timeout net.Error
				if _, err := answer.Peek(1); errors.As(err, &timeout) && timeout.Timeout() {
					_, _ = conn.Write(make([]byte, 900<<10))
				}
			}
			_ = conn.SetReadDeadline(time.Now().Add(wait))
			var o floodOutcome
			resp, err := http.ReadResponse(answer, nil)
			switch {
			case err == nil:
				b, _ := io.ReadAll(resp.Body)
				o.status, o.body = resp.StatusCode, strings.TrimSpace(string(b))
			case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
				o.closed = true
			default:
				t.Errorf("a flooding connection from %s: %v", from, err)
				return
			}
			mu.Lock()
			outcomes = append(outcomes, o)
			mu.Unlock()
		}()
	}
	open.Wait()
	return func() []floodOutcome {
		done.Wait()
		mu.Lock()
		defer mu.Unlock()
		return outcomes
	}
}

// count tallies outcomes by status (0 for closed) and keeps one message of each.
func count(outcomes []floodOutcome) (map[int]int, map[int]string) {
	n, msg := map[int]int{}, map[int]string{}
	for _, o := range outcomes {
		n[o.status]++
		msg[o.status] = o.body
	}
	return n, msg
}

// The attack of issue 35 on the push event endpoint, which answers anyone: 600
// connections from one address, each sending a push event's header and most of a
// 1 MiB body and then holding (600 of these took 522 MiB of the hub before the
// defence); then more from other addresses, until the memory for events and the
// connections run out. Each is answered with the bound it passed (429, 503) or, held,
// 408 once the read timeout passes; the hub's memory stays within the bound; a signed
// push from the Git server's address is answered and marks its GitRepo while one
// address floods, and again once the flood is over.
func TestAWebhookFloodIsBoundedAndPushesAreAnswered(t *testing.T) {
	t.Parallel()
	git := startGitServer(t)
	port, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", port)
	const readTimeout = time.Minute
	hub := framework.StartHub(t, "--gitrepo-allowed-networks=127.0.0.0/8", "--webhook-bind-address="+addr,
		"--webhook-read-timeout="+readTimeout.String())
	gitAuthIn(t, hub, workspace)
	hub.MustKubectl("", "-n", "cattle-fleet-system", "create", "secret", "generic", "gitjob-webhook", "--from-literal=github="+webhookSecret)
	hub.MustKubectl(strings.Replace(gitRepo("pushed", git.URL, "main", "git-auth", "single-cluster/manifests"), "pollingInterval: 2s", "pollingInterval: 1h", 1), "apply", "-f", "-")
	if out, err := hub.Kubectl("", "-n", workspace, "wait", "--for=jsonpath={.status.commit}", "gitrepos.fleet.cattle.io/pushed", "--timeout=120s"); err != nil {
		t.Fatalf("GitRepo pushed was not fetched: %v\n%s", err, out)
	}
	pushes := 0
	pushAndSee := func(what string) {
		t.Helper()
		pushes++
		git.Write(fmt.Sprintf("single-cluster/manifests/push-%d.yaml", pushes), []byte(fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: push-%d\n", pushes)))
		commit := git.Commit(what)
		event := fmt.Sprintf(`{"ref":"refs/heads/main","after":%q,"repository":{"html_url":%q,"clone_url":%q}}`, commit, strings.TrimSuffix(git.URL, ".git"), git.URL)
		if status := postEvent(t, "http://"+addr+"/", event, webhookSecret); status != http.StatusOK {
			t.Fatalf("%s: the signed push event was answered %d", what, status)
		}
		if out, err := hub.Kubectl("", "-n", workspace, "wait", "--for=jsonpath={.status.webhookCommit}="+commit, "gitrepos.fleet.cattle.io/pushed", "--timeout=30s"); err != nil {
			t.Fatalf("%s: the push event did not mark the GitRepo: %v\n%s", what, err, out)
		}
	}
	pushAndSee("a push before the flood")

	pid := hub.Process.Pid()
	before, err := procstat.Of(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Answers come at once for refused connections, and after the read timeout for held ones.
	wait := readTimeout + 30*time.Second
	oneAddress := flood(t, addr, "127.0.0.2", 600, true, wait)
	time.Sleep(5 * time.Second) // the held ones' bodies arrive
	during, err := procstat.Of(pid)
	if err != nil {
		t.Fatalf("the hub process is gone during the flood: %v", err)
	}
	pushAndSee("a push while one address floods")

	// Two more addresses fill the memory for events (32 MiB held by the first).
	memory := [][]floodOutcome{}
	more := []func() []floodOutcome{flood(t, addr, "127.0.0.3", 20, true, wait), flood(t, addr, "127.0.0.4", 20, true, wait)}
	time.Sleep(5 * time.Second)
	full, err := procstat.Of(pid)
	if err != nil {
		t.Fatalf("the hub process is gone during the flood: %v", err)
	}
	// Ten more addresses open connections and send nothing, past the 256 the hub holds.
	var silent []func() []floodOutcome
	for i := range 10 {
		silent = append(silent, flood(t, addr, fmt.Sprintf("127.0.1.%d", i+1), 25, false, wait))
	}

	n, msg := count(oneAddress())
	t.Logf("600 connections from one address: %v", n)
	if n[http.StatusRequestTimeout] != 32 || n[http.StatusTooManyRequests] != 600-32 ||
		!strings.Contains(msg[http.StatusTooManyRequests], "too many connections from one address (at most 32)") {
		t.Errorf("600 connections from one address were answered %v (%v), want 32 held until 408 and the others 429", n, msg)
	}
	for _, m := range more {
		memory = append(memory, m())
	}
	n, msg = count(append(memory[0], memory[1]...))
	t.Logf("40 connections from two more addresses: %v", n)
	if n[http.StatusRequestTimeout] != 32 || n[http.StatusServiceUnavailable] != 8 ||
		!strings.Contains(msg[http.StatusServiceUnavailable], "as many events as it holds at once (67108864 bytes)") {
		t.Errorf("40 connections from two more addresses were answered %v (%v), want 32 held until 408 and 8 refused for memory", n, msg)
	}
	var all []floodOutcome
	for _, s := range silent {
		all = append(all, s()...)
	}
	n, msg = count(all)
	t.Logf("250 silent connections from ten more addresses: %v", n)
	if n[http.StatusServiceUnavailable] < 250-(256-64) || n[http.StatusServiceUnavailable]+n[0] != 250 ||
		!strings.Contains(msg[http.StatusServiceUnavailable], "too many connections (at most 256)") {
		t.Errorf("250 silent connections were answered %v (%v), want at least %d refused 503 and the others closed by the header timeout", n, msg, 250-(256-64))
	}

	t.Logf("hub memory: RSS %.0f MiB before the flood, %.0f MiB with one address flooding, %.0f MiB with the event memory full; peak %.0f MiB before, %.0f MiB after",
		before.RSSMiB, during.RSSMiB, full.RSSMiB, before.PeakRSSMiB, full.PeakRSSMiB)
	if grown := full.PeakRSSMiB - before.PeakRSSMiB; grown > 256 {
		t.Errorf("the hub's peak RSS grew %.0f MiB during the flood, past its 64 MiB of events and its connections' buffers", grown)
	}
	pushAndSee("a push after the flood")
}
