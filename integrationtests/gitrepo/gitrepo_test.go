// Package gitrepo checks GitRepos against a Git server the test starts: the real
// `git http-backend` behind the test's own HTTP server with basic auth, serving a
// copy of rancher/fleet-examples.
package gitrepo

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/internal/freeport"
	"github.com/flotilla/flotilla/internal/gittest"
)

const (
	// maxSize is the hub's --gitrepo-max-size in these tests.
	maxSize       = 4 << 20
	webhookSecret = "hook-s3cret"
	ownSecret     = "own-hook-s3cret"
	gitUser       = "git"
	gitPassword   = "s3cret"
	workspace     = "fleet-default"
)

// startGitServer serves a copy of fleet-examples' single-cluster/manifests, as
// Fleet users keep it, with basic auth.
func startGitServer(t *testing.T) *gittest.Server {
	t.Helper()
	s := gittest.Start(t, gitUser, gitPassword)
	s.CopyDir(filepath.Join(framework.RepoRoot(t), "integrationtests", "conformance", "testdata", "fleet-examples", "single-cluster", "manifests"),
		filepath.Join("single-cluster", "manifests"))
	s.Commit("fleet-examples single-cluster/manifests")
	return s
}

// gitAuthIn makes namespace, if it is not there, with the Secret git-auth holding
// the Git server's credentials.
func gitAuthIn(t *testing.T, hub *framework.Hub, namespace string) {
	t.Helper()
	hub.MustKubectl("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+namespace+"\n", "apply", "-f", "-")
	hub.MustKubectl("", "-n", namespace, "create", "secret", "generic", "git-auth", "--type=kubernetes.io/basic-auth",
		"--from-literal=username="+gitUser, "--from-literal=password="+gitPassword)
}

func gitRepo(name, url, branch, secret string, paths ...string) string {
	y := "apiVersion: fleet.cattle.io/v1alpha1\nkind: GitRepo\nmetadata:\n  name: " + name + "\n  namespace: " + workspace +
		"\nspec:\n  repo: " + url + "\n  branch: " + branch + "\n  pollingInterval: 2s\n"
	if secret != "" {
		y += "  clientSecretName: " + secret + "\n"
	}
	if len(paths) > 0 {
		y += "  paths:\n"
		for _, p := range paths {
			y += "  - " + p + "\n"
		}
	}
	return y + "  targets:\n  - clusterSelector:\n      matchLabels: {env: dev}\n"
}

// accepted waits for a GitRepo's Accepted condition to be status, and returns its
// reason and message.
func accepted(t *testing.T, hub *framework.Hub, name, status string) (string, string) {
	t.Helper()
	return acceptedIn(t, hub, workspace, name, status)
}

func acceptedIn(t *testing.T, hub *framework.Hub, namespace, name, status string) (string, string) {
	t.Helper()
	var reason, message string
	framework.Eventually(t, name+" Accepted="+status, time.Minute, func(ctx context.Context) error {
		out, err := hub.Kubectl("", "-n", namespace, "get", "gitrepos.fleet.cattle.io", name, "-o",
			`jsonpath={.status.conditions[?(@.type=="Accepted")].status}|{.status.conditions[?(@.type=="Accepted")].reason}|{.status.conditions[?(@.type=="Accepted")].message}`)
		if err != nil {
			return err
		}
		parts := strings.SplitN(out, "|", 3)
		if len(parts) != 3 || parts[0] != status {
			return fmt.Errorf("Accepted: %q", out)
		}
		reason, message = parts[1], parts[2]
		return nil
	})
	return reason, message
}

func TestAGitRepoDeploysFleetExamplesAndFollowsItsBranch(t *testing.T) {
	git := startGitServer(t)
	webhookPort, err := freeport.Pick()
	if err != nil {
		t.Fatal(err)
	}
	webhookURL := fmt.Sprintf("http://127.0.0.1:%d/", webhookPort)
	hub := framework.StartHub(t, "--gitrepo-allowed-networks=127.0.0.0/8", fmt.Sprintf("--webhook-bind-address=127.0.0.1:%d", webhookPort),
		fmt.Sprintf("--gitrepo-max-size=%d", maxSize))
	clusters := framework.RegisterSimulatedClusters(t, hub, workspace, map[string]string{"dev": "dev", "prod": "prod"})
	var dev, prod *framework.Downstream
	for _, c := range clusters {
		if c.Name == "dev" {
			dev = c
		} else {
			prod = c
		}
	}
	gitAuthIn(t, hub, workspace)

	applied := time.Now()
	hub.MustKubectl(gitRepo("examples", git.URL, "main", "git-auth", "single-cluster/manifests"), "apply", "-f", "-")
	if out, err := hub.Kubectl("", "-n", workspace, "wait", "--for=condition=Ready", "gitrepos.fleet.cattle.io/examples", "--timeout=180s"); err != nil {
		t.Fatalf("GitRepo not Ready: %v\n%s\n%s", err, out, hub.MustKubectl("", "-n", workspace, "get", "gitrepos.fleet.cattle.io", "examples", "-o", "yaml"))
	}
	t.Logf("kubectl apply of the GitRepo to Ready: %s", time.Since(applied).Round(100*time.Millisecond))
	t.Logf("\n%s", hub.MustKubectl("", "-n", workspace, "get", "gitrepos.fleet.cattle.io"))
	header := strings.Fields(strings.SplitN(hub.MustKubectl("", "-n", workspace, "get", "gitrepos.fleet.cattle.io"), "\n", 2)[0])
	if strings.Join(header, " ") != "NAME REPO COMMIT BUNDLEDEPLOYMENTS-READY STATUS" {
		t.Errorf("columns: %v", header)
	}
	if out := dev.MustKubectl("", "get", "deployments", "-A", "-o", "name"); !strings.Contains(out, "frontend") {
		t.Errorf("dev lacks the example's frontend Deployment: %s", out)
	}
	if out, _ := prod.Kubectl("", "get", "deployments", "-A", "-o", "name"); strings.Contains(out, "frontend") {
		t.Errorf("prod, not targeted, got the example: %s", out)
	}

	// A new commit reaches the cluster by polling.
	git.Write("single-cluster/manifests/extra/configmap.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-a-push\ndata:\n  pushed: \"yes\"\n"))
	pushed := time.Now()
	commit := git.Commit("a ConfigMap")
	framework.Eventually(t, "the pushed ConfigMap downstream", 2*time.Minute, func(ctx context.Context) error {
		out, err := dev.Kubectl("", "get", "configmaps", "-A", "--field-selector", "metadata.name=from-a-push", "-o", "name")
		if err != nil || out == "" {
			return fmt.Errorf("not yet (%v)", err)
		}
		return nil
	})
	t.Logf("git push to the object downstream (polling every 2s): %s", time.Since(pushed).Round(100*time.Millisecond))
	if got := hub.MustKubectl("", "-n", workspace, "get", "gitrepos.fleet.cattle.io", "examples", "-o", "jsonpath={.status.commit}"); got != commit {
		t.Errorf("status.commit %s, want %s", got, commit)
	}

	// An unchanged branch costs a look, not a fetch.
	before := git.Pulls.Load()
	time.Sleep(5 * time.Second)
	if after := git.Pulls.Load(); after != before {
		t.Errorf("%d fetches of an unchanged branch in 5 s", after-before)
	}

	// A push event reaches a GitRepo that polls only hourly at once; a forged one
	// does nothing, and neither does one signed with the hub's secret for a GitRepo
	// with a webhookSecret of its own.
	git.Write("hooked/cm.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hooked\n"))
	git.Commit("a folder for the webhook")
	hub.MustKubectl("", "-n", "cattle-fleet-system", "create", "secret", "generic", "gitjob-webhook", "--from-literal=github="+webhookSecret)
	hub.MustKubectl("", "-n", workspace, "create", "secret", "generic", "hooked-webhook", "--from-literal=github="+ownSecret)
	hooked := strings.Replace(gitRepo("hooked", git.URL, "main", "git-auth", "hooked"), "pollingInterval: 2s", "pollingInterval: 1h\n  webhookSecret: hooked-webhook", 1)
	hub.MustKubectl(hooked, "apply", "-f", "-")
	if out, err := hub.Kubectl("", "-n", workspace, "wait", "--for=condition=Ready", "gitrepos.fleet.cattle.io/hooked", "--timeout=120s"); err != nil {
		t.Fatalf("GitRepo hooked not Ready: %v\n%s", err, out)
	}
	git.Write("hooked/cm2.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-a-webhook\n"))
	hookedCommit := git.Commit("a ConfigMap announced by a webhook")
	event := fmt.Sprintf(`{"ref":"refs/heads/main","after":%q,"repository":{"html_url":%q,"clone_url":%q}}`, hookedCommit, strings.TrimSuffix(git.URL, ".git"), git.URL)
	if status := postEvent(t, webhookURL, event, "forged"); status != http.StatusUnauthorized {
		t.Errorf("a forged event was answered %d", status)
	}
	if status := postEvent(t, webhookURL, event, webhookSecret); status != http.StatusOK {
		t.Errorf("an event signed with the hub's secret was answered %d", status)
	}
	time.Sleep(3 * time.Second)
	if out, _ := dev.Kubectl("", "get", "configmaps", "-A", "--field-selector", "metadata.name=from-a-webhook", "-o", "name"); out != "" {
		t.Fatalf("a forged event, or one not signed with the GitRepo's own secret, triggered a fetch: %s", out)
	}
	announced := time.Now()
	if status := postEvent(t, webhookURL, event, ownSecret); status != http.StatusOK {
		t.Fatalf("the push event was answered %d", status)
	}
	framework.Eventually(t, "the ConfigMap a webhook announced downstream", time.Minute, func(ctx context.Context) error {
		out, err := dev.Kubectl("", "get", "configmaps", "-A", "--field-selector", "metadata.name=from-a-webhook", "-o", "name")
		if err != nil || out == "" {
			return fmt.Errorf("not yet (%v)", err)
		}
		return nil
	})
	t.Logf("push event to the object downstream (polling hourly): %s", time.Since(announced).Round(100*time.Millisecond))

	// What goes wrong says why.
	hub.MustKubectl("", "-n", workspace, "create", "secret", "generic", "wrong-auth", "--type=kubernetes.io/basic-auth",
		"--from-literal=username="+gitUser, "--from-literal=password=wrong")
	hub.MustKubectl(gitRepo("wrong-password", git.URL, "main", "wrong-auth"), "apply", "-f", "-")
	hub.MustKubectl(gitRepo("no-branch", git.URL, "no-such-branch", "git-auth"), "apply", "-f", "-")
	hub.MustKubectl(gitRepo("escapes", git.URL, "main", "git-auth", "../.."), "apply", "-f", "-")
	hub.MustKubectl(gitRepo("local-file", "file:///etc", "main", ""), "apply", "-f", "-")
	git.Git(git.Work, "checkout", "-q", "-b", "broken")
	git.Write("broken/fleet.yaml", []byte("defaultNamespace: broken\nhelm: [this is not\n"))
	git.Write("broken/cm.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\n"))
	git.Commit("a broken fleet.yaml")
	hub.MustKubectl(gitRepo("broken", git.URL, "broken", "git-auth", "broken"), "apply", "-f", "-")
	// 8 MiB of zeros, a few KiB in the pack, against a 4 MiB bound.
	git.Git(git.Work, "checkout", "-q", "-b", "huge")
	git.Write("huge/zeros.bin", make([]byte, 2*maxSize))
	git.Write("huge/cm.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: huge\n"))
	git.Commit("more than --gitrepo-max-size")
	hub.MustKubectl(gitRepo("huge", git.URL, "huge", "git-auth", "huge"), "apply", "-f", "-")
	for name, want := range map[string]string{
		"wrong-password": "AuthFailed", "no-branch": "BranchNotFound", "escapes": "InvalidPath",
		"local-file": "InvalidURL", "broken": "InvalidBundle", "huge": "TooLarge",
	} {
		reason, message := accepted(t, hub, name, "False")
		t.Logf("%s: %s: %s", name, reason, message)
		if reason != want {
			t.Errorf("%s: reason %s, want %s (%s)", name, reason, want, message)
		}
		if name == "broken" && !strings.Contains(message, "fleet.yaml") {
			t.Errorf("broken: the message does not name the file: %s", message)
		}
	}

	// A GitRepo that fails is looked at again at its polling interval (2 s), not in a
	// loop set off by its own status writes.
	before = git.Refused.Load()
	time.Sleep(6 * time.Second)
	if tries := git.Refused.Load() - before; tries > 6 {
		t.Errorf("the wrong password was tried %d times in 6 s with a 2 s polling interval", tries)
	} else {
		t.Logf("the wrong password was tried %d times in 6 s", tries)
	}

	// bundles: one folder, one Bundle, read with the options file it names.
	git.Git(git.Work, "checkout", "-q", "-b", "driven", "main")
	git.Write("driven/fleet-dev.yaml", []byte("defaultNamespace: driven-dev\n"))
	git.Write("driven/cm.yaml", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: driven\n"))
	git.Commit("a folder with an options file")
	driven := gitRepo("driven", git.URL, "driven", "git-auth") + "  bundles:\n  - base: driven\n    options: fleet-dev.yaml\n"
	hub.MustKubectl(driven, "apply", "-f", "-")
	accepted(t, hub, "driven", "True")
	framework.Eventually(t, "the driven Bundle's ConfigMap in driven-dev on dev", 2*time.Minute, func(ctx context.Context) error {
		out, err := dev.Kubectl("", "-n", "driven-dev", "get", "configmap", "driven", "-o", "name")
		if err != nil || out == "" {
			return fmt.Errorf("not yet: %s (%v)", out, err)
		}
		return nil
	})
	if out := hub.MustKubectl("", "-n", workspace, "get", "bundles.fleet.cattle.io", "-l", "fleet.cattle.io/repo-name=driven",
		"-o", `jsonpath={range .items[*]}{.metadata.name} {range .spec.resources[*]}{.name} {end}{end}`); out != "driven-driven-fleet-dev cm.yaml " {
		t.Errorf("the driven GitRepo's Bundles (name, files): %q", out)
	}

	// Deleting the GitRepo deletes its Bundles, and their objects downstream.
	hub.MustKubectl("", "-n", workspace, "delete", "gitrepos.fleet.cattle.io", "examples")
	framework.Eventually(t, "the GitRepo's Bundles gone", 2*time.Minute, func(ctx context.Context) error {
		out, err := hub.Kubectl("", "-n", workspace, "get", "bundles.fleet.cattle.io", "-l", "fleet.cattle.io/repo-name=examples", "-o", "name")
		if err != nil || out != "" {
			return fmt.Errorf("Bundles: %q (%v)", out, err)
		}
		return nil
	})
	framework.Eventually(t, "the example's objects gone from dev", 2*time.Minute, func(ctx context.Context) error {
		if out := dev.MustKubectl("", "get", "deployments", "-A", "-o", "name"); strings.Contains(out, "frontend") {
			return fmt.Errorf("still: %s", out)
		}
		return nil
	})
}

