package registration

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla/flotilla/pkg/names"
)

// An agent whose identity token expired while it could not reach the hub comes back
// by itself: it authenticates with its recovery token, which may do nothing but
// create a request in the cluster's per-cluster namespace and read the answer there,
// and the hub grants that request only when it is signed by the key the Cluster is
// bound to. A Cluster that was deleted (with its namespace and recovery
// ServiceAccount) or whose recovery ServiceAccount an admin deleted never comes back
// this way.

// The purposes of a request an agent makes in its per-cluster namespace
// (names.RequestPurposeAnnotation): they change nothing but the event the Cluster
// records.
const (
	PurposeRenew   = "renew"
	PurposeRecover = "recover"
)

// ErrNoRecovery says an expired identity cannot be recovered without a person.
type ErrNoRecovery struct{ Why string }

func (e *ErrNoRecovery) Error() string { return e.Why }

// Recover gets a new identity for the cluster of cred, whose token has expired,
// proving the agent's key with the recovery token, and stores it downstream.
func Recover(ctx context.Context, d Downstream, cred Credential, log logrus.FieldLogger) (*Credential, error) {
	if !cred.CanRecover(time.Now()) {
		return nil, &ErrNoRecovery{Why: cred.ExpiredAdvice()}
	}
	key, found, err := d.existingKey(ctx)
	if err != nil {
		return nil, err
	}
	if !found {
		return nil, &ErrNoRecovery{Why: "the agent's key is gone from Secret " + d.Namespace + "/" + names.AgentIdentitySecret + ", so it cannot prove it is this cluster; " + cred.ExpiredAdvice()}
	}
	cfg, err := d.recoveryConfig(cred, key)
	if err != nil {
		return nil, err
	}
	renewed, err := proveKey(ctx, d, cred, key, cfg, PurposeRecover, log, "The cluster's identity expired; asked the hub for a new one, proving the agent's key")
	if denied(err) {
		return nil, noRecovery(cred, err)
	}
	if err != nil {
		return nil, err
	}
	log.WithField("expires", renewed.Expires.UTC().Format(time.RFC3339)).Info("Recovered the cluster's identity")
	return renewed, nil
}

// proveKey asks the hub for a new identity of cred's Cluster in a request signed by
// key, made in the cluster's per-cluster namespace as the client cfg authenticates
// (the cluster's identity or recovery certificate, or its recovery token), and stores
// what it is given downstream. A token credential keeps cred's recovery token; the
// next renewal refreshes it. It returns a *deniedError when the hub refuses the
// request's creation and a *RefusedError when it refuses the request.
func proveKey(ctx context.Context, d Downstream, cred Credential, key AgentKey, cfg *rest.Config, purpose string, log logrus.FieldLogger, asked string) (*Credential, error) {
	hub, err := newExchange(cfg, cred.DeploymentNamespace)
	if err != nil {
		return nil, err
	}
	request, opener, err := NewRequest(cred.DeploymentNamespace, "", cred.ClientID, nil, key)
	if err != nil {
		return nil, err
	}
	request.Annotations = map[string]string{names.RequestPurposeAnnotation: purpose}
	created, err := hub.fleet.FleetV1alpha1().ClusterRegistrationRequests(cred.DeploymentNamespace).Create(ctx, request, metav1.CreateOptions{})
	if apierrors.IsUnauthorized(err) || apierrors.IsForbidden(err) {
		return nil, &deniedError{err: err}
	}
	if err != nil {
		return nil, Explain("asking the hub for a new identity", cred.APIServerURL, err)
	}
	log.WithField("request", cred.DeploymentNamespace+"/"+created.Name).Debug(asked)

	renewed, err := hub.answer(ctx, request, opener, key, cred, log)
	if err != nil {
		return nil, err
	}
	renewed.ClientID = cred.ClientID
	if !renewed.HasCertificate() {
		renewed.RecoveryToken, renewed.RecoveryExpires = cred.RecoveryToken, cred.RecoveryExpires
	}
	if err := d.StoreIdentity(ctx, renewed); err != nil {
		return nil, err
	}
	hub.pickedUp(ctx, request, renewed, log)
	return &renewed, nil
}

