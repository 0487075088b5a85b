// Package gitrepo turns GitRepos into Bundles: it looks at the repository's branch
// (one small ls-remote request per polling interval), and when the commit, the spec
// or forceSyncGeneration changed, it checks the commit out into a temporary folder,
// reads its paths as `hub apply` does, and writes the Bundles, owned by the GitRepo
// so that they go with it. Fetches run in the controller's bounded workers, each
// within a time limit, so one slow or huge repository does not stall the others.
package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/record"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlereader"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/gitfetch"
	"github.com/flotilla/flotilla/pkg/hubctl"
)

// ConditionAccepted is True when the last fetch and read of a GitRepo worked, and
// False with the reason they did not.
const ConditionAccepted = "Accepted"

// Reasons of Accepted=False besides gitfetch's.
const (
	ReasonSecretNotFound = "SecretNotFound"
	ReasonInvalidPath    = "InvalidPath"
	ReasonInvalidBundle  = "InvalidBundle"
	ReasonWriteFailed    = "WriteFailed"
)

// Settings bound and pace the fetches.
type Settings struct {
	// PollingInterval is how often a branch is looked at when its GitRepo does not say.
	PollingInterval time.Duration
	// FetchTimeout bounds one look or checkout.
	FetchTimeout time.Duration
	// MaxCheckoutSize bounds the download, and the files, of one checkout, in bytes.
	MaxCheckoutSize int64
	// FetchMemory bounds the memory of one checkout's worker process, in bytes.
	FetchMemory int64
	// ConcurrentFetches bounds the checkouts running at once; looks at a branch
	// get four times as many slots. Workspaces share both fairly (slots).
	ConcurrentFetches int
	// Worker is the executable whose gitfetch.WorkerCommand runs a checkout;
	// default this process's own.
	Worker string
	// MaxBundleSize bounds one Bundle's files.
	MaxBundleSize int64
	// MaxSyncSize bounds what all the Bundles of one commit take together, so
	// that ConcurrentFetches syncs hold at most ConcurrentFetches times it.
	MaxSyncSize int64
}

// DefaultMaxSyncSize is --gitrepo-max-sync-size's default.
const DefaultMaxSyncSize = 128 << 20

// DefaultPollingInterval is Fleet's.
const DefaultPollingInterval = 15 * time.Second

type handler struct {
	settings Settings
	repos    fleetcontrollers.GitRepoController
	bundles  fleetcontrollers.BundleCache
	restrict fleetcontrollers.GitRepoRestrictionCache
	secrets  corecontrollers.SecretCache
	client   versioned.Interface
	events   record.EventRecorder
	// ctx ends the syncs under way when the hub stops.
	ctx context.Context
	// looks and checkouts are the slots of looks at a branch and of checkouts.
	looks, checkouts *slots

	mu sync.Mutex
	// polled is each GitRepo's last look at its repository.
	polled map[string]Attempt
	// running holds the GitRepos whose sync is under way; done the outcome of those
	// finished, for their next reconcile to put into the status.
	running map[string]bool
	done    map[string]synced
}

// synced is the outcome of a sync: the commit deployed, or why not.
type synced struct {
	gr     *fleet.GitRepo
	commit string
	err    error
}

// Attempt is a look at a GitRepo's repository: when, for which spec, under which
// GitRepoRestrictions (restrictionKey).
type Attempt struct {
	At                              time.Time
	Generation, ForceSyncGeneration int64
	Restrictions                    string
}

// MinPollingInterval is the shortest polling interval a GitRepo gets.
const MinPollingInterval = time.Second

// maxMessage bounds a failure's message in the status and events.
const maxMessage = 1024

