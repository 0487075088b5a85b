package gitfetch

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/flotilla/flotilla/pkg/kubeconfig"
)

func TestOnlyHTTPRepositoriesOfAHost(t *testing.T) {
	for _, tc := range []struct {
		url string
		ok  bool
	}{
		{"https://github.com/rancher/fleet-examples", true},
		{"http://git.internal:3000/team/repo.git", true},
		{"file:///etc", false},
		{"/var/lib/flotilla", false},
		{"../other", false},
		{"ssh://git@github.com/rancher/fleet-examples", true},
		{"git@github.com:rancher/fleet-examples.git", true},
		{"ssh://git:password@github.com/rancher/fleet-examples", false},
		{"git@-oProxyCommand=touch:x", false},
		{"ssh://git@github.com/team-a/../team-b", false},
		{"https://user:token@github.com/x/y", false},
		{"https:///no-host", false},
		{"ext::sh -c touch% /tmp/pwned", false},
		{"https://git.example.com/team-a/../team-b/private.git", false},
		{"https://git.example.com/team-a/%2e%2e/team-b/private.git", false},
		{"https://git.example.com/team-a/./repo.git", false},
		{"https://git.example.com/team-a%2f..%2fteam-b/repo.git", false},
		{"https://git.example.com/team-a/repo.git?x=1", false},
		{"https://git.example.com/team-a/repo.git#frag", false},
	} {
		t.Run(tc.url, func(t *testing.T) {
			err := CheckURL(tc.url)
			if (err == nil) != tc.ok {
				t.Fatalf("CheckURL(%q) = %v", tc.url, err)
			}
			if err != nil && ReasonOf(err) != ReasonInvalidURL {
				t.Errorf("reason %s", ReasonOf(err))
			}
			// Nothing is fetched from a refused URL.
			if !tc.ok {
				if _, err := Head(context.Background(), Source{URL: tc.url}, 1<<20); ReasonOf(err) != ReasonInvalidURL {
					t.Errorf("Head fetched %q: %v", tc.url, err)
				}
			}
		})
	}
}

// The hub does not fetch from its own machine's loopback (or link-local, metadata)
// addresses unless an admin allows them: a GitRepo is no way to reach services only
// the hub can.
func TestFetchesGoThroughTheAddressPolicy(t *testing.T) {
	var asked atomic.Bool
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Store(true)
		http.NotFound(w, r)
	}))
	defer server.Close()

	Install(&kubeconfig.AddressPolicy{For: "a GitRepo", Flag: "--gitrepo-allowed-networks"})
	_, err := Head(context.Background(), Source{URL: server.URL + "/repo.git"}, 1<<20)
	if ReasonOf(err) != ReasonAddressRefused || !strings.Contains(err.Error(), "--gitrepo-allowed-networks") {
		t.Errorf("Head of a loopback repository: %v (%s)", err, ReasonOf(err))
	}
	if asked.Load() {
		t.Error("the server was reached")
	}

	allowed, _ := kubeconfig.ParsePrefixes([]string{"127.0.0.0/8"})
	Install(&kubeconfig.AddressPolicy{Allowed: allowed})
	if _, err := Head(context.Background(), Source{URL: server.URL + "/repo.git"}, 1<<20); ReasonOf(err) == ReasonAddressRefused || !asked.Load() {
		t.Errorf("allowed, the server was not reached: %v", err)
	}
}
