// Package webhook reads the push events Git servers send (GitHub, GitLab, Gitea,
// Bitbucket), verified with the shared secret of their provider, so that the hub
// fetches the matching GitRepos at once instead of at their next poll.
package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
)

// Providers, and the keys of their secrets in the webhook Secret (Fleet's
// gitjob-webhook Secret uses the same keys).
const (
	GitHub    = "github"
	GitLab    = "gitlab"
	Gitea     = "gitea"
	Bitbucket = "bitbucket"
)

// MaxBody bounds an event's body.
const MaxBody = 1 << 20

// Push is a verified push: the repository's URLs and the branch and commit pushed.
type Push struct {
	Provider string
	Repos    []string
	Branch   string
	Commit   string
}

// Error is an event refused, with the HTTP status to answer.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// ErrNotAPush is an event that is verified but not a push (a ping, a tag): nothing to do.
var ErrNotAPush = errors.New("not a push to a branch")

// Event is a request from a Git server, read but not verified yet.
type Event struct {
	Provider string
	Header   http.Header
	Body     []byte
}

// Read reads an event, bounded in size.
func Read(r *http.Request) (Event, error) {
	e, release, err := read(r, nil)
	release()
	return e, err
}

// read reads an event, its body bounded by MaxBody and held within memory (nil: no
// bound but MaxBody's); release gives the memory back once the event is done with.
// A body of a stated length takes that much; one of an unstated length, MaxBody.
func read(r *http.Request, memory *budget) (e Event, release func(), err error) {
	release = func() {}
	provider := providerOf(r.Header)
	if provider == "" {
		return Event{}, release, &Error{http.StatusBadRequest, "not an event of GitHub, GitLab, Gitea or Bitbucket (no event header)"}
	}
	if r.ContentLength > MaxBody {
		return Event{}, release, tooLarge
	}
	size := int64(MaxBody + 1)
	if r.ContentLength >= 0 {
		size = r.ContentLength
	}
	if !memory.take(size) {
		return Event{}, release, &Error{http.StatusServiceUnavailable, fmt.Sprintf("the hub is reading as many events as it holds at once (%d bytes); retry later", memory.max)}
	}
	release = func() { memory.give(size) }
	body := make([]byte, size)
	n, err := io.ReadFull(r.Body, body)
	var timeout net.Error
	switch {
	case errors.As(err, &timeout) && timeout.Timeout():
		return Event{}, release, &Error{http.StatusRequestTimeout, "the event was not sent in time"}
	case r.ContentLength < 0 && err == nil:
		return Event{}, release, tooLarge
	case err != nil && (r.ContentLength >= 0 || !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF)):
		return Event{}, release, &Error{http.StatusBadRequest, "reading the event: " + err.Error()}
	}
	return Event{Provider: provider, Header: r.Header, Body: body[:n]}, release, nil
}

var tooLarge = &Error{http.StatusRequestEntityTooLarge, fmt.Sprintf("the event is larger than %d bytes", MaxBody)}

// Verified says whether the event is signed with secret; never with an empty one.
func (e Event) Verified(secret []byte) bool {
	return len(secret) > 0 && verified(e.Provider, e.Header, e.Body, secret)
}

// Push is what the event says was pushed, or ErrNotAPush. Nothing it says is to be
// acted on before it is Verified.
func (e Event) Push() (Push, error) {
	if !isPush(e.Provider, e.Header) {
		return Push{}, ErrNotAPush
	}
	push, err := parseBody(e.Provider, e.Body)
	if err != nil {
		return Push{}, err
	}
	push.Provider = e.Provider
	return push, nil
}

// Unverified is the refusal of an event that no secret verifies.
func (e Event) Unverified() *Error {
	return &Error{http.StatusUnauthorized, fmt.Sprintf("the %s event's signature matches no secret set for it", e.Provider)}
}

// Parse reads a push event and verifies it with the secret of its provider in
// secrets.
func Parse(r *http.Request, secrets map[string][]byte) (Push, error) {
	e, err := Read(r)
	if err != nil {
		return Push{}, err
	}
	if !e.Verified(secrets[e.Provider]) {
		return Push{}, e.Unverified()
	}
	return e.Push()
}

func providerOf(h http.Header) string {
	switch {
	case h.Get("X-Gitea-Event") != "" || h.Get("X-Gogs-Event") != "":
		return Gitea
	case h.Get("X-GitHub-Event") != "":
		return GitHub
	case h.Get("X-Gitlab-Event") != "":
		return GitLab
	case h.Get("X-Event-Key") != "":
		return Bitbucket
	}
	return ""
}

func isPush(provider string, h http.Header) bool {
	switch provider {
	case GitHub:
		return h.Get("X-GitHub-Event") == "push"
	case GitLab:
		return h.Get("X-Gitlab-Event") == "Push Hook"
	case Gitea:
		return h.Get("X-Gitea-Event") == "push" || h.Get("X-Gogs-Event") == "push"
	case Bitbucket:
		return h.Get("X-Event-Key") == "repo:push"
	}
	return false
}

