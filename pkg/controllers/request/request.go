// Package request is the ClusterRegistrationRequest controller: it grants an agent's
// request by finding the Cluster with the request's clientID in the workspace (or
// creating one), giving the cluster an identity (a ServiceAccount in its per-cluster
// namespace with the least RBAC that works) and handing the agent a credential Secret
// that only the token that made the request may read. It grants once, and removes what
// older requests of the same clientID left behind.
package request

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/controllers/clusterns"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/metrics"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// ByClientID indexes Clusters and requests by "<namespace>/<clientID>".
const ByClientID = "fleet.cattle.io/by-client-id"

// refusedByToken indexes refused requests by "<namespace>/<token>" of the token
// they name.
const refusedByToken = "fleet.cattle.io/refused-by-registration-token"

// Settings are what a granted credential carries.
type Settings struct {
	APIServerURL string
	APIServerCA  []byte
	// ClusterTokenTTL is the lifetime of a cluster identity's token.
	ClusterTokenTTL time.Duration
	// AgentTokenRenewAfter, if set, makes agents renew after this long instead of
	// half way through the token's lifetime.
	AgentTokenRenewAfter time.Duration
	// APIServerAuthorizesIdentities says that the API server authorizes cluster
	// identities itself, so the hub creates no RBAC objects for them.
	APIServerAuthorizesIdentities bool
	// RefusedRetention is how long a refused request is kept, for people to read
	// why, before it is deleted.
	RefusedRetention time.Duration
}

type handler struct {
	settings   Settings
	requests   fleetcontrollers.ClusterRegistrationRequestController
	clusters   fleetcontrollers.ClusterController
	tokens     fleetcontrollers.ClusterRegistrationTokenController
	namespaces *clusterns.Ensurer
	kube       kubernetes.Interface
	events     record.EventRecorder
}

// Register starts handling ClusterRegistrationRequests.
func Register(ctx context.Context, settings Settings, requests fleetcontrollers.ClusterRegistrationRequestController,
	clusters fleetcontrollers.ClusterController, tokens fleetcontrollers.ClusterRegistrationTokenController,
	namespaces *clusterns.Ensurer, kube kubernetes.Interface, events record.EventRecorder) {
	h := &handler{settings: settings, requests: requests, clusters: clusters, tokens: tokens, namespaces: namespaces, kube: kube, events: events}
	requests.Cache().AddIndexer(ByClientID, func(r *fleet.ClusterRegistrationRequest) ([]string, error) {
		return []string{r.Namespace + "/" + r.Spec.ClientID}, nil
	})
	requests.Cache().AddIndexer(refusedByToken, func(r *fleet.ClusterRegistrationRequest) ([]string, error) {
		if refusedCondition(r) == nil {
			return nil, nil
		}
		return []string{r.Namespace + "/" + r.Labels[names.RegistrationTokenLabel]}, nil
	})
	IndexClustersByClientID(clusters.Cache())
	requests.OnChange(ctx, "cluster-registration-request", h.onChange)
}

// IndexClustersByClientID adds the ByClientID index to a Cluster cache.
func IndexClustersByClientID(cache fleetcontrollers.ClusterCache) {
	cache.AddIndexer(ByClientID, func(c *fleet.Cluster) ([]string, error) {
		if c.Spec.ClientID == "" {
			return nil, nil
		}
		return []string{c.Namespace + "/" + c.Spec.ClientID}, nil
	})
}

// refusal is a request the hub will not grant, with a reason for its Ready condition.
type refusal struct{ reason, message string }

func (r *refusal) Error() string { return r.message }

func refuse(reason, format string, args ...any) error {
	return &refusal{reason: reason, message: fmt.Sprintf(format, args...)}
}

