// Package gitfetch reads Git repositories for GitRepos, in the hub's process, with
// go-git: the commit a branch or tag stands at (one small request, ls-remote), and a
// shallow checkout of a commit into a folder. Repositories are outside input: only
// http(s) URLs are taken (no local paths or file://), every connection goes through
// the hub's address policy, and a checkout is bounded in size.
package gitfetch

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	"github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/storage/memory"

	"github.com/flotilla/flotilla/pkg/kubeconfig"
)

// Source is where a GitRepo's files come from.
type Source struct {
	// URL is the repository, http:// or https://.
	URL string
	// Branch is followed unless Revision is set; default "master".
	Branch string
	// Revision is a commit or a tag.
	Revision string
	// Username and Password authenticate over HTTP (basic auth), if set.
	Username, Password string
	// SSHPrivateKey authenticates over SSH; KnownHosts are the server keys
	// trusted (required for SSH).
	SSHPrivateKey, KnownHosts []byte
	// CABundle is the PEM CA of the server; InsecureSkipTLS skips the check.
	CABundle        []byte
	InsecureSkipTLS bool
}

// Reasons a fetch fails, for conditions.
const (
	ReasonAuthFailed         = "AuthFailed"
	ReasonBranchNotFound     = "BranchNotFound"
	ReasonRevisionNotFound   = "RevisionNotFound"
	ReasonRepositoryNotFound = "RepositoryNotFound"
	ReasonInvalidURL         = "InvalidURL"
	ReasonAddressRefused     = "AddressRefused"
	ReasonTooLarge           = "TooLarge"
	ReasonTimedOut           = "TimedOut"
	ReasonFetchFailed        = "FetchFailed"
	ReasonHostKeyNotTrusted  = "HostKeyNotTrusted"
)

// Error is a failed fetch with the reason a condition shows.
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string { return e.Err.Error() }
func (e *Error) Unwrap() error { return e.Err }

// ReasonOf is the reason of err for a condition.
func ReasonOf(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonFetchFailed
}

// Install makes go-git's http and https transports connect only where policy
// allows, with timeouts. The hub calls it once, before fetching.
func Install(policy *kubeconfig.AddressPolicy) {
	policyInstalled.Store(policy)
	tr := policy.Transport()
	c := githttp.NewClient(&http.Client{Transport: budgetTransport{tr}})
	client.InstallProtocol("https", c)
	client.InstallProtocol("http", c)
	installSSH()
	installed.Store(&http.Client{Transport: tr, Timeout: 5 * time.Minute})
}

var (
	installed       atomic.Pointer[http.Client]
	policyInstalled atomic.Pointer[kubeconfig.AddressPolicy]
)

// Policy is the address policy Install was given, for worker processes.
func Policy() kubeconfig.AddressPolicy {
	if p := policyInstalled.Load(); p != nil {
		return *p
	}
	return kubeconfig.AddressPolicy{}
}

// HTTPClient is a client under the policy Install was given, for what a GitRepo's
// folders download (charts); nil before Install.
func HTTPClient() *http.Client { return installed.Load() }

var fullCommit = regexp.MustCompile(`^[0-9a-f]{40}$`)

// CheckURL refuses what is not a repository on a host over http(s) or SSH (ssh://
// or user@host:path): local paths, file://, ext:: and URLs with credentials in them.
func CheckURL(raw string) error {
	if isSSH(raw) {
		ep, err := transport.NewEndpoint(raw)
		if err != nil {
			return &Error{ReasonInvalidURL, fmt.Errorf("repo %q is not a URL: %w", raw, err)}
		}
		if ep.Host == "" || strings.HasPrefix(ep.Host, "-") {
			return &Error{ReasonInvalidURL, fmt.Errorf("repo %q has no host", raw)}
		}
		if ep.Password != "" {
			return &Error{ReasonInvalidURL, fmt.Errorf("repo %q holds a password: put a key in the Secret clientSecretName names", raw)}
		}
		return checkPath(raw, ep.Path)
	}
	u, err := url.Parse(raw)
	if err != nil {
		return &Error{ReasonInvalidURL, fmt.Errorf("repo %q is not a URL: %w", raw, err)}
	}
	if u.Scheme != "https" && u.Scheme != "http" {
		return &Error{ReasonInvalidURL, fmt.Errorf("repo %q: only https://, http:// and SSH repositories are supported", raw)}
	}
	if u.Host == "" {
		return &Error{ReasonInvalidURL, fmt.Errorf("repo %q has no host", raw)}
	}
	if u.User != nil {
		return &Error{ReasonInvalidURL, fmt.Errorf("repo %q holds a credential: put it in the Secret clientSecretName names", u.Redacted())}
	}
	// What GitRepoRestrictions match is what is fetched: no query or fragment.
	if u.RawQuery != "" || u.Fragment != "" || u.Opaque != "" {
		return &Error{ReasonInvalidURL, fmt.Errorf("repo %q: a repository URL has no query or fragment", raw)}
	}
	return checkPath(raw, u.EscapedPath())
}

