package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

const githubPush = `{"ref":"refs/heads/main","after":"0123456789012345678901234567890123456789",
 "repository":{"html_url":"https://github.com/team/app","clone_url":"https://github.com/team/app.git","ssh_url":"git@github.com:team/app.git"}}`

func sign(secret, body string) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(body))
	return hex.EncodeToString(mac.Sum(nil))
}

func event(body string, headers map[string]string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/", strings.NewReader(body))
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	return r
}

func TestParseVerifiesEveryProvider(t *testing.T) {
	secrets := map[string][]byte{GitHub: []byte("gh"), GitLab: []byte("gl"), Gitea: []byte("gt"), Bitbucket: []byte("bb")}
	gitlabPush := `{"ref":"refs/heads/main","checkout_sha":"abc","project":{"web_url":"https://gitlab.com/team/app","git_http_url":"https://gitlab.com/team/app.git"}}`
	bitbucketPush := `{"push":{"changes":[{"new":{"type":"branch","name":"main","target":{"hash":"abc"}}}]},"repository":{"links":{"html":{"href":"https://bitbucket.org/team/app"}}}}`
	for _, tc := range []struct {
		name    string
		req     *http.Request
		status  int // 0: accepted
		branch  string
		provide string
	}{
		{"GitHub", event(githubPush, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sign("gh", githubPush)}), 0, "main", GitHub},
		{"GitHub with another secret", event(githubPush, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sign("other", githubPush)}), http.StatusUnauthorized, "", ""},
		{"GitHub unsigned", event(githubPush, map[string]string{"X-GitHub-Event": "push"}), http.StatusUnauthorized, "", ""},
		{"GitHub signed with GitLab's secret", event(githubPush, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sign("gl", githubPush)}), http.StatusUnauthorized, "", ""},
		{"GitLab", event(gitlabPush, map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "gl"}), 0, "main", GitLab},
		{"GitLab with a wrong token", event(gitlabPush, map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "g"}), http.StatusUnauthorized, "", ""},
		{"Gitea", event(githubPush, map[string]string{"X-Gitea-Event": "push", "X-Gitea-Signature": sign("gt", githubPush)}), 0, "main", Gitea},
		{"Bitbucket", event(bitbucketPush, map[string]string{"X-Event-Key": "repo:push", "X-Hub-Signature": "sha256=" + sign("bb", bitbucketPush)}), 0, "main", Bitbucket},
		{"no event header", event(githubPush, nil), http.StatusBadRequest, "", ""},
		{"too large", event(strings.Repeat(" ", MaxBody+1), map[string]string{"X-GitHub-Event": "push"}), http.StatusRequestEntityTooLarge, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			push, err := Parse(tc.req, secrets)
			var e *Error
			switch {
			case tc.status == 0 && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.status != 0 && (!errors.As(err, &e) || e.Status != tc.status):
				t.Fatalf("got %v, want status %d", err, tc.status)
			case tc.status == 0 && (push.Branch != tc.branch || push.Provider != tc.provide || len(push.Repos) == 0):
				t.Errorf("push %+v", push)
			}
		})
	}

	// A provider without a secret is refused even with a valid-looking event.
	_, err := Parse(event(githubPush, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sign("", githubPush)}), map[string][]byte{})
	var e *Error
	if !errors.As(err, &e) || e.Status != http.StatusUnauthorized {
		t.Errorf("no secret: %v", err)
	}
	// A verified ping, or a tag, is no push.
	ping := event(`{}`, map[string]string{"X-GitHub-Event": "ping", "X-Hub-Signature-256": "sha256=" + sign("gh", `{}`)})
	if _, err := Parse(ping, secrets); !errors.Is(err, ErrNotAPush) {
		t.Errorf("ping: %v", err)
	}
	tag := strings.Replace(githubPush, "refs/heads/main", "refs/tags/v1", 1)
	if _, err := Parse(event(tag, map[string]string{"X-GitHub-Event": "push", "X-Hub-Signature-256": "sha256=" + sign("gh", tag)}), secrets); !errors.Is(err, ErrNotAPush) {
		t.Errorf("tag: %v", err)
	}
}

func TestSameRepo(t *testing.T) {
	push := Push{Repos: []string{"https://github.com/team/app", "https://github.com/team/app.git", "git@github.com:team/app.git"}}
	for _, tc := range []struct {
		repo string
		want bool
	}{
		{"https://github.com/team/app", true},
		{"https://GitHub.com/team/app.git/", true},
		{"http://github.com/team/app", true},
		{"https://github.com/team/app-other", false},
		{"https://github.com/other/app", false},
		{"https://gitlab.com/team/app", false},
		{"", false},
	} {
		t.Run(tc.repo, func(t *testing.T) {
			if got := SameRepo(tc.repo, push); got != tc.want {
				t.Errorf("SameRepo(%q) = %v", tc.repo, got)
			}
		})
	}
}