func (h *handler) onChange(_ string, req *fleet.ClusterRegistrationRequest) (*fleet.ClusterRegistrationRequest, error) {
	if req == nil || req.DeletionTimestamp != nil {
		return req, nil
	}
	if req.Status.Granted {
		// Granted once; what is left is removing what older requests of the same
		// clientID left behind, retried until done.
		return req, h.removeOlderRequests(req)
	}
	if c := refusedCondition(req); c != nil {
		// Refused before; the spec of a request does not change, so neither would the
		// answer. It is kept for a while for people to read, then deleted, so that
		// refused requests do not pile up.
		return req, h.expireRefused(req, c)
	}
	log := logrus.WithFields(logrus.Fields{"request": req.Namespace + "/" + req.Name, "clientID": req.Spec.ClientID})
	clusterName, err := h.grant(context.Background(), req, log)
	var refused *refusal
	if errors.As(err, &refused) {
		log.WithField("reason", refused.reason).Warn("Refused the registration: " + refused.message)
		metrics.Registrations.WithLabelValues("refused", refused.reason).Inc()
		h.events.Event(req, corev1.EventTypeWarning, refused.reason, refused.message)
		updated := req.DeepCopy()
		conditions.Set(&updated.Status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, refused.reason, refused.message)
		return h.requests.UpdateStatus(updated)
	}
	if err != nil {
		return req, err
	}
	updated := req.DeepCopy()
	updated.Status.Granted = true
	updated.Status.ClusterName = clusterName
	conditions.Set(&updated.Status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
	updated, err = h.requests.UpdateStatus(updated)
	if err != nil {
		return req, err
	}
	// No event: the status says it, and the Cluster records its agent's first
	// check-in; an event per registration would cost a fleet one write each.
	metrics.Registrations.WithLabelValues("granted", "").Inc()
	log.WithField("cluster", req.Namespace+"/"+clusterName).Info("Granted the registration")
	return updated, h.removeOlderRequests(updated)
}

// grant does the work of granting req and returns the Cluster's name.
func (h *handler) grant(ctx context.Context, req *fleet.ClusterRegistrationRequest, log logrus.FieldLogger) (string, error) {
	tokenName := req.Labels[names.RegistrationTokenLabel]
	if tokenName == "" {
		return "", refuse("MissingToken", "the request does not name the token it was made with (label %s)", names.RegistrationTokenLabel)
	}
	token, err := h.tokens.Cache().Get(req.Namespace, tokenName)
	if apierrors.IsNotFound(err) {
		return "", refuse("TokenNotFound", "ClusterRegistrationToken %s/%s does not exist (expired or deleted)", req.Namespace, tokenName)
	} else if err != nil {
		return "", err
	}
	if bound := token.Labels[names.ClusterLabel]; bound != "" {
		// A token the hub minted to deploy one Cluster's agent registers that Cluster only.
		cluster, err := h.clusters.Cache().Get(req.Namespace, bound)
		if err != nil || cluster.Spec.ClientID != req.Spec.ClientID {
			return "", refuse("TokenBoundToCluster", "token %s/%s registers Cluster %s only, whose clientID differs", req.Namespace, tokenName, bound)
		}
	}

	if err := h.countRegistration(token, req.Spec.ClientID); err != nil {
		return "", err
	}
	cluster, existed, err := h.clusterFor(ctx, req, log)
	if err != nil {
		return "", err
	}
	clusterNS := names.ClusterNamespace(cluster.Namespace, cluster.Name)
	if err := h.namespaces.Ensure(ctx, cluster); err != nil {
		return "", err
	}
	if err := h.ensureIdentity(ctx, req, clusterNS, existed); err != nil {
		return "", err
	}
	if !h.settings.APIServerAuthorizesIdentities {
		rbac := registration.ClusterIdentity(cluster.Namespace, cluster.Name, clusterNS)
		if err := h.ensureIdentityRBAC(ctx, cluster, rbac); err != nil {
			return "", err
		}
	}

	seconds := int64(h.settings.ClusterTokenTTL.Seconds())
	issued := time.Now()
	tr, err := h.kube.CoreV1().ServiceAccounts(clusterNS).CreateToken(ctx, names.AgentIdentityServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return "", fmt.Errorf("requesting a token for the identity of Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	cred := registration.Credential{
		Token:               tr.Status.Token,
		Issued:              issued,
		Expires:             tr.Status.ExpirationTimestamp.Time,
		RenewAfter:          h.settings.AgentTokenRenewAfter,
		APIServerURL:        h.settings.APIServerURL,
		APIServerCA:         h.settings.APIServerCA,
		ClusterName:         cluster.Name,
		ClusterNamespace:    cluster.Namespace,
		DeploymentNamespace: clusterNS,
		ClientID:            req.Spec.ClientID,
	}
	if err := h.writeCredential(ctx, req, cluster, cred); err != nil {
		return "", err
	}
	if existed {
		if err := h.sweepCredentials(req.Spec.ClientID, req.Name); err != nil {
			return "", err
		}
		// The one registration event on the Cluster itself: a new credential replaced
		// the one its agent had (a reinstall, or an agent that lost its identity).
		h.events.Eventf(cluster, corev1.EventTypeNormal, "Reregistered",
			"The agent registered again (ClusterRegistrationRequest %s, token %s); the credentials it had before were revoked", req.Name, tokenName)
	}
	return cluster.Name, nil
}

// keptRefusedPerToken is how many refused requests of one token the hub keeps for
// their reasons to be read; beyond it, a refused request is deleted at once, so a
// token holder's flood costs the hub (and etcd) a bounded amount whatever its rate.
const keptRefusedPerToken = 100

// expireRefused deletes a refused request once it has been kept for
// RefusedRetention, or at once when its token has more refused requests than
// keptRefusedPerToken, and looks at it again then otherwise.
func (h *handler) expireRefused(req *fleet.ClusterRegistrationRequest, refused *fleet.Condition) error {
	left := refusedLeft(refused, h.settings.RefusedRetention, time.Now())
	if left > 0 && h.refusedOfToken(req) <= keptRefusedPerToken {
		h.requests.EnqueueAfter(req.Namespace, req.Name, left)
		return nil
	}
	uid := req.UID
	err := h.requests.Delete(req.Namespace, req.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	return ignoreNotFound(err)
}

// refusedOfToken counts the refused requests in the cache made with req's token.
func (h *handler) refusedOfToken(req *fleet.ClusterRegistrationRequest) int {
	refused, err := h.requests.Cache().GetByIndex(refusedByToken, req.Namespace+"/"+req.Labels[names.RegistrationTokenLabel])
	if err != nil {
		return 0
	}
	return len(refused)
}

// refusedCondition is the Ready condition of a request the hub refused, or nil.
func refusedCondition(req *fleet.ClusterRegistrationRequest) *fleet.Condition {
	if c := conditions.Get(req.Status.Conditions, fleet.ConditionReady); c != nil && c.Status == corev1.ConditionFalse && c.Reason != "" {
		return c
	}
	return nil
}

// refusedLeft is how long a request refused as cond says is still to be kept.
func refusedLeft(cond *fleet.Condition, retention time.Duration, now time.Time) time.Duration {
	since, err := time.Parse(time.RFC3339, cond.LastTransitionTime)
	if err != nil {
		return 0
	}
	return since.Add(retention).Sub(now)
}

// countRegistration checks, for a token with spec.maxRegistrations, that clientID
// is one of the clusters it registered or that it may register one more, and records
// it. The token's status is written with its resourceVersion, so two requests
// granted at once cannot both take the last place.
func (h *handler) countRegistration(token *fleet.ClusterRegistrationToken, clientID string) error {
	decision := registrationSlot(token, names.ClientIDHash(clientID))
	switch {
	case decision.refused:
		return refuse("RegistrationLimitReached", "token %s/%s has registered the %d clusters its spec.maxRegistrations allows; create another token for more clusters",
			token.Namespace, token.Name, *token.Spec.MaxRegistrations)
	case !decision.record:
		return nil
	}
	updated := token.DeepCopy()
	updated.Status.RegisteredClients = append(updated.Status.RegisteredClients, names.ClientIDHash(clientID))
	if _, err := h.tokens.UpdateStatus(updated); err != nil {
		return fmt.Errorf("counting the registration on token %s/%s: %w", token.Namespace, token.Name, err)
	}
	return nil
}

// slot is what a token's limit says of a registration.
type slot struct{ refused, record bool }

// registrationSlot decides whether the cluster with clientID hash may register with
// token: always without a limit, again if it did before, once more while under it.
func registrationSlot(token *fleet.ClusterRegistrationToken, hash string) slot {
	limit := token.Spec.MaxRegistrations
	switch {
	case limit == nil:
		return slot{}
	case slices.Contains(token.Status.RegisteredClients, hash):
		return slot{}
	case len(token.Status.RegisteredClients) >= int(*limit):
		return slot{refused: true}
	default:
		return slot{record: true}
	}
}

// clusterFor finds the Cluster with the request's clientID in its workspace or
// creates one; existed says whether it was there before.
func (h *handler) clusterFor(ctx context.Context, req *fleet.ClusterRegistrationRequest, log logrus.FieldLogger) (*fleet.Cluster, bool, error) {
	matches, err := h.clusters.Cache().GetByIndex(ByClientID, req.Namespace+"/"+req.Spec.ClientID)
	if err != nil {
		return nil, false, err
	}
	switch len(matches) {
	case 1:
		return matches[0], true, nil
	case 0:
	default:
		return nil, false, refuse("AmbiguousClientID", "%d Clusters in namespace %s have clientID %q; give each cluster its own", len(matches), req.Namespace, req.Spec.ClientID)
	}

	name := names.ClusterForClientID(req.Spec.ClientID)
	labels, dropped := clusterLabels(req.Spec.ClusterLabels)
	if len(dropped) > 0 {
		h.events.Eventf(req, corev1.EventTypeWarning, "LabelsDropped", "Labels not allowed on a Cluster were dropped: %v", dropped)
	}
	cluster := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: req.Namespace, Labels: labels, Finalizers: []string{names.ClusterFinalizer}},
		Spec:       fleet.ClusterSpec{ClientID: req.Spec.ClientID},
	}
	created, err := h.clusters.Create(cluster)
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := h.clusters.Get(req.Namespace, name, metav1.GetOptions{})
		if getErr != nil {
			return nil, false, getErr
		}
		if existing.Spec.ClientID != req.Spec.ClientID {
			return nil, false, refuse("NameTaken", "Cluster %s/%s already exists for another clientID", req.Namespace, name)
		}
		// Created by an earlier attempt at this request that failed later on.
		return existing, true, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("creating Cluster %s/%s: %w", req.Namespace, name, err)
	}
	log.WithField("cluster", req.Namespace+"/"+name).Info("Created a Cluster for a new clientID")
	return created, false, nil
}

