// Package gittest starts Git servers for tests: the real `git http-backend` behind
// an HTTP server of the test's own, with basic auth, serving a bare repository, and
// a working copy of it that tests write, commit and push from.
package gittest

import (
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

// Server is a bare repository served over HTTP, and a working copy of it.
type Server struct {
	t *testing.T
	// URL is the repository's.
	URL string
	// Work is the working copy; Bare the served repository.
	Work, Bare string
	// Pulls counts fetches of packs (git-upload-pack POSTs); Looks, requests for
	// the refs (what ls-remote and the start of a fetch ask); Refused, requests
	// without the right credentials.
	Pulls, Looks, Refused atomic.Int64
}

// Start serves a new repository with branch main; user and password, if set, are
// required of every request.
func Start(t *testing.T, user, password string) *Server {
	t.Helper()
	gitPath, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git on this machine")
	}
	root := t.TempDir()
	s := &Server{t: t, Work: filepath.Join(root, "work"), Bare: filepath.Join(root, "repo.git")}
	s.Git(root, "init", "-q", "--bare", "--initial-branch=main", "repo.git")
	s.Git(s.Bare, "config", "http.receivepack", "false")
	backend := &cgi.Handler{Path: gitPath, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	server := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); user+password != "" && (!ok || u != user || p != password) {
			s.Refused.Add(1)
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/git-upload-pack") {
			s.Pulls.Add(1)
		}
		if strings.HasSuffix(r.URL.Path, "/info/refs") {
			s.Looks.Add(1)
		}
		backend.ServeHTTP(w, r)
	}))
	t.Cleanup(server.Close)
	s.URL = server.URL + "/repo.git"
	s.Git(root, "clone", "-q", s.Bare, "work")
	s.Git(s.Work, "config", "user.email", "test@example.com")
	s.Git(s.Work, "config", "user.name", "test")
	return s
}

// Git runs git in dir and returns its output.
func (s *Server) Git(dir string, args ...string) string {
	s.t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		s.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// Commit commits everything in the working copy and pushes it; it returns the commit.
func (s *Server) Commit(message string) string {
	s.t.Helper()
	s.Git(s.Work, "add", "-A")
	s.Git(s.Work, "commit", "-q", "-m", message)
	s.Git(s.Work, "push", "-q", "origin", "HEAD")
	return s.Git(s.Work, "rev-parse", "HEAD")
}

// Write writes a file of the working copy.
func (s *Server) Write(path string, content []byte) {
	s.t.Helper()
	full := filepath.Join(s.Work, path)
	if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
		s.t.Fatal(err)
	}
	if err := os.WriteFile(full, content, 0o644); err != nil {
		s.t.Fatal(err)
	}
}

// CopyDir copies the folder from into the working copy at to.
func (s *Server) CopyDir(from, to string) {
	s.t.Helper()
	err := filepath.WalkDir(from, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, path)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(s.Work, to, rel), 0o755)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(s.Work, to, rel), data, 0o644)
	})
	if err != nil {
		s.t.Fatal(err)
	}
}
