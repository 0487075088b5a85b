package gitfetch

import (
	"crypto/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/flotilla/flotilla/internal/gittest"
	"github.com/flotilla/flotilla/pkg/kubeconfig"
)

// SSH repositories: the key authenticates, the server's key is checked against
// known_hosts (always), the address policy and the size bound hold as over HTTP.
func TestSSHRepositories(t *testing.T) {
	allowLoopback(t)
	git := gittest.Start(t, "", "")
	git.Write("fleet.yaml", []byte("defaultNamespace: over-ssh\n"))
	commit := git.Commit("over SSH")
	key := gittest.NewKey(t)
	url, knownHosts := git.ServeSSH(key)
	src := Source{URL: url, Branch: "main", SSHPrivateKey: key.PrivatePEM, KnownHosts: knownHosts}

	got, err := Head(ctx(t), src, 1<<20)
	if err != nil || got != commit {
		t.Fatalf("Head over SSH = %s, %v; want %s", got, err, commit)
	}
	dir := filepath.Join(t.TempDir(), "repo")
	if err := Checkout(ctx(t), src, commit, dir, 1<<20); err != nil {
		t.Fatalf("Checkout over SSH: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "fleet.yaml")); err != nil {
		t.Errorf("the checkout: %v", err)
	}

	other := gittest.NewKey(t)
	_, otherHosts := gittest.Start(t, "", "").ServeSSH(other)
	for _, tc := range []struct {
		name   string
		src    Source
		reason string
	}{
		{"no known_hosts", Source{URL: url, Branch: "main", SSHPrivateKey: key.PrivatePEM}, ReasonHostKeyNotTrusted},
		{"another server's key in known_hosts", Source{URL: url, Branch: "main", SSHPrivateKey: key.PrivatePEM, KnownHosts: otherHosts}, ReasonHostKeyNotTrusted},
		{"a key the server does not know", Source{URL: url, Branch: "main", SSHPrivateKey: other.PrivatePEM, KnownHosts: knownHosts}, ReasonAuthFailed},
		{"no key", Source{URL: url, Branch: "main", KnownHosts: knownHosts}, ReasonAuthFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := Head(ctx(t), tc.src, 1<<20); ReasonOf(err) != tc.reason {
				t.Errorf("Head: %v (%s), want %s", err, ReasonOf(err), tc.reason)
			}
		})
	}

	t.Run("the size bound", func(t *testing.T) {
		random := make([]byte, 2<<20)
		_, _ = rand.Read(random)
		git.Write("big.bin", random)
		big := git.Commit("2 MiB of noise")
		if err := Checkout(ctx(t), src, big, filepath.Join(t.TempDir(), "big"), 1<<20); ReasonOf(err) != ReasonTooLarge {
			t.Errorf("Checkout of 2 MiB with a 1 MiB bound over SSH: %v (%s)", err, ReasonOf(err))
		}
	})
	t.Run("the address policy", func(t *testing.T) {
		Install(&kubeconfig.AddressPolicy{For: "a GitRepo", Flag: "--gitrepo-allowed-networks"})
		defer allowLoopback(t)
		before := git.Pulls.Load()
		if _, err := Head(ctx(t), src, 1<<20); ReasonOf(err) != ReasonAddressRefused {
			t.Errorf("Head of a loopback SSH server: %v (%s)", err, ReasonOf(err))
		}
		if git.Pulls.Load() != before {
			t.Error("the server was reached")
		}
	})
}
