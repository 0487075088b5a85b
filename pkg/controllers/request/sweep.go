package request

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/flotilla/flotilla/pkg/names"
)

// answerSweepEvery is how often the hub looks for answer Secrets whose request is
// gone, and answerGrace how old such an answer must be to be deleted.
//
// An answer is written by the worker that handles its request while another worker
// may delete that request: a newer request of the same clientID removes the older
// ones with their answers, and an answered request expires with its answer. Either
// looks the answer up in the API server's watch cache, which may not show one just
// written; the request is deleted, and nothing would look at the answer again (make
// chaos found three such answers left after 200 registrations and 100 kills).
const (
	answerSweepEvery = time.Minute
	answerGrace      = time.Minute
)

// sweepAnswers deletes the answer Secrets of the registration namespace whose request
// no longer exists. Only the hub writes there (the answers to recovery requests, in
// per-cluster namespaces, go with their namespace); it reads them from the API
// server a page at a time, since its Secret cache leaves answers out.
func (h *handler) sweepAnswers(ctx context.Context) {
	if !h.signed.store.synced() || !h.fleetAgents.store.synced() {
		return
	}
	opts := metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{names.ManagedLabel: "true"}).String(),
		FieldSelector: fields.OneTermEqualSelector("type", names.CredentialSecretType).String(),
		Limit:         500,
	}
	secrets := h.kube.CoreV1().Secrets(names.RegistrationNamespace)
	for {
		page, err := secrets.List(ctx, opts)
		if err != nil {
			logrus.WithError(err).Warn("Cannot list registration answers to remove those whose request is gone")
			return
		}
		for _, secret := range orphanedAnswers(page.Items, h.requestExists, time.Now()) {
			uid := secret.UID
			err := secrets.Delete(ctx, secret.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
			if ignoreNotFound(err) != nil {
				logrus.WithError(err).WithField("secret", secret.Namespace+"/"+secret.Name).Warn("Cannot delete a registration answer whose request is gone")
				continue
			}
			logrus.WithFields(logrus.Fields{"secret": secret.Namespace + "/" + secret.Name, "request": secret.Labels[names.RequestLabel]}).
				Info("Deleted a registration answer whose request is gone")
		}
		if opts.Continue = page.Continue; opts.Continue == "" {
			return
		}
	}
}

// requestExists says whether the hub's cache holds the request namespace/name of
// the kind named kindName (empty: a ClusterRegistrationRequest); with no namespace
// (an answer written before answers named it), whether any namespace holds a
// ClusterRegistrationRequest of that name.
func (h *handler) requestExists(kindName, namespace, name string) bool {
	if kindName == fleetKind {
		return h.fleetAgents.store.get(namespace, name) == nil
	}
	if namespace != "" {
		return h.signed.store.get(namespace, name) == nil
	}
	all, err := h.requests.Cache().List("", labels.Everything())
	if err != nil {
		return true
	}
	for _, r := range all {
		if r.Name == name {
			return true
		}
	}
	return false
}

// orphanedAnswers are the answers among secrets, older than answerGrace at now, whose
// request does not exist. An answer in a per-cluster namespace (to a recovery
// request) answers a request of that namespace.
func orphanedAnswers(secrets []corev1.Secret, exists func(kind, namespace, name string) bool, now time.Time) []corev1.Secret {
	var out []corev1.Secret
	for _, s := range secrets {
		request := s.Labels[names.RequestLabel]
		if string(s.Type) != names.CredentialSecretType || request == "" || now.Sub(s.CreationTimestamp.Time) < answerGrace {
			continue
		}
		namespace := s.Labels[names.RequestNamespaceLabel]
		if namespace == "" && names.IsClusterNamespace(s.Namespace) {
			namespace = s.Namespace
		}
		if !exists(s.Labels[names.RequestKindLabel], namespace, request) {
			out = append(out, s)
		}
	}
	return out
}
