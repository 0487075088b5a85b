package gitrepo

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

// A repository that names one folder of 1 MiB in eight Bundles would have the hub
// hold all eight at once: past --gitrepo-max-sync-size (here 4 MiB) the GitRepo is
// refused TooLarge, naming the flag, and none of its Bundles is written; one that
// names it twice is deployed.
func TestOneGitRepoSyncIsBoundedInMemory(t *testing.T) {
	t.Parallel()
	git := startGitServer(t)
	hub := framework.StartHub(t, "--gitrepo-allowed-networks=127.0.0.0/8", fmt.Sprintf("--gitrepo-max-sync-size=%d", 4<<20))
	gitAuthIn(t, hub, workspace)

	git.Git(git.Work, "checkout", "-q", "-b", "big", "main")
	// Random data, so that the Bundles hold about as much as the folder, compressed.
	random := make([]byte, 768<<10)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	git.Write("big/cm.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: big\ndata:\n  x: "+base64.StdEncoding.EncodeToString(random)+"\n"))
	for i := range 8 {
		git.Write(fmt.Sprintf("big/o%d.yaml", i), []byte(fmt.Sprintf("defaultNamespace: big-%d\n", i)))
	}
	git.Commit("one folder of 1 MiB")
	withBundles := func(name string, n int) string {
		y := gitRepo(name, git.URL, "big", "git-auth") + "  bundles:\n"
		for i := range n {
			y += fmt.Sprintf("  - base: big\n    options: o%d.yaml\n", i)
		}
		return y
	}

	hub.MustKubectl(withBundles("eight", 8), "apply", "-f", "-")
	reason, message := accepted(t, hub, "eight", "False")
	t.Logf("eight: %s: %s", reason, message)
	if reason != "TooLarge" || !strings.Contains(message, fmt.Sprintf("more than %d bytes in all", 4<<20)) || !strings.Contains(message, "--gitrepo-max-sync-size") {
		t.Errorf("eight: %s: %s, want TooLarge naming the bound and --gitrepo-max-sync-size", reason, message)
	}
	if out := hub.MustKubectl("", "-n", workspace, "get", "bundles.fleet.cattle.io", "-l", "fleet.cattle.io/repo-name=eight", "-o", "name"); strings.TrimSpace(out) != "" {
		t.Errorf("the refused GitRepo wrote Bundles:\n%s", out)
	}

	hub.MustKubectl(withBundles("two", 2), "apply", "-f", "-")
	accepted(t, hub, "two", "True")
	out := hub.MustKubectl("", "-n", workspace, "get", "bundles.fleet.cattle.io", "-l", "fleet.cattle.io/repo-name=two", "-o", "name")
	if n := len(strings.Fields(out)); n != 2 {
		t.Errorf("GitRepo two wrote %d Bundles, want 2:\n%s", n, out)
	}
}