// Register starts turning GitRepos into Bundles.
func Register(ctx context.Context, settings Settings, repos fleetcontrollers.GitRepoController, bundles fleetcontrollers.BundleController,
	restrictions fleetcontrollers.GitRepoRestrictionController, secrets corecontrollers.SecretCache, client versioned.Interface,
	events record.EventRecorder) error {
	if settings.PollingInterval <= 0 {
		settings.PollingInterval = DefaultPollingInterval
	}
	if settings.FetchTimeout <= 0 {
		settings.FetchTimeout = 2 * time.Minute
	}
	if settings.MaxCheckoutSize <= 0 {
		settings.MaxCheckoutSize = 256 << 20
	}
	if settings.MaxSyncSize <= 0 {
		settings.MaxSyncSize = DefaultMaxSyncSize
	}
	if settings.FetchMemory <= 0 {
		settings.FetchMemory = 512 << 20
	}
	if settings.ConcurrentFetches <= 0 {
		settings.ConcurrentFetches = 4
	}
	if settings.Worker == "" {
		exe, err := os.Executable()
		if err != nil {
			return fmt.Errorf("finding the hub's executable for its fetch workers: %w", err)
		}
		settings.Worker = exe
	}
	h := &handler{settings: settings, repos: repos, bundles: bundles.Cache(), restrict: restrictions.Cache(), secrets: secrets, client: client, events: events,
		ctx: ctx, looks: newSlots(4 * settings.ConcurrentFetches), checkouts: newSlots(settings.ConcurrentFetches),
		polled: map[string]Attempt{}, running: map[string]bool{}, done: map[string]synced{}}
	repos.OnChange(ctx, "gitrepo", h.onChange)
	// A Bundle's state changes the summary of its GitRepo.
	bundles.OnChange(ctx, "gitrepo-bundles", func(_ string, b *fleet.Bundle) (*fleet.Bundle, error) {
		if b != nil && b.Labels[hubctl.RepoLabel] != "" {
			repos.EnqueueAfter(b.Namespace, b.Labels[hubctl.RepoLabel], 2*time.Second)
		}
		return b, nil
	})
	// A restriction changes what every GitRepo of its namespace may do.
	restrictions.OnChange(ctx, "gitrepo-restrictions", func(key string, r *fleet.GitRepoRestriction) (*fleet.GitRepoRestriction, error) {
		namespace, _, _ := strings.Cut(key, "/")
		list, err := repos.Cache().List(namespace, labels.Everything())
		if err != nil {
			return r, err
		}
		for _, gr := range list {
			repos.Enqueue(gr.Namespace, gr.Name)
		}
		return r, nil
	})
	return nil
}

// Poll says whether a GitRepo's repository is to be looked at now, given the last
// look: at once for a spec (or forceSyncGeneration, or GitRepoRestrictions) not
// looked at yet, or a push
// event since the last look that named a commit not deployed; otherwise once the
// polling interval has passed since the last look, when polling is on or the last
// look failed. A failure is never retried sooner, whatever writes the GitRepo.
func Poll(gr *fleet.GitRepo, last Attempt, restrictions string, now time.Time, interval time.Duration) bool {
	if last.At.IsZero() || last.Generation != gr.Generation || last.ForceSyncGeneration != gr.Spec.ForceSyncGeneration ||
		last.Restrictions != restrictions {
		return true
	}
	if PushPending(gr, last) && now.Sub(last.At) >= MinPollingInterval {
		return true
	}
	failed := true
	if c := conditions.Get(gr.Status.Conditions, ConditionAccepted); c != nil && c.Status == corev1.ConditionTrue {
		failed = false
	}
	if gr.Spec.DisablePolling && !failed {
		return false
	}
	return !now.Before(last.At.Add(interval))
}

// PushPending says whether a push event since the last look named a commit not
// deployed. Event times have seconds only: an event in the second of the last look
// counts.
func PushPending(gr *fleet.GitRepo, last Attempt) bool {
	return gr.Status.WebhookCommit != "" && gr.Status.WebhookCommit != gr.Status.Commit &&
		!gr.Status.LastWebhookTime.Time.Before(last.At.Truncate(time.Second))
}

func (h *handler) interval(gr *fleet.GitRepo) time.Duration {
	interval := h.settings.PollingInterval
	if gr.Spec.PollingInterval != nil && gr.Spec.PollingInterval.Duration > 0 {
		interval = gr.Spec.PollingInterval.Duration
	}
	return max(interval, MinPollingInterval)
}