// recoveryConfig is a client of the hub as cred's recovery identity.
func (d Downstream) recoveryConfig(cred Credential, key AgentKey) (*rest.Config, error) {
	if len(cred.RecoveryCertificate) == 0 {
		return d.hubConfig(cred.APIServerURL, string(cred.APIServerCA), cred.RecoveryToken)
	}
	as := cred
	as.Certificate = cred.RecoveryCertificate
	cfg, _, err := as.clientFor(key, d.HubProxy)
	return cfg, err
}

// deniedError is the hub's API refusing the recovery credential.
type deniedError struct{ err error }

func (e *deniedError) Error() string { return e.err.Error() }

// denied says whether err is the hub refusing a request or its creation.
func denied(err error) bool {
	var (
		d       *deniedError
		refused *RefusedError
	)
	return errors.As(err, &d) || errors.As(err, &refused)
}

// ErrNoClaim says the hub will not let the agent bind its key to the Cluster Fleet's
// agent registered: the agent carries on with Fleet's agent's credential.
type ErrNoClaim struct{ Why string }

func (e *ErrNoClaim) Error() string { return e.Why }

// claimRecoverySeconds is the lifetime of the recovery token a claim asks for: the
// least a TokenRequest gives, as it is used at once.
const claimRecoverySeconds = 600

// Claim binds the agent's key to the Cluster that Fleet's agent registered, whose
// identity cred is (read from Fleet's agent's Secret): with that identity it mints a
// recovery token, as every agent does when it renews, and with it asks for a new
// identity in a request signed by the agent's key, which the hub records on the
// Cluster, as it has none. The new identity, in Flotilla's form with a recovery token
// of the hub's lifetime, replaces Fleet's agent's in the fleet-agent Secret; the hub
// revokes Fleet's agent's token. An *ErrNoClaim says the hub will not (recovery off,
// or the Cluster bound to another key); other errors are worth a retry.
func Claim(ctx context.Context, d Downstream, cred Credential, log logrus.FieldLogger) (*Credential, error) {
	if cred.ClientID == "" {
		settings, err := d.Settings(ctx)
		if err != nil {
			return nil, err
		}
		if cred.ClientID, err = d.ClientID(ctx, settings); err != nil {
			return nil, err
		}
	}
	key, err := d.Key(ctx)
	if err != nil {
		return nil, err
	}
	identity, err := d.tokenExchange(cred.APIServerURL, string(cred.APIServerCA), cred.Token, cred.DeploymentNamespace)
	if err != nil {
		return nil, err
	}
	cred.RecoveryLifetime = claimRecoverySeconds * time.Second
	withRecovery, _, err := refreshRecovery(ctx, identity.kube, cred)
	if apierrors.IsForbidden(err) || apierrors.IsInvalid(err) {
		return nil, &ErrNoClaim{Why: fmt.Sprintf("the hub does not let this agent bind its key to Cluster %s/%s (%v): it carries on with the credential Fleet's agent had", cred.ClusterNamespace, cred.ClusterName, err)}
	}
	if err != nil {
		return nil, err
	}
	recovery, err := d.recoveryConfig(withRecovery, key)
	if err != nil {
		return nil, err
	}
	claimed, err := proveKey(ctx, d, withRecovery, key, recovery, PurposeRecover, log, "Binding the agent's key to the Cluster Fleet's agent registered")
	if denied(err) {
		return nil, &ErrNoClaim{Why: fmt.Sprintf("the hub refused to bind this agent's key to Cluster %s/%s (%v): it carries on with the credential Fleet's agent had", cred.ClusterNamespace, cred.ClusterName, err)}
	}
	if err != nil {
		return nil, err
	}
	// A recovery token of the hub's lifetime, so that the agent can come back by itself
	// from the start; failing that, the first renewal gets one. A certificate identity
	// came with its recovery certificate.
	if claimed.HasCertificate() {
		log.WithField("expires", claimed.Expires.UTC().Format(time.RFC3339)).Info("The agent's key is bound to the Cluster; Fleet's agent's credential is replaced")
		return claimed, nil
	}
	if current, err := d.tokenExchange(claimed.APIServerURL, string(claimed.APIServerCA), claimed.Token, claimed.DeploymentNamespace); err == nil {
		if refreshed, changed, err := refreshRecovery(ctx, current.kube, *claimed); err != nil {
			log.WithError(err).Warn("Could not get a recovery credential; the first renewal will")
		} else if changed {
			if err := d.StoreIdentity(ctx, refreshed); err != nil {
				log.WithError(err).Warn("Could not store the recovery credential; the first renewal will")
			} else {
				claimed = &refreshed
			}
		}
	}
	log.WithField("expires", claimed.Expires.UTC().Format(time.RFC3339)).Info("The agent's key is bound to the Cluster; Fleet's agent's credential is replaced")
	return claimed, nil
}

