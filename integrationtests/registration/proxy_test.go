package registration

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

// hubBehindProxy is a host name that resolves nowhere: only the proxy knows it.
const hubBehindProxy = "hub.flotilla.invalid"

// connectProxy is an HTTP CONNECT proxy that reaches hubBehindProxy:port (on
// loopback) and refuses every other target; it records the targets asked for.
type connectProxy struct {
	port int
	mu   sync.Mutex
	seen map[string]int
}

func (p *connectProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.seen[r.Host]++
	p.mu.Unlock()
	if r.Method != http.MethodConnect || r.Host != net.JoinHostPort(hubBehindProxy, strconv.Itoa(p.port)) {
		http.Error(w, "this proxy reaches "+hubBehindProxy+" only", http.StatusForbidden)
		return
	}
	upstream, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)))
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	w.WriteHeader(http.StatusOK)
	client, buffered, err := http.NewResponseController(w).Hijack()
	if err != nil {
		upstream.Close()
		return
	}
	go func() {
		defer upstream.Close()
		defer client.Close()
		done := make(chan struct{})
		go func() {
			_, _ = io.Copy(upstream, buffered)
			close(done)
		}()
		_, _ = io.Copy(client, upstream)
		<-done
	}()
}

func (p *connectProxy) targets() map[string]int {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string]int{}
	for k, v := range p.seen {
		out[k] = v
	}
	return out
}

// An agent whose only route to the hub is an HTTP proxy registers, deploys its
// agent bundle and checks in (the Cluster is Ready) through it, given --hub-proxy
// (the chart's proxy value); without it, it cannot reach the hub at all.
func TestAnAgentReachesTheHubThroughAProxy(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, "--tls-san", hubBehindProxy)
	proxy := &connectProxy{port: hub.Port, seen: map[string]int{}}
	server := httptest.NewServer(proxy)
	t.Cleanup(server.Close)
	hubURL := "https://" + net.JoinHostPort(hubBehindProxy, strconv.Itoa(hub.Port))

	ds := framework.StartControlPlane(t, "behind-proxy")
	framework.InstallAgent(t, ds, hub.CreateToken(workspace, "proxied", "1h"), "--set", "apiServerURL="+hubURL)

	// Without the proxy the hub's name does not even resolve.
	direct := framework.StartAgent(t, ds)
	framework.Eventually(t, "the agent without a proxy to fail to reach the hub", timeout, func(context.Context) error {
		if log := direct.Log(); !strings.Contains(log, hubBehindProxy) || !strings.Contains(log, "no such host") {
			return fmt.Errorf("no lookup failure logged yet")
		}
		return nil
	})
	if err := direct.Stop(); err != nil {
		t.Fatal(err)
	}

	framework.StartAgentIn(t, ds, "cattle-fleet-system", "--hub-proxy", server.URL, "--hub-no-proxy", "other.invalid,10.0.0.0/8")
	cred := waitRegistered(t, ds)
	if cred.APIServerURL != hubURL {
		t.Errorf("the identity is for %s, want %s", cred.APIServerURL, hubURL)
	}
	waitAgentBundleDeployed(t, ds)
	waitReady(t, hub, cred.ClusterName)

	targets := proxy.targets()
	if targets[strings.TrimPrefix(hubURL, "https://")] == 0 {
		t.Errorf("the proxy saw no connection to the hub: %v", targets)
	}
	for target := range targets {
		if target != strings.TrimPrefix(hubURL, "https://") {
			t.Errorf("the agent asked the proxy for %s: only the hub connection goes through it", target)
		}
	}

}