func (h *handler) onChange(key string, gr *fleet.GitRepo) (*fleet.GitRepo, error) {
	if gr == nil {
		h.mu.Lock()
		delete(h.polled, key)
		delete(h.done, key)
		h.mu.Unlock()
		return nil, nil // its Bundles are its dependents: the garbage collector deletes them
	}
	if gr.DeletionTimestamp != nil {
		return gr, nil
	}
	status := gr.Status.DeepCopy()
	interval := h.interval(gr)
	h.mu.Lock()
	last := h.polled[key]
	h.mu.Unlock()
	restrictions, err := h.restrict.List(gr.Namespace, labels.Everything())
	if err != nil {
		return gr, err
	}
	restrictedBy := restrictionKey(restrictions)
	now := time.Now()
	polled := Poll(gr, last, restrictedBy, now, interval)
	if !polled && PushPending(gr, last) {
		// Too soon after the last look: the push is acted on once the minimum
		// interval has passed, polling or not.
		h.repos.EnqueueAfter(gr.Namespace, gr.Name, MinPollingInterval)
	}
	h.mu.Lock()
	finished, isFinished := h.done[key]
	delete(h.done, key)
	h.mu.Unlock()
	if isFinished {
		h.record(finished, status)
	}
	// New restrictions may change what the Bundles are written with.
	if polled && h.start(key, gr, restrictions, !last.At.IsZero() && last.Restrictions != restrictedBy) {
		h.mu.Lock()
		h.polled[key] = Attempt{At: now, Generation: gr.Generation, ForceSyncGeneration: gr.Spec.ForceSyncGeneration, Restrictions: restrictedBy}
		h.mu.Unlock()
		// Seconds, as the API keeps them: a look that changes nothing writes nothing.
		status.LastPollingTime = metav1.NewTime(now.Truncate(time.Second))
	}
	h.summarize(gr, status)
	if !equality.Semantic.DeepEqual(*status, gr.Status) {
		updated := gr.DeepCopy()
		updated.Status = *status
		written, err := h.repos.UpdateStatus(updated)
		if err != nil {
			return gr, err
		}
		gr = written
	}
	if c := conditions.Get(gr.Status.Conditions, ConditionAccepted); !gr.Spec.DisablePolling || c == nil || c.Status != corev1.ConditionTrue {
		h.repos.EnqueueAfter(gr.Namespace, gr.Name, interval)
	}
	return gr, nil
}

// start syncs gr in the background, unless its last sync is still under way: a slow
// repository holds one of its workspace's fetch slots, never a reconcile worker. The
// outcome is recorded by the reconcile that follows.
func (h *handler) start(key string, gr *fleet.GitRepo, restrictions []*fleet.GitRepoRestriction, rewrite bool) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.running[key] {
		return false
	}
	h.running[key] = true
	go func() {
		commit, err := h.fetchAndWrite(gr, restrictions, rewrite)
		h.mu.Lock()
		delete(h.running, key)
		h.done[key] = synced{gr: gr, commit: commit, err: err}
		h.mu.Unlock()
		h.repos.Enqueue(gr.Namespace, gr.Name)
	}()
	return true
}

// record puts a sync's outcome into status.
func (h *handler) record(s synced, status *fleet.GitRepoStatus) {
	gr, err := s.gr, s.err
	if err != nil {
		reason := gitfetch.ReasonOf(err)
		var r *reasoned
		if errors.As(err, &r) {
			reason = r.reason
		}
		msg := err.Error()
		if len(msg) > maxMessage {
			msg = msg[:maxMessage] + "..."
		}
		if conditions.Set(&status.Conditions, ConditionAccepted, corev1.ConditionFalse, reason, msg) {
			h.events.Event(gr, corev1.EventTypeWarning, reason, msg)
		}
		status.Display.Error, status.Display.Message = true, msg
		return
	}
	conditions.Set(&status.Conditions, ConditionAccepted, corev1.ConditionTrue, "", "")
	status.Commit = s.commit
	status.Display.Error, status.Display.Message = false, ""
	status.ObservedGeneration, status.UpdateGeneration = gr.Generation, gr.Spec.ForceSyncGeneration
}

type reasoned struct {
	reason string
	err    error
}

func (r *reasoned) Error() string { return r.err.Error() }
func (r *reasoned) Unwrap() error { return r.err }

