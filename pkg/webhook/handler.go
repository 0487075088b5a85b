package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sync/singleflight"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
)

// SecretName is the Secret, in the hub's namespace, holding each provider's webhook
// secret under its key (github, gitlab, gitea, bitbucket), as Fleet's gitjob-webhook.
const SecretName = "gitjob-webhook"

// SecretTTL is how long a webhook Secret read is used before it is read again.
const SecretTTL = 10 * time.Second

// Handler answers push events: each verified push marks the GitRepos that follow
// the pushed branch of that repository (status.webhookCommit), and the hub's GitRepo
// controller looks at them at once. Any hub replica can answer: the mark is in the
// API. A GitRepo with spec.webhookSecret takes only events signed with its own
// Secret's; the others, those signed with the hub's SecretName.
type Handler struct {
	Fleet versioned.Interface
	Kube  kubernetes.Interface
	// Namespace holds SecretName.
	Namespace string
	Log       logrus.FieldLogger

	repos   cache.SharedIndexInformer
	mu      sync.Mutex
	secrets map[string]secretRead
	reads   singleflight.Group
	// memory is what Serve lets the events being read hold.
	memory *budget
}

// answerTimeout bounds the API requests of one event's answer.
const answerTimeout = 30 * time.Second

type secretRead struct {
	data map[string][]byte
	at   time.Time
}

// Start watches GitRepos, so that events are matched without a request to the API.
func (h *Handler) Start(ctx context.Context) {
	gitrepos := h.Fleet.FleetV1alpha1().GitRepos("")
	h.repos = cache.NewSharedIndexInformer(&cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			return gitrepos.List(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return gitrepos.Watch(ctx, opts)
		},
	}, &fleet.GitRepo{}, 0, cache.Indexers{})
	go h.repos.Run(ctx.Done())
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "push events are POSTed", http.StatusMethodNotAllowed)
		return
	}
	if h.repos == nil || !h.repos.HasSynced() {
		http.Error(w, "starting", http.StatusServiceUnavailable)
		return
	}
	event, release, err := read(r, h.memory)
	defer release()
	if err != nil {
		h.refuse(w, r, err)
		return
	}
	push, err := event.Push()
	if errors.Is(err, ErrNotAPush) {
		fmt.Fprintln(w, "ignored: not a push to a branch")
		return
	}
	if err != nil {
		h.refuse(w, r, err)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), answerTimeout)
	defer cancel()
	repos, verified, err := h.verify(ctx, event, push)
	if err != nil {
		http.Error(w, "reading the webhook secrets", http.StatusServiceUnavailable)
		return
	}
	if !verified {
		h.refuse(w, r, event.Unverified())
		return
	}
	var marked []string
	for _, gr := range repos {
		if err := h.markOne(ctx, gr.Namespace, gr.Name, push); err != nil {
			h.Log.WithError(err).Warn("Marking GitRepos for a push event")
			http.Error(w, "marking GitRepos: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		marked = append(marked, gr.Namespace+"/"+gr.Name)
	}
	h.Log.WithFields(logrus.Fields{"provider": push.Provider, "branch": push.Branch, "commit": push.Commit, "gitrepos": strings.Join(marked, ",")}).Info("Push event")
	fmt.Fprintf(w, "%d GitRepos to fetch\n", len(marked))
}

func (h *Handler) refuse(w http.ResponseWriter, r *http.Request, err error) {
	e := &Error{Status: http.StatusBadRequest, Msg: err.Error()}
	errors.As(err, &e)
	h.Log.WithField("from", r.RemoteAddr).Warn("Refused a webhook event: " + e.Msg)
	if e.Status == http.StatusServiceUnavailable || e.Status == http.StatusTooManyRequests {
		w.Header().Set("Retry-After", strconv.Itoa(retryAfterSeconds))
	}
	if e.Status == http.StatusRequestTimeout || e.Status == http.StatusRequestEntityTooLarge {
		// The rest of the body is not read: the connection is not reused.
		w.Header().Set("Connection", "close")
	}
	http.Error(w, e.Msg, e.Status)
}

// verify returns the GitRepos following the push whose secret signed the event,
// and whether any secret did (the hub's, with no GitRepo to mark, is an answer too).
func (h *Handler) verify(ctx context.Context, event Event, push Push) ([]*fleet.GitRepo, bool, error) {
	global, err := h.secret(ctx, h.Namespace, SecretName)
	if err != nil {
		return nil, false, err
	}
	byGlobal := event.Verified(global[event.Provider])
	var out []*fleet.GitRepo
	for _, obj := range h.repos.GetStore().List() {
		gr := obj.(*fleet.GitRepo)
		if !follows(gr, push) {
			continue
		}
		ok := byGlobal
		if gr.Spec.WebhookSecret != "" {
			// A Secret that cannot be read verifies nothing; the others still count.
			own, err := h.secret(ctx, gr.Namespace, gr.Spec.WebhookSecret)
			if err != nil {
				h.Log.WithError(err).WithField("gitrepo", gr.Namespace+"/"+gr.Name).Warn("Reading a GitRepo's webhookSecret")
			}
			ok = err == nil && event.Verified(own[event.Provider])
		}
		if ok {
			out = append(out, gr)
		}
	}
	return out, byGlobal || len(out) > 0, nil
}

// secret reads the provider keys of a Secret, at most once per SecretTTL (however
// many events come at once); a missing Secret has none.
func (h *Handler) secret(ctx context.Context, namespace, name string) (map[string][]byte, error) {
	key := namespace + "/" + name
	h.mu.Lock()
	read, ok := h.secrets[key]
	h.mu.Unlock()
	if ok && time.Since(read.at) < SecretTTL {
		return read.data, nil
	}
	v, err, _ := h.reads.Do(key, func() (interface{}, error) {
		s, err := h.Kube.CoreV1().Secrets(namespace).Get(ctx, name, metav1.GetOptions{})
		read := secretRead{at: time.Now()}
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, err
		default:
			read.data = map[string][]byte{}
			for _, p := range []string{GitHub, GitLab, Gitea, Bitbucket} {
				if v, ok := s.Data[p]; ok {
					read.data[p] = v
				}
			}
		}
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.secrets == nil {
			h.secrets = map[string]secretRead{}
		}
		// Only Secrets GitRepos name, and the hub's, are read: the map stays small;
		// entries of Secrets no longer named go when stale.
		for k, v := range h.secrets {
			if time.Since(v.at) > SecretTTL {
				delete(h.secrets, k)
			}
		}
		h.secrets[key] = read
		return read.data, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(map[string][]byte), nil
}

// follows says whether gr deploys the pushed branch of the pushed repository.
func follows(gr *fleet.GitRepo, push Push) bool {
	branch := gr.Spec.Branch
	if branch == "" {
		branch = "master"
	}
	return gr.Spec.Revision == "" && branch == push.Branch && SameRepo(gr.Spec.Repo, push)
}

func (h *Handler) markOne(ctx context.Context, namespace, name string, push Push) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		gr, err := h.Fleet.FleetV1alpha1().GitRepos(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		gr.Status.WebhookCommit = push.Commit
		gr.Status.LastWebhookTime = metav1.Now()
		_, err = h.Fleet.FleetV1alpha1().GitRepos(namespace).UpdateStatus(ctx, gr, metav1.UpdateOptions{})
		return err
	})
}
