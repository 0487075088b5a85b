package gitrepo

import (
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

// A GitRepo's author names the servers the hub connects to: its repository and the
// charts its fleet.yaml files name. Those on the hub's machine, its cloud's metadata
// service and private networks are refused unless the admin allows them
// (--gitrepo-allowed-networks, here the Git server's address only), before anything
// is sent; the allowed repository is fetched as usual.
func TestGitRepoConnectionsToRefusedAddressesAreRefused(t *testing.T) {
	t.Parallel()
	git := startGitServer(t)
	var asked atomic.Int32
	listener, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		t.Fatal(err)
	}
	charts := &httptest.Server{Listener: listener, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "secret", http.StatusOK)
	})}}
	charts.Start()
	t.Cleanup(charts.Close)

	hub := framework.StartHub(t, "--gitrepo-allowed-networks=127.0.0.1/32")
	gitAuthIn(t, hub, workspace)

	git.Git(git.Work, "checkout", "-q", "-b", "ssrf", "main")
	for name, url := range map[string]string{"loopback": charts.URL + "/chart.tgz", "metadata": "http://169.254.169.254/latest/chart.tgz", "private": "http://10.1.2.3/chart.tgz"} {
		git.Write(name+"/fleet.yaml", []byte("helm:\n  chart: "+url+"\n"))
	}
	git.Commit("charts on refused addresses")
	for name, want := range map[string]string{
		"loopback": "does not connect to " + strings.TrimPrefix(charts.URL, "http://") + " for a GitRepo: it is a loopback address",
		"metadata": "does not connect to 169.254.169.254:80 for a GitRepo: it is a link-local address",
		"private":  "does not connect to 10.1.2.3:80 for a GitRepo: it is a private address",
	} {
		hub.MustKubectl(gitRepo("chart-"+name, git.URL, "ssrf", "git-auth", name), "apply", "-f", "-")
		reason, message := accepted(t, hub, "chart-"+name, "False")
		t.Logf("chart-%s: %s: %s", name, reason, message)
		if reason != "InvalidBundle" || !strings.Contains(message, want) || !strings.Contains(message, "--gitrepo-allowed-networks") {
			t.Errorf("chart-%s: %s: %s, want InvalidBundle saying %q and naming the flag", name, reason, message, want)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the chart server on 127.0.0.2 was asked %d times", n)
	}

	for name, url := range map[string]string{"private": "http://10.1.2.3/repo.git", "loopback": fmt.Sprintf("http://127.0.0.2:%d/repo.git", charts.Listener.Addr().(*net.TCPAddr).Port)} {
		hub.MustKubectl(gitRepo("repo-"+name, url, "main", "git-auth"), "apply", "-f", "-")
		reason, message := accepted(t, hub, "repo-"+name, "False")
		t.Logf("repo-%s: %s: %s", name, reason, message)
		if reason != "AddressRefused" || !strings.Contains(message, "it is a "+name+" address") || !strings.Contains(message, "--gitrepo-allowed-networks") {
			t.Errorf("repo-%s: %s: %s, want the address refused naming the flag", name, reason, message)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the server on 127.0.0.2 was asked %d times", n)
	}

	hub.MustKubectl(gitRepo("allowed", git.URL, "main", "git-auth", "single-cluster/manifests"), "apply", "-f", "-")
	accepted(t, hub, "allowed", "True")
}