// fetchAndWrite looks at gr's branch and, when there is something new, checks it out
// and writes its Bundles; it returns the commit deployed. Each step waits for a slot
// of its workspace and has --gitrepo-fetch-timeout from then on.
func (h *handler) fetchAndWrite(gr *fleet.GitRepo, restrictions []*fleet.GitRepoRestriction, rewrite bool) (string, error) {
	allowed, err := Restrict(gr, restrictions)
	if err != nil {
		return "", &reasoned{ReasonRestricted, err}
	}
	src, err := h.source(gr, allowed.ClientSecretName)
	if err != nil {
		return "", err
	}
	var commit string
	err = h.withSlot(h.looks, gr.Namespace, "look at the branch", func(ctx context.Context) (err error) {
		commit, err = gitfetch.Head(ctx, src, h.settings.MaxCheckoutSize)
		return err
	})
	if err != nil {
		return "", err
	}
	unchanged := !rewrite && commit == gr.Status.Commit && gr.Status.ObservedGeneration == gr.Generation &&
		gr.Status.UpdateGeneration == gr.Spec.ForceSyncGeneration
	if accepted := conditions.Get(gr.Status.Conditions, ConditionAccepted); unchanged && accepted != nil && accepted.Status == corev1.ConditionTrue {
		return commit, nil
	}
	return commit, h.withSlot(h.checkouts, gr.Namespace, "check out", func(ctx context.Context) error {
		return h.write(ctx, gr, src, commit, allowed)
	})
}

// withSlot runs do with one of s's slots for workspace, under --gitrepo-fetch-timeout,
// which also bounds the wait for the slot.
func (h *handler) withSlot(s *slots, workspace, what string, do func(context.Context) error) error {
	wait, cancel := context.WithTimeout(h.ctx, h.settings.FetchTimeout)
	release, err := s.acquire(wait, workspace)
	cancel()
	if err != nil {
		return &gitfetch.Error{Reason: gitfetch.ReasonTimedOut, Err: fmt.Errorf("waited %s for a free slot to %s (--gitrepo-concurrent-fetches, shared fairly among workspaces)", h.settings.FetchTimeout, what)}
	}
	defer release()
	ctx, cancel := context.WithTimeout(h.ctx, h.settings.FetchTimeout)
	defer cancel()
	return do(ctx)
}

