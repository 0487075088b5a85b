package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
)

// SecretName is the Secret, in the hub's namespace, holding each provider's webhook
// secret under its key (github, gitlab, gitea, bitbucket), as Fleet's gitjob-webhook.
const SecretName = "gitjob-webhook"

// Handler answers push events: each verified push marks the GitRepos that follow
// the pushed branch of that repository (status.webhookCommit), and the hub's GitRepo
// controller looks at them at once. Any hub replica can answer: the mark is in the API.
type Handler struct {
	Fleet versioned.Interface
	Kube  kubernetes.Interface
	// Namespace holds SecretName.
	Namespace string
	Log       logrus.FieldLogger
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		http.Error(w, "push events are POSTed", http.StatusMethodNotAllowed)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 30*time.Second)
	defer cancel()
	secrets := map[string][]byte{}
	if s, err := h.Kube.CoreV1().Secrets(h.Namespace).Get(ctx, SecretName, metav1.GetOptions{}); err == nil {
		secrets = s.Data
	} else if !apierrors.IsNotFound(err) {
		http.Error(w, "reading the webhook secrets", http.StatusServiceUnavailable)
		return
	}
	push, err := Parse(r, secrets)
	var refused *Error
	switch {
	case errors.Is(err, ErrNotAPush):
		fmt.Fprintln(w, "ignored: not a push to a branch")
		return
	case errors.As(err, &refused):
		h.Log.WithField("from", r.RemoteAddr).Warn("Refused a webhook event: " + refused.Msg)
		http.Error(w, refused.Msg, refused.Status)
		return
	case err != nil:
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	marked, err := h.mark(ctx, push)
	if err != nil {
		h.Log.WithError(err).Warn("Marking GitRepos for a push event")
		http.Error(w, "marking GitRepos: "+err.Error(), http.StatusServiceUnavailable)
		return
	}
	h.Log.WithFields(logrus.Fields{"provider": push.Provider, "branch": push.Branch, "commit": push.Commit, "gitrepos": strings.Join(marked, ",")}).Info("Push event")
	fmt.Fprintf(w, "%d GitRepos to fetch\n", len(marked))
}

// mark records the push on every GitRepo following its repository and branch.
func (h *Handler) mark(ctx context.Context, push Push) ([]string, error) {
	var marked []string
	opts := metav1.ListOptions{Limit: 500}
	for {
		list, err := h.Fleet.FleetV1alpha1().GitRepos("").List(ctx, opts)
		if err != nil {
			return marked, err
		}
		for i := range list.Items {
			gr := &list.Items[i]
			if !follows(gr, push) {
				continue
			}
			if err := h.markOne(ctx, gr.Namespace, gr.Name, push); err != nil {
				return marked, err
			}
			marked = append(marked, gr.Namespace+"/"+gr.Name)
		}
		if list.Continue == "" {
			return marked, nil
		}
		opts.Continue = list.Continue
	}
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
