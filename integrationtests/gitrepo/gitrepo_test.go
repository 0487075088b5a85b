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
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/internal/freeport"
)

const (
	webhookSecret = "hook-s3cret"
	gitUser       = "git"
	gitPassword   = "s3cret"
	workspace     = "fleet-default"
)

// gitServer is a bare repository served over HTTP with basic auth, and a clone of
// it that tests commit to and push from.
type gitServer struct {
	t       *testing.T
	URL     string // of the repository
	work    string
	pulls   atomic.Int64
	refused atomic.Int64
}

func startGitServer(t *testing.T) *gitServer {
	t.Helper()
	root := t.TempDir()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on this machine")
	}
	s := &gitServer{t: t, work: filepath.Join(root, "work")}
	s.git(root, "init", "--bare", "--initial-branch=main", "examples.git")
	s.git(filepath.Join(root, "examples.git"), "config", "http.receivepack", "false")
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, password, ok := r.BasicAuth(); !ok || user != gitUser || password != gitPassword {
			s.refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			s.pulls.Add(1)
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	s.URL = server.URL + "/examples.git"

	// The working copy: fleet-examples' manifests example, as Fleet users keep it.
	s.git(root, "clone", filepath.Join(root, "examples.git"), "work")
	s.git(s.work, "config", "user.email", "test@example.com")
	s.git(s.work, "config", "user.name", "test")
	src := filepath.Join(framework.RepoRoot(t), "integrationtests", "conformance", "testdata", "fleet-examples", "single-cluster", "manifests")
	copyDir(t, src, filepath.Join(s.work, "single-cluster", "manifests"))
	s.commit("fleet-examples single-cluster/manifests")
	return s
}

func (s *gitServer) git(dir string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit commits everything in the working copy and pushes it; it returns the commit.
func (s *gitServer) commit(message string) string {
	s.t.Helper()
	s.git(s.work, "add", "-A")
	s.git(s.work, "commit", "-q", "-m", message)
	s.git(s.work, "push", "-q", "origin", "HEAD")
	return s.git(s.work, "rev-parse", "HEAD")
}

func (s *gitServer) write(path, content string) {
	s.t.Helper()
	full := filepath.Join(s.work, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
		s.t.Fatal(err)
	}
}

func copyDir(t *testing.T, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), data, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
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
	var reason, message string
	framework.Eventually(t, name+" Accepted="+status, time.Minute, func(ctx context.Context) error {
		out, err := hub.Kubectl("", "-n", workspace, "get", "gitrepos.fleet.cattle.io", name, "-o",
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
	hub := framework.StartHub(t, "--gitrepo-allowed-networks=127.0.0.0/8", fmt.Sprintf("--webhook-bind-address=127.0.0.1:%d", webhookPort))
	clusters := framework.RegisterSimulatedClusters(t, hub, workspace, map[string]string{"dev": "dev", "prod": "prod"})
	var dev, prod *framework.Downstream
	for _, c := range clusters {
		if c.Name == "dev" {
			dev = c
		} else {
			prod = c
		}
	}
	hub.MustKubectl("", "-n", workspace, "create", "secret", "generic", "git-auth", "--type=kubernetes.io/basic-auth",
		"--from-literal=username="+gitUser, "--from-literal=password="+gitPassword)

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
	git.write("single-cluster/manifests/extra/configmap.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-a-push\ndata:\n  pushed: \"yes\"\n")
	pushed := time.Now()
	commit := git.commit("a ConfigMap")
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
	before := git.pulls.Load()
	time.Sleep(5 * time.Second)
	if after := git.pulls.Load(); after != before {
		t.Errorf("%d fetches of an unchanged branch in 5 s", after-before)
	}

	// A push event reaches a GitRepo that polls only hourly at once; a forged one
	// does nothing.
	git.write("hooked/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hooked\n")
	git.commit("a folder for the webhook")
	hub.MustKubectl("", "-n", "cattle-fleet-system", "create", "secret", "generic", "gitjob-webhook", "--from-literal=github="+webhookSecret)
	hooked := strings.Replace(gitRepo("hooked", git.URL, "main", "git-auth", "hooked"), "pollingInterval: 2s", "pollingInterval: 1h", 1)
	hub.MustKubectl(hooked, "apply", "-f", "-")
	if out, err := hub.Kubectl("", "-n", workspace, "wait", "--for=condition=Ready", "gitrepos.fleet.cattle.io/hooked", "--timeout=120s"); err != nil {
		t.Fatalf("GitRepo hooked not Ready: %v\n%s", err, out)
	}
	git.write("hooked/cm2.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: from-a-webhook\n")
	hookedCommit := git.commit("a ConfigMap announced by a webhook")
	event := fmt.Sprintf(`{"ref":"refs/heads/main","after":%q,"repository":{"html_url":%q,"clone_url":%q}}`, hookedCommit, strings.TrimSuffix(git.URL, ".git"), git.URL)
	if status := postEvent(t, webhookURL, event, "forged"); status != http.StatusUnauthorized {
		t.Errorf("a forged event was answered %d", status)
	}
	time.Sleep(3 * time.Second)
	if out, _ := dev.Kubectl("", "get", "configmaps", "-A", "--field-selector", "metadata.name=from-a-webhook", "-o", "name"); out != "" {
		t.Fatalf("a forged event triggered a fetch: %s", out)
	}
	announced := time.Now()
	if status := postEvent(t, webhookURL, event, webhookSecret); status != http.StatusOK {
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
	git.git(git.work, "checkout", "-q", "-b", "broken")
	git.write("broken/fleet.yaml", "defaultNamespace: broken\nhelm: [this is not\n")
	git.write("broken/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: broken\n")
	git.commit("a broken fleet.yaml")
	hub.MustKubectl(gitRepo("broken", git.URL, "broken", "git-auth", "broken"), "apply", "-f", "-")
	for name, want := range map[string]string{
		"wrong-password": "AuthFailed", "no-branch": "BranchNotFound", "escapes": "InvalidPath",
		"local-file": "InvalidURL", "broken": "InvalidBundle",
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
	before = git.refused.Load()
	time.Sleep(6 * time.Second)
	if tries := git.refused.Load() - before; tries > 6 {
		t.Errorf("the wrong password was tried %d times in 6 s with a 2 s polling interval", tries)
	} else {
		t.Logf("the wrong password was tried %d times in 6 s", tries)
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
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