// clusterLabels are the labels an agent asked for that a Cluster may carry: without
// reserved keys and without keys or values the API would refuse.
func clusterLabels(asked map[string]string) (map[string]string, []string) {
	sanitized := registration.SanitizeLabels(asked)
	var dropped []string
	for key := range asked {
		if _, ok := sanitized[key]; !ok {
			dropped = append(dropped, key)
		}
	}
	for key, value := range sanitized {
		if len(validation.IsQualifiedName(key)) > 0 || len(validation.IsValidLabelValue(value)) > 0 {
			delete(sanitized, key)
			dropped = append(dropped, key)
		}
	}
	return sanitized, dropped
}

// requestAnnotation on the identity ServiceAccount names the request it was made for.
const requestAnnotation = "fleet.cattle.io/cluster-registration"

// ensureIdentity makes the cluster's identity ServiceAccount for req. One made for an
// older request is deleted first: its tokens are bound to its UID, so they stop
// working at once.
func (h *handler) ensureIdentity(ctx context.Context, req *fleet.ClusterRegistrationRequest, clusterNS string, existed bool) error {
	sas := h.kube.CoreV1().ServiceAccounts(clusterNS)
	if existed {
		sa, err := sas.Get(ctx, names.AgentIdentityServiceAccount, metav1.GetOptions{})
		switch {
		case err == nil && sa.Annotations[requestAnnotation] == req.Name:
			return nil
		case err == nil:
			uid := sa.UID
			if err := sas.Delete(ctx, sa.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("revoking the previous identity %s/%s: %w", clusterNS, sa.Name, err)
			}
		case !apierrors.IsNotFound(err):
			return err
		}
	}
	_, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
		Name: names.AgentIdentityServiceAccount, Namespace: clusterNS,
		Labels:      map[string]string{names.ManagedLabel: "true"},
		Annotations: map[string]string{requestAnnotation: req.Name},
	}}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// A retry of this request: the ServiceAccount is ours if it names it.
		sa, getErr := sas.Get(ctx, names.AgentIdentityServiceAccount, metav1.GetOptions{})
		if getErr == nil && sa.Annotations[requestAnnotation] == req.Name {
			return nil
		}
		return fmt.Errorf("the identity ServiceAccount %s/%s is being replaced; will retry", clusterNS, names.AgentIdentityServiceAccount)
	}
	if err != nil {
		return fmt.Errorf("creating the identity ServiceAccount in %s: %w", clusterNS, err)
	}
	return nil
}