// checkPath refuses dot segments, escaped or not, which servers resolve: so
// team-a/../team-b would pass a restriction's pattern for team-a.
func checkPath(raw, path string) error {
	for _, seg := range strings.Split(path, "/") {
		if s, err := url.PathUnescape(seg); err != nil || s == "." || s == ".." || strings.Contains(s, "/") {
			return &Error{ReasonInvalidURL, fmt.Errorf("repo %q: the path may not hold . or .. segments or escaped slashes", raw)}
		}
	}
	return nil
}

func (s Source) branch() string {
	if s.Branch == "" {
		return "master"
	}
	return s.Branch
}

// access is how s is reached: its credential, and for SSH the policy dialer that
// counts against b, until release; dir holds what SSH needs on disk (known_hosts).
func (s Source) access(ctx context.Context, dir string, b *budget) (auth transport.AuthMethod, opts transport.ProxyOptions, release func(), err error) {
	release = func() {}
	if isSSH(s.URL) {
		ep, err := transport.NewEndpoint(s.URL)
		if err != nil {
			return nil, opts, release, &Error{ReasonInvalidURL, err}
		}
		keys, err := sshAuth(s, ep.User, dir)
		if err != nil {
			return nil, opts, release, err
		}
		opts, release = sshProxy(ctx, b)
		return keys, opts, release, nil
	}
	if s.Username == "" && s.Password == "" {
		return nil, opts, release, nil
	}
	return &githttp.BasicAuth{Username: s.Username, Password: s.Password}, opts, release, nil
}

// MaxRefs bounds the answer to a look at a branch: the refs run in the hub's
// process, not in a worker.
const MaxRefs = 8 << 20

// Head is the commit the source stands at: its branch's, or its revision's. The
// server's answer may take at most min(maxBytes, MaxRefs).
func Head(ctx context.Context, s Source, maxBytes int64) (string, error) {
	maxBytes = min(maxBytes, MaxRefs)
	if err := CheckURL(s.URL); err != nil {
		return "", err
	}
	if fullCommit.MatchString(s.Revision) {
		return s.Revision, nil
	}
	ctx, budget := withBudget(ctx, maxBytes)
	// A folder for known_hosts, for SSH only: a look runs every polling interval.
	var tmp string
	if isSSH(s.URL) {
		var err error
		if tmp, err = os.MkdirTemp("", "flotilla-head-"); err != nil {
			return "", err
		}
		defer os.RemoveAll(tmp)
	}
	auth, proxyOpts, release, err := s.access(ctx, tmp, budget)
	if err != nil {
		return "", err
	}
	defer release()
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: "origin", URLs: []string{s.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{Auth: auth, CABundle: s.CABundle, InsecureSkipTLS: s.InsecureSkipTLS,
		PeelingOption: git.AppendPeeled, ProxyOptions: proxyOpts})
	if budget.exceeded() {
		return "", budget.err()
	}
	if err != nil {
		return "", classify(ctx, s, err)
	}
	want, reason := plumbing.NewBranchReferenceName(s.branch()), ReasonBranchNotFound
	if s.Revision != "" {
		want, reason = plumbing.NewTagReferenceName(s.Revision), ReasonRevisionNotFound
	}
	var commit string
	for _, ref := range refs {
		switch ref.Name() {
		case want:
			if commit == "" {
				commit = ref.Hash().String()
			}
		case want + "^{}": // an annotated tag, peeled to its commit
			commit = ref.Hash().String()
		}
	}
	if commit == "" {
		if s.Revision != "" {
			return "", &Error{reason, fmt.Errorf("revision %q not found in %s (a tag, or a full commit hash)", s.Revision, s.URL)}
		}
		return "", &Error{reason, fmt.Errorf("branch %q not found in %s", s.branch(), s.URL)}
	}
	return commit, nil
}