// postEvent sends a GitHub push event signed with secret and returns the status.
func postEvent(t *testing.T, url, body, secret string) int {
	t.Helper()
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Close = true // no idle connection left taking a place at the hub
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A GitRepoRestriction decides which repositories and service accounts the
// GitRepos of its namespace may use, and says so in their status.
func TestGitRepoRestrictions(t *testing.T) {
	git := startGitServer(t)
	hub := framework.StartHub(t, "--gitrepo-allowed-networks=127.0.0.0/8")
	const ns = "team-a"
	gitAuthIn(t, hub, ns)
	hub.MustKubectl(fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: GitRepoRestriction
metadata:
  name: only-ours
  namespace: %s
allowedRepoPatterns:
- %s
defaultServiceAccount: deployer
allowedServiceAccounts: [deployer]
`, ns, regexp.QuoteMeta(git.URL)), "apply", "-f", "-")
	inNS := func(y string) string { return strings.Replace(y, "namespace: "+workspace, "namespace: "+ns, 1) }
	other := strings.Replace(git.URL, "/repo.git", "/other.git", 1)
	hub.MustKubectl(inNS(gitRepo("allowed", git.URL, "main", "git-auth", "single-cluster/manifests")), "apply", "-f", "-")
	hub.MustKubectl(inNS(gitRepo("other-repo", other, "main", "git-auth")), "apply", "-f", "-")
	hub.MustKubectl(inNS(gitRepo("as-admin", git.URL, "main", "git-auth"))+"  serviceAccount: admin\n", "apply", "-f", "-")

	if reason, message := acceptedIn(t, hub, ns, "allowed", "True"); reason != "" {
		t.Errorf("allowed: %s %s", reason, message)
	}
	if sa := hub.MustKubectl("", "-n", ns, "get", "bundles.fleet.cattle.io", "-l", "fleet.cattle.io/repo-name=allowed",
		"-o", "jsonpath={.items[*].spec.serviceAccount}"); sa == "" || strings.Trim(strings.ReplaceAll(sa, "deployer", ""), " ") != "" {
		t.Errorf("the allowed GitRepo's Bundles' service accounts: %q, want the default, deployer", sa)
	}
	for name, want := range map[string]string{"other-repo": "repo", "as-admin": `serviceAccount "admin"`} {
		reason, message := acceptedIn(t, hub, ns, name, "False")
		t.Logf("%s: %s: %s", name, reason, message)
		if reason != "Restricted" || !strings.Contains(message, want) {
			t.Errorf("%s: %s %s", name, reason, message)
		}
	}
	// Lifting the restriction lets the refused ones in, without waiting for a poll.
	hub.MustKubectl("", "-n", ns, "delete", "gitreporestrictions.fleet.cattle.io", "only-ours")
	if reason, message := acceptedIn(t, hub, ns, "as-admin", "True"); reason != "" {
		t.Errorf("as-admin once unrestricted: %s %s", reason, message)
	}
}

// A GitRepo reads an SSH repository with the key and known_hosts of its
// kubernetes.io/ssh-auth Secret, and refuses a server whose key it cannot check.
func TestAGitRepoOverSSH(t *testing.T) {
	git := startGitServer(t)
	key := gittest.NewKey(t)
	url, knownHosts := git.ServeSSH(key)
	hub := framework.StartHub(t, "--gitrepo-allowed-networks=127.0.0.0/8")
	dir := t.TempDir()
	for name, data := range map[string][]byte{"id": key.PrivatePEM, "known_hosts": knownHosts} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	hub.MustKubectl("apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+workspace+"\n", "apply", "-f", "-")
	hub.MustKubectl("", "-n", workspace, "create", "secret", "generic", "ssh-auth", "--type=kubernetes.io/ssh-auth",
		"--from-file=ssh-privatekey="+filepath.Join(dir, "id"), "--from-file=known_hosts="+filepath.Join(dir, "known_hosts"))
	hub.MustKubectl("", "-n", workspace, "create", "secret", "generic", "ssh-no-known-hosts", "--type=kubernetes.io/ssh-auth",
		"--from-file=ssh-privatekey="+filepath.Join(dir, "id"))
	hub.MustKubectl(gitRepo("over-ssh", url, "main", "ssh-auth", "single-cluster/manifests"), "apply", "-f", "-")
	hub.MustKubectl(gitRepo("unchecked-host", url, "main", "ssh-no-known-hosts", "single-cluster/manifests"), "apply", "-f", "-")

	if reason, message := accepted(t, hub, "over-ssh", "True"); reason != "" {
		t.Errorf("over-ssh: %s %s", reason, message)
	}
	if out := hub.MustKubectl("", "-n", workspace, "get", "bundles.fleet.cattle.io", "-l", "fleet.cattle.io/repo-name=over-ssh", "-o", "name"); !strings.Contains(out, "over-ssh-single-cluster-manifests") {
		t.Errorf("the Bundles of the SSH GitRepo: %q", out)
	}
	reason, message := accepted(t, hub, "unchecked-host", "False")
	t.Logf("unchecked-host: %s: %s", reason, message)
	if reason != "HostKeyNotTrusted" {
		t.Errorf("without known_hosts: %s %s", reason, message)
	}
}
