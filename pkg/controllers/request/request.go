// Package request is the ClusterRegistrationRequest controller: it grants an agent's
// request by finding the Cluster with the request's clientID in the workspace (or
// creating one) and giving the cluster an identity: x509 client certificates for the
// agent's key, answered in the request's status, where the hub can sign them; else a
// ServiceAccount token in its per-cluster namespace (with the least RBAC that works),
// handed over in a credential Secret sealed to the request. It grants once, and
// removes what older requests of the same clientID left behind.
package request

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
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
	// RecoveryTTL is the lifetime agents ask for their recovery token, or of the
	// recovery certificate the hub signs; zero hands out none (an agent whose
	// identity expired then needs a person).
	RecoveryTTL time.Duration
	// Signer, when set, signs cluster identities as x509 client certificates for
	// the agents' keys, with a CA the API server trusts; used where the API server
	// also authorizes cluster identities itself (APIServerAuthorizesIdentities).
	// Otherwise, and for Fleet's agent, identities are ServiceAccount tokens.
	Signer *registration.IdentitySigner
	// RequestRetention is how long an answered request is kept, for people to read
	// the answer, before it is deleted with its answer Secret.
	RequestRetention time.Duration
	// FleetAgents says whether Fleet's agents may register (ClusterRegistrations);
	// FleetAgentTokenTTL is the lifetime of the token they get, which they cannot
	// renew.
	FleetAgents        bool
	FleetAgentTokenTTL time.Duration
}

type handler struct {
	settings Settings
	requests fleetcontrollers.ClusterRegistrationRequestController
	// signed and fleetAgents are the two kinds of request.
	signed, fleetAgents kind
	clusters            fleetcontrollers.ClusterController
	tokens              fleetcontrollers.ClusterRegistrationTokenController
	namespaces          *clusterns.Ensurer
	kube                kubernetes.Interface
	events              record.EventRecorder
}

// Register starts handling ClusterRegistrationRequests and Fleet's
// ClusterRegistrations.
func Register(ctx context.Context, settings Settings, requests fleetcontrollers.ClusterRegistrationRequestController,
	fleetRegistrations fleetcontrollers.ClusterRegistrationController,
	clusters fleetcontrollers.ClusterController, tokens fleetcontrollers.ClusterRegistrationTokenController,
	namespaces *clusterns.Ensurer, kube kubernetes.Interface, events record.EventRecorder) {
	h := &handler{settings: settings, requests: requests, clusters: clusters, tokens: tokens, namespaces: namespaces, kube: kube, events: events,
		signed:      kind{name: requestKind, store: requestsStore{requests}},
		fleetAgents: kind{name: fleetKind, unkeyed: true, store: registrations{fleetRegistrations}},
	}
	requests.Cache().AddIndexer(ByClientID, func(r *fleet.ClusterRegistrationRequest) ([]string, error) {
		return requestIndex(ByClientID, r), nil
	})
	requests.Cache().AddIndexer(refusedByToken, func(r *fleet.ClusterRegistrationRequest) ([]string, error) {
		return requestIndex(refusedByToken, r), nil
	})
	requests.Cache().AddIndexer(pendingByToken, func(r *fleet.ClusterRegistrationRequest) ([]string, error) {
		return requestIndex(pendingByToken, r), nil
	})
	fleetRegistrations.Cache().AddIndexer(ByClientID, func(r *fleet.ClusterRegistration) ([]string, error) {
		return requestIndex(ByClientID, asRequest(r)), nil
	})
	fleetRegistrations.Cache().AddIndexer(refusedByToken, func(r *fleet.ClusterRegistration) ([]string, error) {
		return requestIndex(refusedByToken, asRequest(r)), nil
	})
	fleetRegistrations.Cache().AddIndexer(pendingByToken, func(r *fleet.ClusterRegistration) ([]string, error) {
		return requestIndex(pendingByToken, asRequest(r)), nil
	})
	IndexClustersByClientID(clusters.Cache())
	clusters.Cache().AddIndexer(byClusterNamespace, func(c *fleet.Cluster) ([]string, error) {
		return []string{clusterns.Name(c)}, nil
	})
	requests.OnChange(ctx, "cluster-registration-request", h.onChange)
	fleetRegistrations.OnChange(ctx, "cluster-registration", h.onRegistration)
	go wait.JitterUntilWithContext(ctx, h.sweepAnswers, answerSweepEvery, 0.2, true)
}

// requestIndex is what the index named index holds of req.
func requestIndex(index string, req *fleet.ClusterRegistrationRequest) []string {
	switch {
	case index == ByClientID:
		return []string{req.Namespace + "/" + req.Spec.ClientID}
	case index == refusedByToken && refusedCondition(req) != nil,
		index == pendingByToken && registration.AwaitingApproval(req):
		return []string{req.Namespace + "/" + req.Labels[names.RegistrationTokenLabel]}
	default:
		return nil
	}
}