// noRecovery is the one line an agent logs when the hub will not give its expired
// identity back: why, and what a person must do.
func noRecovery(cred Credential, why error) *ErrNoRecovery {
	return &ErrNoRecovery{Why: fmt.Sprintf("the hub no longer accepts this cluster's recovery credential (%v): the Cluster %s/%s was deleted or its recovery revoked, "+
		"or the agent was offline for longer than the hub's --cluster-recovery-ttl. %s", why, cred.ClusterNamespace, cred.ClusterName, cred.ExpiredAdvice())}
}

// existingKey is the agent's stored key, if it has one; unlike Key it makes none.
func (d Downstream) existingKey(ctx context.Context) (AgentKey, bool, error) {
	secret, err := d.Client.CoreV1().Secrets(d.Namespace).Get(ctx, names.AgentIdentitySecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return AgentKey{}, false, nil
	}
	if err != nil {
		return AgentKey{}, false, fmt.Errorf("reading Secret %s/%s: %w", d.Namespace, names.AgentIdentitySecret, err)
	}
	if len(secret.Data[agentKeyField]) == 0 {
		return AgentKey{}, false, nil
	}
	key, err := ParseAgentKey(secret.Data[agentKeyField])
	return key, err == nil, err
}

// refreshRecovery gives cred a fresh recovery token, with every renewal of its
// identity, so that an agent may be offline for nearly the whole recovery lifetime
// and still come back: a TokenRequest (which stores nothing), as the cluster
// identity, for the
// cluster's recovery ServiceAccount, which the identity creates first if it is not
// there (the hub does not make it at registration, so a registration costs nothing
// more; an admission policy lets the identity create that ServiceAccount only).
func refreshRecovery(ctx context.Context, hub kubernetes.Interface, cred Credential) (Credential, bool, error) {
	if cred.RecoveryLifetime <= 0 {
		return cred, false, nil
	}
	sas := hub.CoreV1().ServiceAccounts(cred.DeploymentNamespace)
	seconds := int64(cred.RecoveryLifetime.Seconds())
	request := func() (*authenticationv1.TokenRequest, error) {
		return sas.CreateToken(ctx, names.AgentRecoveryServiceAccount,
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	}
	tr, err := request()
	if apierrors.IsNotFound(err) {
		_, err = sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: names.AgentRecoveryServiceAccount}}, metav1.CreateOptions{})
		if err == nil || apierrors.IsAlreadyExists(err) {
			tr, err = request()
		}
	}
	if err != nil {
		return cred, false, Explain("getting the cluster's recovery credential", cred.APIServerURL, err)
	}
	cred.RecoveryToken, cred.RecoveryExpires = tr.Status.Token, tr.Status.ExpirationTimestamp.Time
	return cred, true, nil
}