// write checks out commit and writes the Bundles of its folders.
func (h *handler) write(ctx context.Context, gr *fleet.GitRepo, src gitfetch.Source, commit string, allowed Allowed) error {
	dir, err := os.MkdirTemp("", "flotilla-gitrepo-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	checkout := filepath.Join(dir, "repo")
	job := gitfetch.Job{Source: src, Commit: commit, Dir: checkout, MaxBytes: h.settings.MaxCheckoutSize, Policy: gitfetch.Policy()}
	if err := gitfetch.Run(ctx, h.settings.Worker, job, gitfetch.Limits{Memory: h.settings.FetchMemory}); err != nil {
		return err
	}
	paths, dirs, err := folders(checkout, gr.Spec)
	if err != nil {
		return &reasoned{ReasonInvalidPath, err}
	}
	helmAuth, err := h.helmAuth(gr)
	if err != nil {
		return err
	}
	opts := hubctl.ApplyOptions{
		Name: gr.Name, Dirs: paths, Bundles: dirs, BaseDir: checkout, Namespace: gr.Namespace, Log: discard{},
		Owner:        metav1.NewControllerRef(gr, fleet.SchemeGroupVersion.WithKind("GitRepo")),
		MaxTotalSize: h.settings.MaxSyncSize,
		Read: bundlereader.Options{
			Labels:          map[string]string{hubctl.RepoLabel: gr.Name, hubctl.CommitLabel: commit},
			Targets:         targets(gr.Spec.Targets),
			TargetNamespace: gr.Spec.TargetNamespace,
			ServiceAccount:  allowed.ServiceAccount,
			Paused:          gr.Spec.Paused,
			KeepResources:   gr.Spec.KeepResources,
			SyncGeneration:  gr.Spec.ForceSyncGeneration,
			CorrectDrift:    gr.Spec.CorrectDrift,
			MaxSize:         h.settings.MaxBundleSize,
			Auth:            helmAuth,
			// Charts a fleet.yaml names are fetched under the same address policy.
			HTTPClient: gitfetch.HTTPClient(),
		},
	}
	bundles, err := hubctl.ReadBundles(ctx, opts)
	var total *hubctl.TotalTooLargeError
	if errors.As(err, &total) {
		return &reasoned{gitfetch.ReasonTooLarge, fmt.Errorf("commit %s: %w (--gitrepo-max-sync-size)", short(commit), err)}
	}
	if err != nil {
		msg := strings.ReplaceAll(err.Error(), checkout+"/", "")
		if (helmAuth.Username != "" || helmAuth.Password != "") && helmAuth.SendCredentialsTo == nil {
			msg += " (helmSecretName's credential goes only to the chart repositories helmRepoURLRegex matches, and it is not set)"
		}
		return &reasoned{ReasonInvalidBundle, fmt.Errorf("commit %s: %s", short(commit), msg)}
	}
	if err := hubctl.Save(ctx, h.client, opts, bundles); err != nil {
		return &reasoned{ReasonWriteFailed, err}
	}
	return nil
}

// source is where gr's files come from, with the credential its Secret holds.
func (h *handler) source(gr *fleet.GitRepo, secretName string) (gitfetch.Source, error) {
	src := gitfetch.Source{URL: gr.Spec.Repo, Branch: gr.Spec.Branch, Revision: gr.Spec.Revision,
		CABundle: gr.Spec.CABundle, InsecureSkipTLS: gr.Spec.InsecureSkipTLSverify}
	if secretName == "" {
		return src, nil
	}
	secret, err := h.secrets.Get(gr.Namespace, secretName)
	if apierrors.IsNotFound(err) {
		return src, &reasoned{ReasonSecretNotFound, fmt.Errorf("clientSecretName: Secret %s/%s not found", gr.Namespace, secretName)}
	}
	if err != nil {
		return src, err
	}
	src.Username, src.Password = string(secret.Data[corev1.BasicAuthUsernameKey]), string(secret.Data[corev1.BasicAuthPasswordKey])
	src.SSHPrivateKey, src.KnownHosts = secret.Data[corev1.SSHAuthPrivateKey], secret.Data["known_hosts"]
	if src.Username == "" && src.Password == "" && len(src.SSHPrivateKey) == 0 {
		return src, &reasoned{ReasonSecretNotFound, fmt.Errorf("clientSecretName: Secret %s/%s has no %s or %s (a kubernetes.io/basic-auth Secret) and no %s (a kubernetes.io/ssh-auth Secret, with known_hosts)",
			gr.Namespace, secretName, corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey, corev1.SSHAuthPrivateKey)}
	}
	return src, nil
}

// folders are what a GitRepo reads of its checkout: its paths, searched for
// fleet.yaml folders, or its bundles, each one Bundle.
func folders(checkout string, spec fleet.GitRepoSpec) ([]string, []hubctl.BundleDir, error) {
	if len(spec.Bundles) == 0 {
		paths, err := Paths(checkout, spec.Paths)
		return paths, nil, err
	}
	var dirs []hubctl.BundleDir
	for _, b := range spec.Bundles {
		base := b.Base
		if base == "" {
			base = "."
		}
		// A base is a folder, not a pattern: what is checked is what is read.
		if strings.ContainsAny(base, `*?[\`) {
			return nil, nil, fmt.Errorf("bundles: base %q: a base is one folder; *, ?, [ and \\ are not allowed", b.Base)
		}
		clean, err := Paths(checkout, []string{base})
		if err != nil {
			return nil, nil, fmt.Errorf("bundles: %w", err)
		}
		if fi, err := os.Stat(filepath.Join(checkout, clean[0])); err != nil || !fi.IsDir() {
			return nil, nil, fmt.Errorf("bundles: base %q is not a folder of the repository", b.Base)
		}
		dirs = append(dirs, hubctl.BundleDir{Dir: clean[0], FleetFile: b.Options})
	}
	return nil, dirs, nil
}

// helmAuth is the credential of gr's helmSecretName for the chart repositories its
// helmRepoURLRegex matches.
func (h *handler) helmAuth(gr *fleet.GitRepo) (bundlereader.Auth, error) {
	var auth bundlereader.Auth
	if gr.Spec.HelmSecretName == "" {
		return auth, nil
	}
	secret, err := h.secrets.Get(gr.Namespace, gr.Spec.HelmSecretName)
	if apierrors.IsNotFound(err) {
		return auth, &reasoned{ReasonSecretNotFound, fmt.Errorf("helmSecretName: Secret %s/%s not found", gr.Namespace, gr.Spec.HelmSecretName)}
	}
	if err != nil {
		return auth, err
	}
	auth.Username, auth.Password = string(secret.Data[corev1.BasicAuthUsernameKey]), string(secret.Data[corev1.BasicAuthPasswordKey])
	auth.CABundle = secret.Data["cacerts"]
	if gr.Spec.HelmRepoURLRegex != "" {
		re, err := bundlereader.AllowCredentials(gr.Spec.HelmRepoURLRegex)
		if err != nil {
			return auth, &reasoned{ReasonInvalidBundle, fmt.Errorf("helmRepoURLRegex: %w", err)}
		}
		auth.SendCredentialsTo = re
	}
	return auth, nil
}

// Paths checks a GitRepo's paths against its checkout: relative, inside it once
// links are followed. None means the checkout's root.
func Paths(checkout string, paths []string) ([]string, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	root, err := filepath.EvalSymlinks(checkout)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range paths {
		clean := filepath.Clean(p)
		if filepath.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, fmt.Errorf("path %q leaves the repository", p)
		}
		matches, err := filepath.Glob(filepath.Join(checkout, clean))
		if err != nil {
			return nil, fmt.Errorf("path %q: %w", p, err)
		}
		if len(matches) == 0 {
			return nil, fmt.Errorf("path %q: no such folder in the repository", p)
		}
		for _, m := range matches {
			real, err := filepath.EvalSymlinks(m)
			if err != nil {
				return nil, fmt.Errorf("path %q: %w", p, err)
			}
			if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
				return nil, fmt.Errorf("path %q leaves the repository (a link to %s)", p, real)
			}
		}
		out = append(out, clean)
	}
	return out, nil
}

func targets(in []fleet.GitTarget) []fleet.BundleTarget {
	var out []fleet.BundleTarget
	for _, t := range in {
		out = append(out, fleet.BundleTarget{Name: t.Name, ClusterName: t.ClusterName, ClusterSelector: t.ClusterSelector,
			ClusterGroup: t.ClusterGroup, ClusterGroupSelector: t.ClusterGroupSelector})
	}
	return out
}

// summarize counts the BundleDeployments of gr's Bundles and sets Ready.
func (h *handler) summarize(gr *fleet.GitRepo, status *fleet.GitRepoStatus) {
	bundles, err := h.bundles.List(gr.Namespace, labels.SelectorFromSet(labels.Set{hubctl.RepoLabel: gr.Name}))
	if err != nil {
		return
	}
	sort.Slice(bundles, func(i, j int) bool { return bundles[i].Name < bundles[j].Name })
	var sum fleet.BundleSummary
	var notReady []string
	state := ""
	for _, b := range bundles {
		s := b.Status.Summary
		sum.DesiredReady += s.DesiredReady
		sum.Ready += s.Ready
		sum.NotReady += s.NotReady
		sum.WaitApplied += s.WaitApplied
		sum.ErrApplied += s.ErrApplied
		sum.OutOfSync += s.OutOfSync
		sum.Modified += s.Modified
		sum.Pending += s.Pending
		if s.Ready < s.DesiredReady || b.Status.ObservedGeneration != b.Generation {
			notReady = append(notReady, b.Name)
			if state == "" {
				state = b.Status.Display.State
			}
		}
	}
	status.Summary = sum
	status.Display.ReadyBundleDeployments = fmt.Sprintf("%d/%d", sum.Ready, sum.DesiredReady)
	status.Display.State = state
	accepted := conditions.Get(status.Conditions, ConditionAccepted)
	switch {
	case accepted == nil || accepted.Status != corev1.ConditionTrue:
		msg := "not fetched yet"
		if accepted != nil {
			msg = accepted.Reason + ": " + accepted.Message
		}
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, "NotAccepted", msg)
	case len(notReady) > 0:
		if len(notReady) > 3 {
			notReady = append(notReady[:3], fmt.Sprintf("and %d more", len(notReady)-3))
		}
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, "BundlesNotReady", "not ready: "+strings.Join(notReady, ", "))
	default:
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
	}
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