// byClusterNamespace indexes Clusters by their per-cluster namespace.
const byClusterNamespace = "fleet.cattle.io/by-cluster-namespace"

// clusterOwning is the Cluster whose per-cluster namespace is namespace, or nil.
func (h *handler) clusterOwning(namespace string) *fleet.Cluster {
	if !names.IsClusterNamespace(namespace) {
		return nil
	}
	clusters, err := h.clusters.Cache().GetByIndex(byClusterNamespace, namespace)
	if err != nil || len(clusters) != 1 {
		return nil
	}
	return clusters[0]
}

// answerNamespace is where the answer to req goes: the registration namespace, or
// for a recovery request (made in a per-cluster namespace, naming no token) that
// namespace, where its recovery ServiceAccount may read it.
func answerNamespace(req *fleet.ClusterRegistrationRequest) string {
	if req.Labels[names.RegistrationTokenLabel] == "" && names.IsClusterNamespace(req.Namespace) {
		return req.Namespace
	}
	return names.RegistrationNamespace
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

// refusal is a request the hub will not grant, with a reason for its Ready condition,
// and the Cluster it concerns when people should see it there too.
type refusal struct {
	reason, message string
	cluster         *fleet.Cluster
	// answer, when set, is what the request's sender reads in place of message: a
	// token holder learns no Cluster's name or key of a refusal for another's clientID.
	answer string
}

// answerText is what the request's sender reads of r.
func (r *refusal) answerText() string {
	if r.answer != "" {
		return r.answer
	}
	return r.message
}

// allowWithABoundToken says how a hub admin lets an agent that lost its key (or never
// recorded one) register again, without naming the Cluster to the token holder.
const allowWithABoundToken = "If it is the same cluster, a hub admin can allow it: a ClusterRegistrationToken with a short ttl in the workspace, " +
	"labelled " + names.ClusterLabel + "=<the Cluster's name, which its RegistrationRefused event gives>, and the agent installed with that token's values.yaml"

func (r *refusal) Error() string { return r.message }

func refuse(reason, format string, args ...any) error {
	return &refusal{reason: reason, message: fmt.Sprintf(format, args...)}
}

func (h *handler) onChange(_ string, req *fleet.ClusterRegistrationRequest) (*fleet.ClusterRegistrationRequest, error) {
	if req == nil {
		return nil, nil
	}
	return h.answer(h.signed, req)
}

func (h *handler) onRegistration(_ string, r *fleet.ClusterRegistration) (*fleet.ClusterRegistration, error) {
	if r == nil {
		return nil, nil
	}
	updated, err := h.answer(h.fleetAgents, asRequest(r))
	return asRegistration(updated), err
}

// answer grants or refuses req, of kind k, once, and in time deletes it.
func (h *handler) answer(k kind, req *fleet.ClusterRegistrationRequest) (*fleet.ClusterRegistrationRequest, error) {
	if req.DeletionTimestamp != nil {
		return req, nil
	}
	if req.Status.Granted {
		// Granted once; what is left is removing what older requests of the same
		// clientID left behind, retried until done, and in time the request itself
		// with its credential Secret, if the agent has not deleted that already.
		if err := h.removeOlderRequests(k, req); err != nil {
			return req, err
		}
		return req, h.expire(k, req, conditions.Get(req.Status.Conditions, fleet.ConditionReady))
	}
	if c := refusedCondition(req); c != nil {
		// Refused before; the spec of a request does not change, so neither would the
		// answer. It is kept for a while for people to read, then deleted, so that
		// refused requests do not pile up.
		return req, h.expire(k, req, c)
	}
	log := logrus.WithFields(logrus.Fields{"request": req.Namespace + "/" + req.Name, "kind": k.name, "clientID": req.Spec.ClientID})
	clusterName, identity, err := h.grant(context.Background(), k, req, log)
	var held *heldError
	if errors.As(err, &held) {
		return h.hold(k, req, held)
	}
	var refused *refusal
	if errors.As(err, &refused) {
		log.WithField("reason", refused.reason).Warn("Refused the registration: " + refused.message)
		metrics.Registrations.WithLabelValues("refused", refused.reason).Inc()
		h.events.Event(k.store.object(req), corev1.EventTypeWarning, refused.reason, refused.message)
		if refused.cluster != nil {
			h.events.Eventf(refused.cluster, corev1.EventTypeWarning, "RegistrationRefused",
				"%s %s refused (%s): %s", k.name, req.Name, refused.reason, refused.message)
		}
		updated := req.DeepCopy()
		// What the agent reads: the token holder learns no other Cluster's name or key.
		// The events say the rest.
		conditions.Set(&updated.Status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, refused.reason, refused.answerText())
		return k.store.updateStatus(updated)
	}
	if err != nil {
		return req, err
	}
	updated := req.DeepCopy()
	updated.Status.Granted = true
	updated.Status.ClusterName = clusterName
	updated.Status.Identity = identity
	conditions.Set(&updated.Status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
	updated, err = k.store.updateStatus(updated)
	if err != nil {
		return req, err
	}
	// No event: the status says it, and the Cluster records its agent's first
	// check-in; an event per registration would cost a fleet one write each.
	metrics.Registrations.WithLabelValues("granted", "").Inc()
	log.WithField("cluster", req.Namespace+"/"+clusterName).Info("Granted the registration")
	return updated, h.removeOlderRequests(k, updated)
}

// grant does the work of granting req and returns the Cluster's name and, for a
// certificate identity, the identity.
func (h *handler) grant(ctx context.Context, k kind, req *fleet.ClusterRegistrationRequest, log logrus.FieldLogger) (string, *fleet.ClusterIdentity, error) {
	if k.unkeyed && !h.settings.FleetAgents {
		return "", nil, refuse("FleetAgentsRefused", "this hub does not register clusters with Fleet's agent (--fleet-agents=false); install Flotilla's fleet-agent chart with the token's values.yaml")
	}
	tokenName := req.Labels[names.RegistrationTokenLabel]
	if recovering := h.clusterOwning(req.Namespace); recovering != nil && tokenName == "" && !k.unkeyed {
		return h.recover(ctx, req, recovering)
	}
	if tokenName == "" {
		return "", nil, refuse("MissingToken", "the request does not name the token it was made with (label %s)", names.RegistrationTokenLabel)
	}
	token, err := h.tokens.Cache().Get(req.Namespace, tokenName)
	if apierrors.IsNotFound(err) {
		return "", nil, refuse("TokenNotFound", "ClusterRegistrationToken %s/%s does not exist (expired or deleted)", req.Namespace, tokenName)
	} else if err != nil {
		return "", nil, err
	}
	bound := token.Labels[names.ClusterLabel]
	if bound != "" {
		// A token bound to one Cluster (minted by the hub to deploy its agent, or by an
		// admin to let it register again) registers that Cluster only.
		cluster, err := h.clusters.Cache().Get(req.Namespace, bound)
		if err != nil || cluster.Spec.ClientID != req.Spec.ClientID {
			return "", nil, refuse("TokenBoundToCluster", "token %s/%s registers Cluster %s only, whose clientID differs", req.Namespace, tokenName, bound)
		}
	}
	if !k.unkeyed {
		if err := verify(req); err != nil {
			return "", nil, err
		}
	}
	// A token bound to a Cluster lets in another key (an agent that lost its own),
	// unless it moves the Cluster from another hub: then its key must sign.
	anyKey := bound != "" && token.Annotations[names.MovedFromAnnotation] == ""
	judge := func(cluster *fleet.Cluster) error {
		if err := h.judgeClaim(ctx, cluster, req, anyKey); err != nil {
			return err
		}
		if k.unkeyed {
			return judgeUnkeyed(cluster, anyKey)
		}
		return judgeKey(cluster, req, anyKey)
	}
	// A request refused for its key takes no place on its token: judged first
	// against the Cluster the cache has, and again against the one it registers into.
	cached, err := h.cachedCluster(req)
	if err != nil {
		return "", nil, err
	}
	if cached != nil {
		if err := judge(cached); err != nil {
			return "", nil, err
		}
	} else if token.Spec.RequireApproval && bound == "" {
		// A cluster new to the workspace waits for an admin, taking no place on the
		// token until approved.
		if err := h.judgeApproval(k, req, token); err != nil {
			return "", nil, err
		}
	}
	if err := h.countRegistration(token, req.Spec.ClientID); err != nil {
		return "", nil, err
	}
	cluster, existed, err := h.clusterFor(ctx, k, req, log)
	if err != nil {
		return "", nil, err
	}
	if err := judge(cluster); err != nil {
		return "", nil, err
	}
	if !k.unkeyed {
		if cluster, err = h.recordKey(cluster, req, existed); err != nil {
			return "", nil, err
		}
	}
	identity, err := h.issue(ctx, k, req, cluster, existed)
	if err != nil {
		return "", nil, err
	}
	if existed {
		if err := h.sweepCredentials(req.Spec.ClientID, req.Name); err != nil {
			return "", nil, err
		}
		// The one registration event on the Cluster itself: a new credential replaced
		// the one its agent had (a reinstall, or an agent that lost its identity).
		h.events.Eventf(cluster, corev1.EventTypeNormal, "Reregistered",
			"The agent registered again (%s %s, token %s); the credentials it had before were revoked", k.name, req.Name, tokenName)
	}
	return cluster.Name, identity, nil
}

// recover answers a request made in the per-cluster namespace of cluster, by its own
// identity (a certificate identity renewing itself) or its recovery identity (an
// agent whose identity expired). It is granted only when signed by the key the
// Cluster is bound to, after the last request that key signed; it never creates or
// claims a Cluster.
func (h *handler) recover(ctx context.Context, req *fleet.ClusterRegistrationRequest, cluster *fleet.Cluster) (string, *fleet.ClusterIdentity, error) {
	if err := verify(req); err != nil {
		return "", nil, err
	}
	if req.Spec.ClientID != cluster.Spec.ClientID {
		return "", nil, refuse("ClientIDMismatch", "Cluster %s/%s, whose namespace this is, has another clientID", cluster.Namespace, cluster.Name)
	}
	renewal := req.Annotations[names.RequestPurposeAnnotation] == registration.PurposeRenew && h.certificates()
	if h.settings.RecoveryTTL <= 0 && !renewal {
		return "", nil, refuse("RecoveryDisabled", "the hub recovers no expired identities (--cluster-recovery-ttl 0); register the cluster again with a ClusterRegistrationToken")
	}
	hasTokens, err := h.recoveryRevoked(ctx, req.Namespace, cluster)
	if err != nil {
		return "", nil, err
	}
	// Only the cluster's own identities may create requests in its namespace: a
	// Cluster with no key yet (registered before agent keys) is claimed here by its
	// own agent.
	if err := judgeKey(cluster, req, false); err != nil {
		return "", nil, err
	}
	bound := recordOf(cluster).Fingerprint == ""
	cluster, err = h.recordKey(cluster, req, true)
	if err != nil {
		return "", nil, err
	}
	// A certificate identity has no ServiceAccounts to replace: recoveryRevoked has
	// looked for them already.
	identity, err := h.issue(ctx, h.signed, req, cluster, hasTokens || !h.certificates())
	if err != nil {
		return "", nil, err
	}
	switch {
	case bound:
		h.events.Eventf(cluster, corev1.EventTypeNormal, "KeyBound",
			"The agent bound its key to the Cluster, which had none (registered by Fleet's agent, or before agent keys), and got a new identity (ClusterRegistrationRequest %s/%s); the credentials it had before were revoked",
			req.Namespace, req.Name)
	case renewal:
		// A renewal is routine: the request's status says it.
	default:
		h.events.Eventf(cluster, corev1.EventTypeNormal, "Recovered",
			"The agent proved its key and got a new identity (ClusterRegistrationRequest %s/%s); the credentials it had before were revoked", req.Namespace, req.Name)
	}
	return cluster.Name, identity, nil
}

// recoveryRevoked refuses a request from a cluster whose identity is a
// ServiceAccount token and whose recovery ServiceAccount an admin deleted: the API
// server may still accept a deleted ServiceAccount's token for a few seconds, and
// the revocation holds from the moment of the delete. A cluster whose identity is a
// certificate has neither ServiceAccount; the API server's identity authorizer
// refuses its certificates once it is revoked. It says whether the cluster has token
// ServiceAccounts.
func (h *handler) recoveryRevoked(ctx context.Context, namespace string, cluster *fleet.Cluster) (bool, error) {
	sas := h.kube.CoreV1().ServiceAccounts(namespace)
	_, err := sas.Get(ctx, names.AgentRecoveryServiceAccount, metav1.GetOptions{})
	if err == nil || !apierrors.IsNotFound(err) {
		return err == nil, err
	}
	if h.certificates() {
		if _, err := sas.Get(ctx, names.AgentIdentityServiceAccount, metav1.GetOptions{}); apierrors.IsNotFound(err) {
			return false, nil
		} else if err != nil {
			return false, err
		}
	}
	return false, &refusal{reason: "RecoveryRevoked", cluster: cluster, message: fmt.Sprintf(
		"the recovery ServiceAccount of Cluster %s/%s is gone (revoked); register the cluster again with a ClusterRegistrationToken", cluster.Namespace, cluster.Name)}
}

// certificates says whether the hub gives Flotilla's agents certificate identities.
func (h *handler) certificates() bool {
	return h.settings.Signer != nil && h.settings.APIServerAuthorizesIdentities
}

// issue gives cluster a new identity for req and answers req with it: certificates
// for the request's key, returned for the request's status, or a token, sealed (or
// in the clear to Fleet's agent, which cannot open a sealed answer) in a Secret.
func (h *handler) issue(ctx context.Context, k kind, req *fleet.ClusterRegistrationRequest, cluster *fleet.Cluster, existed bool) (*fleet.ClusterIdentity, error) {
	if !k.unkeyed && h.certificates() {
		return h.issueCertificates(ctx, req, cluster, existed)
	}
	return nil, h.issueToken(ctx, k, req, cluster, existed)
}

// issueCertificates signs the identity and recovery certificates of cluster for
// req's key, after making its namespace name that key, which revokes every
// certificate for another key. A cluster registered with a token before has its
// ServiceAccounts deleted, which revokes those tokens.
func (h *handler) issueCertificates(ctx context.Context, req *fleet.ClusterRegistrationRequest, cluster *fleet.Cluster, existed bool) (*fleet.ClusterIdentity, error) {
	clusterNS := clusterns.Name(cluster)
	var notOwned *clusterns.NotOwnedError
	if err := h.namespaces.EnsureKey(ctx, cluster, registration.Fingerprint(req.Spec.PublicKey)); errors.As(err, &notOwned) {
		return nil, &refusal{reason: clusterns.ReasonNotOwned, cluster: cluster, message: notOwned.Error()}
	} else if err != nil {
		return nil, err
	}
	if existed {
		if err := h.revokeTokens(ctx, clusterNS); err != nil {
			return nil, err
		}
	}
	now := time.Now()
	cert, err := h.settings.Signer.Issue(req.Spec.PublicKey, clusterNS, false, h.settings.ClusterTokenTTL, now)
	if err != nil {
		return nil, refuse("InvalidSignature", "%v", err)
	}
	identity := &fleet.ClusterIdentity{Certificate: string(cert), DeploymentNamespace: clusterNS}
	if h.settings.RecoveryTTL > 0 {
		recovery, err := h.settings.Signer.Issue(req.Spec.PublicKey, clusterNS, true, h.settings.RecoveryTTL, now)
		if err != nil {
			return nil, refuse("InvalidSignature", "%v", err)
		}
		identity.RecoveryCertificate = string(recovery)
	}
	if h.settings.AgentTokenRenewAfter > 0 {
		identity.RenewAfter = &metav1.Duration{Duration: h.settings.AgentTokenRenewAfter}
	}
	return identity, nil
}

// revokeTokens deletes the identity and recovery ServiceAccounts of a cluster that
// had token identities, if there are any.
func (h *handler) revokeTokens(ctx context.Context, clusterNS string) error {
	sas := h.kube.CoreV1().ServiceAccounts(clusterNS)
	for _, name := range []string{names.AgentIdentityServiceAccount, names.AgentRecoveryServiceAccount} {
		sa, err := sas.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return err
		}
		uid := sa.UID
		if err := sas.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("revoking the token identity %s/%s: %w", clusterNS, name, err)
		}
	}
	return nil
}