func (h *handler) ensureIdentityRBAC(ctx context.Context, cluster *fleet.Cluster, rbac registration.ClusterIdentityRBAC) error {
	owner := []metav1.OwnerReference{*metav1.NewControllerRef(cluster, fleet.SchemeGroupVersion.WithKind("Cluster"))}
	// The Role and RoleBinding in the workspace go with the Cluster by owner reference.
	rbac.StatusRole.OwnerReferences = owner
	rbac.StatusBinding.OwnerReferences = owner
	steps := []func() error{
		func() error {
			_, err := h.kube.RbacV1().RoleBindings(rbac.AgentBinding.Namespace).Create(ctx, rbac.AgentBinding, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := h.kube.RbacV1().Roles(rbac.StatusRole.Namespace).Create(ctx, rbac.StatusRole, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := h.kube.RbacV1().RoleBindings(rbac.StatusBinding.Namespace).Create(ctx, rbac.StatusBinding, metav1.CreateOptions{})
			return err
		},
		func() error {
			_, err := h.kube.RbacV1().ClusterRoleBindings().Create(ctx, rbac.ContentsBinding, metav1.CreateOptions{})
			return err
		},
	}
	for _, step := range steps {
		if err := step(); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("RBAC of Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
		}
	}
	return nil
}

// writeCredential creates the credential Secret and lets the token that made req, and
// only it, read it.
func (h *handler) writeCredential(ctx context.Context, req *fleet.ClusterRegistrationRequest, cluster *fleet.Cluster, cred registration.Credential) error {
	name := names.CredentialSecret(req.Spec.ClientID, req.Spec.ClientRandom)
	labels := map[string]string{
		names.ManagedLabel:          "true",
		names.ClusterLabel:          cluster.Name,
		names.ClusterNamespaceLabel: cluster.Namespace,
		names.RequestLabel:          req.Name,
		names.ClientIDHashLabel:     names.ClientIDHash(req.Spec.ClientID),
	}
	secrets := h.kube.CoreV1().Secrets(names.RegistrationNamespace)
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: names.RegistrationNamespace, Labels: labels},
		Type:       names.CredentialSecretType,
		Data:       cred.SecretData(),
	}
	_, err := secrets.Create(ctx, secret, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := secrets.Get(ctx, name, metav1.GetOptions{})
		if getErr != nil {
			return getErr
		}
		if existing.Labels[names.RequestLabel] != req.Name {
			return refuse("Replayed", "clientRandom was already used by request %s; an agent sends a fresh one with every request", existing.Labels[names.RequestLabel])
		}
		existing.Data = secret.Data
		if _, err = secrets.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating credential Secret %s: %w", name, err)
		}
	} else if err != nil {
		return fmt.Errorf("creating credential Secret %s: %w", name, err)
	}

	return nil
}