// verified checks the event's signature: an HMAC-SHA256 of the body (GitHub,
// Gitea, Bitbucket) or the token itself (GitLab), compared in constant time.
func verified(provider string, h http.Header, body, secret []byte) bool {
	if provider == GitLab {
		token := []byte(h.Get("X-Gitlab-Token"))
		return len(token) > 0 && subtle.ConstantTimeCompare(token, secret) == 1
	}
	var signature string
	switch provider {
	case GitHub, Bitbucket:
		signature = strings.TrimPrefix(h.Get("X-Hub-Signature-256"), "sha256=")
		if signature == "" {
			signature = strings.TrimPrefix(h.Get("X-Hub-Signature"), "sha256=")
		}
	case Gitea:
		signature = h.Get("X-Gitea-Signature")
		if signature == "" {
			signature = h.Get("X-Gogs-Signature")
		}
	}
	got, err := hex.DecodeString(signature)
	if err != nil || len(got) != sha256.Size {
		return false
	}
	mac := hmac.New(sha256.New, secret)
	mac.Write(body)
	return hmac.Equal(got, mac.Sum(nil))
}

func parseBody(provider string, body []byte) (Push, error) {
	bad := func(err error) error {
		return &Error{http.StatusBadRequest, fmt.Sprintf("the %s push event is not readable: %v", provider, err)}
	}
	switch provider {
	case GitHub, Gitea:
		var e struct {
			Ref        string `json:"ref"`
			After      string `json:"after"`
			Repository struct {
				HTMLURL  string `json:"html_url"`
				CloneURL string `json:"clone_url"`
				SSHURL   string `json:"ssh_url"`
			} `json:"repository"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			return Push{}, bad(err)
		}
		branch, ok := strings.CutPrefix(e.Ref, "refs/heads/")
		if !ok {
			return Push{}, ErrNotAPush
		}
		return Push{Repos: []string{e.Repository.HTMLURL, e.Repository.CloneURL, e.Repository.SSHURL}, Branch: branch, Commit: e.After}, nil
	case GitLab:
		var e struct {
			Ref         string `json:"ref"`
			CheckoutSHA string `json:"checkout_sha"`
			Project     struct {
				WebURL     string `json:"web_url"`
				GitHTTPURL string `json:"git_http_url"`
				GitSSHURL  string `json:"git_ssh_url"`
			} `json:"project"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			return Push{}, bad(err)
		}
		branch, ok := strings.CutPrefix(e.Ref, "refs/heads/")
		if !ok {
			return Push{}, ErrNotAPush
		}
		return Push{Repos: []string{e.Project.WebURL, e.Project.GitHTTPURL, e.Project.GitSSHURL}, Branch: branch, Commit: e.CheckoutSHA}, nil
	case Bitbucket:
		var e struct {
			Push struct {
				Changes []struct {
					New *struct {
						Type   string `json:"type"`
						Name   string `json:"name"`
						Target struct {
							Hash string `json:"hash"`
						} `json:"target"`
					} `json:"new"`
				} `json:"changes"`
			} `json:"push"`
			Repository struct {
				Links struct {
					HTML struct {
						Href string `json:"href"`
					} `json:"html"`
				} `json:"links"`
			} `json:"repository"`
		}
		if err := json.Unmarshal(body, &e); err != nil {
			return Push{}, bad(err)
		}
		for _, c := range e.Push.Changes {
			if c.New != nil && c.New.Type == "branch" {
				return Push{Repos: []string{e.Repository.Links.HTML.Href}, Branch: c.New.Name, Commit: c.New.Target.Hash}, nil
			}
		}
		return Push{}, ErrNotAPush
	}
	return Push{}, ErrNotAPush
}

// SameRepo says whether a GitRepo's repo URL names one of the push's repositories:
// scheme, credentials, a trailing ".git" or "/" and the host's case aside.
func SameRepo(repo string, push Push) bool {
	want := normalize(repo)
	if want == "" {
		return false
	}
	for _, r := range push.Repos {
		if normalize(r) == want {
			return true
		}
	}
	return false
}

// normalize reduces a repository URL (https, http, ssh:// or scp-like
// git@host:path) to host/path.
func normalize(raw string) string {
	raw = strings.TrimSpace(raw)
	if raw == "" {
		return ""
	}
	var host, path string
	if u, err := url.Parse(raw); err == nil && u.Host != "" {
		host, path = u.Hostname(), u.Path
	} else if at, rest, ok := strings.Cut(raw, "@"); ok && !strings.Contains(at, "/") {
		host, path, _ = strings.Cut(rest, ":")
	} else {
		return ""
	}
	path = strings.TrimSuffix(strings.TrimSuffix(strings.Trim(path, "/"), ".git"), "/")
	return strings.ToLower(host) + "/" + path
}