// issueToken gives cluster a new ServiceAccount token identity for req and answers
// req with it in a Secret.
func (h *handler) issueToken(ctx context.Context, k kind, req *fleet.ClusterRegistrationRequest, cluster *fleet.Cluster, existed bool) error {
	clusterNS := clusterns.Name(cluster)
	var notOwned *clusterns.NotOwnedError
	if err := h.namespaces.Ensure(ctx, cluster); errors.As(err, &notOwned) {
		return &refusal{reason: clusterns.ReasonNotOwned, cluster: cluster, message: notOwned.Error()}
	} else if err != nil {
		return err
	}
	if err := h.ensureIdentity(ctx, req, clusterNS, existed); err != nil {
		return err
	}
	if !h.settings.APIServerAuthorizesIdentities {
		rbac := registration.ClusterIdentity(cluster.Namespace, cluster.Name, clusterNS)
		if err := h.ensureIdentityRBAC(ctx, cluster, rbac); err != nil {
			return err
		}
	}

	ttl := h.settings.ClusterTokenTTL
	if k.unkeyed {
		ttl = h.settings.FleetAgentTokenTTL
	}
	seconds := int64(ttl.Seconds())
	tr, err := h.kube.CoreV1().ServiceAccounts(clusterNS).CreateToken(ctx, names.AgentIdentityServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for the identity of Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	cred := registration.Credential{
		Token:               tr.Status.Token,
		Issued:              registration.TokenIssued(tr.Status.ExpirationTimestamp.Time, seconds),
		Expires:             tr.Status.ExpirationTimestamp.Time,
		RenewAfter:          h.settings.AgentTokenRenewAfter,
		APIServerURL:        h.settings.APIServerURL,
		APIServerCA:         h.settings.APIServerCA,
		ClusterName:         cluster.Name,
		ClusterNamespace:    cluster.Namespace,
		DeploymentNamespace: clusterNS,
		ClientID:            req.Spec.ClientID,
		RecoveryLifetime:    h.settings.RecoveryTTL,
	}
	if k.unkeyed {
		// Fleet's agent reads token, clusterNamespace, clusterName and
		// deploymentNamespace, in the clear; the rest of the credential is beside them.
		return h.writeCredential(ctx, k, req, cluster, cred.SecretData())
	}
	sealed, err := registration.SealCredential(req.Spec.EncryptionKey, req.Spec.ClientID, req.Spec.ClientRandom, cred)
	var bad *registration.ProofError
	if errors.As(err, &bad) {
		return refuse("InvalidSignature", "%v", err)
	} else if err != nil {
		return fmt.Errorf("sealing the credential of Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	return h.writeCredential(ctx, k, req, cluster, map[string][]byte{registration.AnswerSealed: sealed})
}

// keptRefusedPerToken is how many refused requests of one token the hub keeps for
// their reasons to be read; beyond it, a refused request is deleted at once, so a
// token holder's flood costs the hub (and etcd) a bounded amount whatever its rate.
const keptRefusedPerToken = 100

// expire deletes an answered request, with the Secret that answered it, once it has
// been kept for RequestRetention since answered (its Ready condition), or at once when
// it was refused and its token has more refused requests than keptRefusedPerToken, and
// looks at it again then otherwise.
func (h *handler) expire(k kind, req *fleet.ClusterRegistrationRequest, answered *fleet.Condition) error {
	left := time.Duration(0)
	if answered != nil {
		left = answeredLeft(answered, h.settings.RequestRetention, time.Now())
	}
	if left > 0 && (req.Status.Granted || h.refusedOfToken(k, req) <= keptRefusedPerToken) {
		k.store.enqueueAfter(req.Namespace, req.Name, left)
		return nil
	}
	if hasAnswerSecret(k, req) {
		if err := h.deleteAnswer(answerNamespace(req), k.answerName(req), req.Name); err != nil {
			return err
		}
	}
	uid := req.UID
	err := k.store.delete(req.Namespace, req.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	return ignoreNotFound(err)
}

// hasAnswerSecret says whether the hub answered req, of kind k, with a Secret: a
// token credential. Certificates and refusals are answered in the request's status.
func hasAnswerSecret(k kind, req *fleet.ClusterRegistrationRequest) bool {
	return req.Status.Granted && (k.unkeyed || req.Status.Identity == nil)
}

// deleteAnswer deletes the answer Secret namespace/name if it was written for the
// request named request (a replayed clientRandom names another request's).
func (h *handler) deleteAnswer(namespace, name, request string) error {
	secrets := h.kube.CoreV1().Secrets(namespace)
	secret, err := secrets.Get(context.Background(), name, metav1.GetOptions{ResourceVersion: "0"})
	if err != nil || secret.Labels[names.RequestLabel] != request {
		return ignoreNotFound(err)
	}
	uid := secret.UID
	return ignoreNotFound(secrets.Delete(context.Background(), name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}))
}

// refusedOfToken counts the refused requests in the cache made with req's token.
func (h *handler) refusedOfToken(k kind, req *fleet.ClusterRegistrationRequest) int {
	refused, err := k.store.byIndex(refusedByToken, req.Namespace+"/"+req.Labels[names.RegistrationTokenLabel])
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

// answeredLeft is how long a request answered as cond says is still to be kept.
func answeredLeft(cond *fleet.Condition, retention time.Duration, now time.Time) time.Duration {
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

// cachedCluster is the Cluster with the request's clientID in its workspace, as the
// cache has it, or nil.
func (h *handler) cachedCluster(req *fleet.ClusterRegistrationRequest) (*fleet.Cluster, error) {
	matches, err := h.clusters.Cache().GetByIndex(ByClientID, req.Namespace+"/"+req.Spec.ClientID)
	if err != nil {
		return nil, err
	}
	switch len(matches) {
	case 0:
		return nil, nil
	case 1:
		return matches[0], nil
	default:
		return nil, refuse("AmbiguousClientID", "%d Clusters in namespace %s have clientID %q; give each cluster its own", len(matches), req.Namespace, req.Spec.ClientID)
	}
}

// clusterFor finds the Cluster with the request's clientID in its workspace or
// creates one; existed says whether it was there before.
func (h *handler) clusterFor(ctx context.Context, k kind, req *fleet.ClusterRegistrationRequest, log logrus.FieldLogger) (*fleet.Cluster, bool, error) {
	if cached, err := h.cachedCluster(req); err != nil || cached != nil {
		return cached, cached != nil, err
	}

	name := names.ClusterForClientID(req.Spec.ClientID)
	labels, dropped := clusterLabels(req.Spec.ClusterLabels)
	if len(dropped) > 0 {
		h.events.Eventf(k.store.object(req), corev1.EventTypeWarning, "LabelsDropped", "Labels not allowed on a Cluster were dropped: %v", dropped)
	}
	cluster := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: req.Namespace, Labels: labels, Finalizers: []string{names.ClusterFinalizer},
			// Bound to the key of the request that creates it, in the same write.
			Annotations: k.keyAnnotations(req),
		},
		Spec: fleet.ClusterSpec{ClientID: req.Spec.ClientID},
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
			_, err := h.kube.RbacV1().RoleBindings(rbac.RecoveryBinding.Namespace).Create(ctx, rbac.RecoveryBinding, metav1.CreateOptions{})
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

// answerSecret is the Secret that answers req with data: named by the request's
// clientID and clientRandom, readable by name by the token's ServiceAccount, and
// deletable by it alone (names.AnswerReaderAnnotation, checked by the admission
// policy flotilla-registration-answers) once its agent has read it.
func answerSecret(k kind, req *fleet.ClusterRegistrationRequest, data map[string][]byte) *corev1.Secret {
	labels := map[string]string{
		names.ManagedLabel: "true", names.RequestLabel: req.Name, names.RequestNamespaceLabel: req.Namespace,
		names.ClientIDHashLabel: names.ClientIDHash(req.Spec.ClientID),
	}
	if k.unkeyed {
		labels[names.RequestKindLabel] = k.name
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: k.answerName(req), Namespace: answerNamespace(req),
			Labels: labels,
			Annotations: map[string]string{
				names.AnswerReaderAnnotation: serviceaccount.MakeUsername(req.Namespace, names.TokenServiceAccount(req.Labels[names.RegistrationTokenLabel])),
			},
		},
		Type: names.CredentialSecretType,
		Data: data,
	}
}

// writeCredential creates the credential Secret holding data.
func (h *handler) writeCredential(ctx context.Context, k kind, req *fleet.ClusterRegistrationRequest, cluster *fleet.Cluster, data map[string][]byte) error {
	secret := answerSecret(k, req, data)
	secret.Labels[names.ClusterLabel] = cluster.Name
	secret.Labels[names.ClusterNamespaceLabel] = cluster.Namespace
	name := secret.Name
	secrets := h.kube.CoreV1().Secrets(secret.Namespace)
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
func (h *handler) removeOlderRequests(k kind, req *fleet.ClusterRegistrationRequest) error {
	return h.removeOlder(k, req, func(*fleet.ClusterRegistrationRequest) bool { return true })
}

// removeOlder deletes the other requests of req's clientID in its workspace that are
// older than req and match, with what removeOlderRequests deletes with them.
func (h *handler) removeOlder(k kind, req *fleet.ClusterRegistrationRequest, match func(*fleet.ClusterRegistrationRequest) bool) error {
	others, err := k.store.byIndex(ByClientID, req.Namespace+"/"+req.Spec.ClientID)
	if err != nil {
		return err
	}
	var errs []error
	for _, other := range others {
		// Only older ones: a newer request may be waiting for its answer.
		if other.Name == req.Name || !older(other, req) || !match(other) {
			continue
		}
		if hasAnswerSecret(k, other) {
			errs = append(errs, h.deleteAnswer(answerNamespace(other), k.answerName(other), other.Name))
		}
		uid := other.UID
		errs = append(errs,
			ignoreNotFound(k.store.delete(other.Namespace, other.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})),
		)
	}
	return errors.Join(errs...)
}

// older says whether request a was made before b: by when they were signed, to the
// microsecond, or else by when they were created.
func older(a, b *fleet.ClusterRegistrationRequest) bool {
	if a.Spec.SignedAt != nil && b.Spec.SignedAt != nil {
		return a.Spec.SignedAt.Before(b.Spec.SignedAt)
	}
	return a.CreationTimestamp.Before(&b.CreationTimestamp)
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

// verify checks req's signature and encryption key, and that it was not signed
// further in the future than clocks drift.
func verify(req *fleet.ClusterRegistrationRequest) error {
	if err := registration.VerifyProof(req); err != nil {
		return refuse("InvalidSignature", "%v", err)
	}
	if registration.SignedInTheFuture(req, time.Now()) {
		return refuse("SignedInTheFuture", "the request was signed at %s, ahead of the hub's clock by more than clocks drift; set the agent's clock right",
			req.Spec.SignedAt.UTC().Format(time.RFC3339))
	}
	return nil
}

// judgeClaim refuses a token's request to claim a Cluster that has no key recorded
// but is registered already (its identity exists): one registered by an agent older
// than keys, which records its key itself, through its own identity, when it
// upgrades. A predefined Cluster, never registered, is claimed by its first
// registration; a token bound to the Cluster may always claim it.
func (h *handler) judgeClaim(ctx context.Context, cluster *fleet.Cluster, req *fleet.ClusterRegistrationRequest, boundToken bool) error {
	if recordOf(cluster).Fingerprint != "" || boundToken {
		return nil
	}
	_, err := h.kube.CoreV1().ServiceAccounts(clusterns.Name(cluster)).Get(ctx, names.AgentIdentityServiceAccount, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	return &refusal{reason: "KeyNotRecorded", cluster: cluster, message: fmt.Sprintf(
		"Cluster %s/%s is registered but has no agent key recorded (its agent registered before agent keys). "+
			"If this is the same cluster, allow it: create a ClusterRegistrationToken in namespace %s with label %s=%s and a short ttl, "+
			"and install the agent with that token's values.yaml", cluster.Namespace, cluster.Name, cluster.Namespace, names.ClusterLabel, cluster.Name),
		answer: "this clientID's Cluster is registered but has no agent key recorded (its agent registered before agent keys). " + allowWithABoundToken}
}

// keyRecord is what a Cluster records of its agent's key, in two annotations the hub
// writes (names.AgentKeyAnnotation, names.AgentKeyProofAnnotation): the key's
// fingerprint, and the last request that proved it with its signing time.
type keyRecord struct {
	Fingerprint string
	Request     string
	SignedAt    time.Time
}

// recordOf reads cluster's key record; an empty Fingerprint means none.
func recordOf(cluster *fleet.Cluster) keyRecord {
	r := keyRecord{Fingerprint: cluster.Annotations[names.AgentKeyAnnotation]}
	if request, signed, ok := strings.Cut(cluster.Annotations[names.AgentKeyProofAnnotation], " "); ok {
		r.Request = request
		r.SignedAt, _ = time.Parse(metav1.RFC3339Micro, signed)
	}
	return r
}

// annotations are the annotations that record req's key on its Cluster.
func (r keyRecord) annotations() map[string]string {
	return map[string]string{
		names.AgentKeyAnnotation:      r.Fingerprint,
		names.AgentKeyProofAnnotation: r.Request + " " + r.SignedAt.UTC().Format(metav1.RFC3339Micro),
	}
}

// same says whether r and o record the same proof of the same key.
func (r keyRecord) same(o keyRecord) bool {
	return r.Fingerprint == o.Fingerprint && r.Request == o.Request && r.SignedAt.Equal(o.SignedAt)
}

// recordFor is the record of a Cluster whose key req proves. It names the request
// by UID: a name can be used again once the request is deleted.
func recordFor(req *fleet.ClusterRegistrationRequest) keyRecord {
	return keyRecord{Fingerprint: registration.Fingerprint(req.Spec.PublicKey), Request: string(req.UID), SignedAt: req.Spec.SignedAt.Time}
}

// judgeKey decides whether req may register into cluster as far as the cluster's
// agent key goes. A Cluster with no key recorded (predefined, or registered by an
// agent older than keys) is claimed by the key of this request. One with a key
// accepts a request signed with that key, signed after the last one it accepted; a
// different key only with a token bound to the Cluster, which is how an admin allows
// an agent that lost its key to register again.
func judgeKey(cluster *fleet.Cluster, req *fleet.ClusterRegistrationRequest, boundToken bool) error {
	recorded, asked := recordOf(cluster), registration.Fingerprint(req.Spec.PublicKey)
	switch {
	case recorded.Fingerprint == "":
		return nil
	case recorded.Fingerprint != asked && boundToken:
		return nil
	case recorded.Fingerprint != asked:
		return &refusal{reason: "KeyMismatch", cluster: cluster, message: fmt.Sprintf(
			"Cluster %s/%s is bound to the key its agent registered with (%s) and this request is signed with another (%s). "+
				"If it is the same cluster and its agent lost its key, allow it: create a ClusterRegistrationToken with a short ttl in namespace %s "+
				"with label %s=%s and install the agent with that token's values.yaml (or delete the Cluster to register the cluster as new)",
			cluster.Namespace, cluster.Name, recorded.Fingerprint, asked, cluster.Namespace, names.ClusterLabel, cluster.Name),
			answer: "this clientID's Cluster is bound to the key its agent registered with, and this request is signed with another. " +
				allowWithABoundToken + "; or a hub admin deletes the Cluster to register the cluster as new"}
	case recorded.Request != "" && recorded.Request == string(req.UID):
		// A retry of the request that recorded it.
		return nil
	case !req.Spec.SignedAt.After(recorded.SignedAt):
		return &refusal{reason: "StaleSignature", cluster: cluster, message: fmt.Sprintf(
			"the request was signed at %s, not after the request (UID %s, signed at %s) that Cluster %s/%s last accepted: a replayed request, or the agent's clock went back",
			req.Spec.SignedAt.UTC().Format(time.RFC3339Nano), recorded.Request, recorded.SignedAt.UTC().Format(time.RFC3339Nano), cluster.Namespace, cluster.Name),
			answer: fmt.Sprintf("the request was signed at %s, not after the last request this clientID's Cluster accepted: a replayed request, or the agent's clock went back",
				req.Spec.SignedAt.UTC().Format(time.RFC3339Nano))}
	default:
		return nil
	}
}

// recordKey records req's key on cluster, as of the resourceVersion judgeKey saw, so
// a request judged on a stale copy is retried, and returns the Cluster as written. A
// Cluster the hub created for req records it from the start; a patch of the two
// annotations leaves everything else alone. existed says cluster was not just
// created by this request.
func (h *handler) recordKey(cluster *fleet.Cluster, req *fleet.ClusterRegistrationRequest, existed bool) (*fleet.Cluster, error) {
	if !existed && recordOf(cluster).same(recordFor(req)) {
		// Just created by this request, with the record: nothing to write. A Cluster
		// from the cache is always written, with its resourceVersion, so a record
		// read from a stale copy cannot pass.
		return cluster, nil
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"resourceVersion": cluster.ResourceVersion, "annotations": recordFor(req).annotations()},
	})
	if err != nil {
		return nil, err
	}
	updated, err := h.clusters.Patch(cluster.Namespace, cluster.Name, types.MergePatchType, patch)
	if err != nil {
		return nil, fmt.Errorf("recording the agent key on Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	return updated, nil
}