// removeOlderRequests deletes the other requests of req's clientID in its workspace,
// with the credential Secret, Role and RoleBinding made for each. It finds them in the
// cache, so it costs nothing when there are none.
func (h *handler) removeOlderRequests(req *fleet.ClusterRegistrationRequest) error {
	others, err := h.requests.Cache().GetByIndex(ByClientID, req.Namespace+"/"+req.Spec.ClientID)
	if err != nil {
		return err
	}
	ctx := context.Background()
	var errs []error
	for _, other := range others {
		if other.Name == req.Name {
			continue
		}
		name := names.CredentialSecret(other.Spec.ClientID, other.Spec.ClientRandom)
		errs = append(errs,
			ignoreNotFound(h.kube.CoreV1().Secrets(names.RegistrationNamespace).Delete(ctx, name, metav1.DeleteOptions{})),
			ignoreNotFound(h.requests.Delete(other.Namespace, other.Name, &metav1.DeleteOptions{})),
		)
	}
	return errors.Join(errs...)
}

// sweepCredentials deletes every credential Secret of clientID
// in the registration namespace except those of the request named keep, including
// any whose request is already gone. It lists, so it runs only when a known cluster
// registers again.
func (h *handler) sweepCredentials(clientID, keep string) error {
	selector := labels.SelectorFromSet(labels.Set{names.ClientIDHashLabel: names.ClientIDHash(clientID)})
	notKeep, err := labels.NewRequirement(names.RequestLabel, selection.NotEquals, []string{keep})
	if err != nil {
		return err
	}
	return DeleteRegistrationObjects(context.Background(), h.kube, selector.Add(*notKeep))
}

// DeleteRegistrationObjects deletes the credential Secrets in the registration
// namespace that match selector. It lists first, so nothing is
// written when there is nothing to delete.
func DeleteRegistrationObjects(ctx context.Context, kube kubernetes.Interface, selector labels.Selector) error {
	opts := metav1.ListOptions{LabelSelector: selector.String()}
	ns := names.RegistrationNamespace
	var errs []error
	secrets, err := kube.CoreV1().Secrets(ns).List(ctx, opts)
	errs = append(errs, err)
	if err == nil {
		for _, s := range secrets.Items {
			errs = append(errs, ignoreNotFound(kube.CoreV1().Secrets(ns).Delete(ctx, s.Name, metav1.DeleteOptions{})))
		}
	}
	return errors.Join(errs...)
}

func ignoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