// Checkout writes the files of commit into dir, which must not exist, fetching as
// little history as it can. It fails, before writing the files out, if the download
// or the files would take more than maxBytes. The memory it takes is not bounded
// here: the hub runs it in a child process with a memory limit (Run).
func Checkout(ctx context.Context, s Source, commit, dir string, maxBytes int64) error {
	if err := CheckURL(s.URL); err != nil {
		return err
	}
	ctx, budget := withBudget(ctx, maxBytes)
	tmp, err := os.MkdirTemp(filepath.Dir(dir), "flotilla-ssh-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	auth, proxyOpts, release, err := s.access(ctx, tmp, budget)
	if err != nil {
		return err
	}
	defer release()
	opts := &git.CloneOptions{URL: s.URL, Auth: auth, CABundle: s.CABundle, InsecureSkipTLS: s.InsecureSkipTLS,
		Tags: git.NoTags, NoCheckout: true, ProxyOptions: proxyOpts}
	shallow := true
	switch {
	case s.Revision == "":
		opts.ReferenceName, opts.SingleBranch, opts.Depth = plumbing.NewBranchReferenceName(s.branch()), true, 1
	case !fullCommit.MatchString(s.Revision):
		opts.ReferenceName, opts.SingleBranch, opts.Depth = plumbing.NewTagReferenceName(s.Revision), true, 1
	default:
		// A commit by hash: servers do not all serve one commit, so the history.
		shallow = false
	}
	repo, err := git.PlainCloneContext(ctx, dir, false, opts)
	if budget.exceeded() {
		return budget.err()
	}
	if err != nil {
		return classify(ctx, s, err)
	}
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	hash := plumbing.NewHash(commit)
	if err := checkTree(repo, hash, maxBytes); err != nil {
		if shallow && errors.Is(err, plumbing.ErrObjectNotFound) {
			return &Error{ReasonFetchFailed, fmt.Errorf("checking out %s of %s: %w (the branch moved while fetching; it is fetched again)", commit, s.URL, err)}
		}
		return err
	}
	if err := wt.Checkout(&git.CheckoutOptions{Hash: hash, Force: true}); err != nil {
		if shallow {
			return &Error{ReasonFetchFailed, fmt.Errorf("checking out %s of %s: %w (the branch moved while fetching; it is fetched again)", commit, s.URL, err)}
		}
		return &Error{ReasonRevisionNotFound, fmt.Errorf("commit %s not found in %s: %w", commit, s.URL, err)}
	}
	// The repository's metadata is not part of any Bundle.
	if err := os.RemoveAll(filepath.Join(dir, ".git")); err != nil {
		return err
	}
	return checkSize(dir, maxBytes)
}

// checkSize fails when the files under dir take more than maxBytes.
func checkSize(dir string, maxBytes int64) error {
	var total int64
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			info, err := d.Info()
			if err != nil {
				return err
			}
			total += info.Size()
			if total > maxBytes {
				return &Error{ReasonTooLarge, fmt.Errorf("the checkout takes more than %d bytes (--gitrepo-max-size)", maxBytes)}
			}
		}
		return nil
	})
}

// classify turns a go-git error into one with a reason a user can act on.
func classify(ctx context.Context, s Source, err error) error {
	var refused *kubeconfig.AddressError
	switch {
	case errors.As(err, &refused):
		return &Error{ReasonAddressRefused, err}
	case strings.Contains(err.Error(), "knownhosts:"):
		return &Error{ReasonHostKeyNotTrusted, fmt.Errorf("%s: the server's key is not in the known_hosts of clientSecretName: %w", s.URL, err)}
	case strings.Contains(err.Error(), "ssh: unable to authenticate") || strings.Contains(err.Error(), "ssh: handshake failed"):
		return &Error{ReasonAuthFailed, fmt.Errorf("%s: the key of clientSecretName was refused: %w", s.URL, err)}
	case ctx.Err() != nil || errors.Is(err, context.DeadlineExceeded):
		return &Error{ReasonTimedOut, fmt.Errorf("fetching %s took too long: %w", s.URL, err)}
	case errors.Is(err, transport.ErrAuthenticationRequired), errors.Is(err, transport.ErrAuthorizationFailed):
		what := "no credential was given (clientSecretName)"
		if s.Username != "" || s.Password != "" {
			what = "the credential of clientSecretName was refused"
		}
		return &Error{ReasonAuthFailed, fmt.Errorf("%s: %s: %w", s.URL, what, err)}
	case errors.Is(err, transport.ErrRepositoryNotFound):
		return &Error{ReasonRepositoryNotFound, fmt.Errorf("%s: repository not found: %w", s.URL, err)}
	case errors.Is(err, plumbing.ErrReferenceNotFound) || strings.Contains(err.Error(), "couldn't find remote ref"):
		return &Error{ReasonBranchNotFound, fmt.Errorf("branch %q not found in %s", s.branch(), s.URL)}
	}
	return &Error{ReasonFetchFailed, fmt.Errorf("fetching %s: %w", s.URL, err)}
}
