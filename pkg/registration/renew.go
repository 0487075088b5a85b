package registration

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/oauth2"
	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla/flotilla/pkg/names"
)

// TokenSource hands the current identity token to every request an agent's hub
// clients make, so a renewed token takes effect without rebuilding the clients.
type TokenSource struct {
	mu    sync.RWMutex
	token string
}

// NewTokenSource starts with token.
func NewTokenSource(token string) *TokenSource { return &TokenSource{token: token} }

// Token implements oauth2.TokenSource.
func (t *TokenSource) Token() (*oauth2.Token, error) {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return &oauth2.Token{AccessToken: t.token, TokenType: "Bearer"}, nil
}

// Set replaces the token for the requests that follow.
func (t *TokenSource) Set(token string) {
	t.mu.Lock()
	t.token = token
	t.mu.Unlock()
}

// ExpiredAdvice tells the user what to do about an identity that expired while the
// agent could not renew it.
func (c Credential) ExpiredAdvice() string {
	return fmt.Sprintf("the cluster credential of Cluster %s/%s expired at %s, probably because the agent could not reach the hub for longer than its lifetime. "+
		"To register this cluster again, create a ClusterRegistrationToken in namespace %s on the hub and run "+
		"`helm -n %s upgrade fleet-agent <agent chart> --reuse-values --values values.yaml` with its values.yaml "+
		"(for a cluster the hub imported, raise spec.redeployAgentGeneration of the Cluster instead)",
		c.ClusterNamespace, c.ClusterName, c.Expires.UTC().Format(time.RFC3339), c.ClusterNamespace, names.SystemNamespace)
}

// Renewer replaces an agent's identity before it expires, using the identity itself,
// and stores each new one downstream: a certificate identity asks for the next with a
// request signed by the agent's key in its per-cluster namespace; a token identity
// makes a TokenRequest for its own ServiceAccount, which is all its RBAC allows.
type Renewer struct {
	Downstream Downstream
	Hub        kubernetes.Interface
	// HubConfig is the client configuration of Hub, authenticated by Auth.
	HubConfig *rest.Config
	Auth      *HubAuth
	Log       logrus.FieldLogger
	// OnRenew, if set, is called with each renewed credential.
	OnRenew func(Credential)
}

// Run renews cred at its RenewAt time, again and again, until ctx ends.
func (r *Renewer) Run(ctx context.Context, cred Credential) {
	for {
		if !sleepUntil(ctx, cred.RenewAt()) {
			return
		}
		renewed, ok := r.renewWithRetry(ctx, cred)
		if !ok {
			return
		}
		cred = renewed
	}
}

func (r *Renewer) renewWithRetry(ctx context.Context, cred Credential) (Credential, bool) {
	backoff := wait.Backoff{Duration: 2 * time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 5 * time.Minute}
	lastAdvice := ""
	for {
		renewed, err := r.renew(ctx, cred)
		if err == nil {
			return renewed, true
		}
		if cred.Expired(time.Now()) && lastAdvice == "" {
			// Too late to renew: the recovery token and the agent's key may still
			// bring the identity back without a person. Once the hub has said no,
			// only a person helps (a new bootstrap Secret starts a new session).
			recovered, recoverErr := Recover(ctx, r.Downstream, cred, r.Log)
			if recoverErr == nil {
				if err := r.Auth.Set(*recovered); err != nil {
					r.Log.WithError(err).Error("Cannot use the recovered identity")
				}
				if r.OnRenew != nil {
					r.OnRenew(*recovered)
				}
				return *recovered, true
			}
			var final *ErrNoRecovery
			if errors.As(recoverErr, &final) {
				// What a person must do, said once.
				r.Log.Error(final.Why)
				lastAdvice = final.Why
			} else {
				r.Log.WithError(recoverErr).Warn("Could not recover the expired cluster credential; will retry")
			}
		} else if lastAdvice == "" {
			r.Log.WithError(err).WithField("expires", cred.Expires.UTC().Format(time.RFC3339)).Warn("Could not renew the cluster credential; will retry")
		}
		if !sleepUntil(ctx, time.Now().Add(backoff.Step())) {
			return cred, false
		}
	}
}

func (r *Renewer) renew(ctx context.Context, cred Credential) (Credential, error) {
	if cred.HasCertificate() {
		return r.renewCertificate(ctx, cred)
	}
	seconds := cred.RequestSeconds()
	tr, err := r.Hub.CoreV1().ServiceAccounts(cred.DeploymentNamespace).CreateToken(ctx, names.AgentIdentityServiceAccount,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
	if err != nil {
		return cred, Explain("renewing the cluster credential", cred.APIServerURL, err)
	}
	renewed := cred
	renewed.Token = tr.Status.Token
	renewed.Expires = tr.Status.ExpirationTimestamp.Time
	renewed.Issued = TokenIssued(renewed.Expires, seconds)
	if refreshed, changed, err := refreshRecovery(ctx, r.Hub, renewed); err != nil {
		r.Log.WithError(err).Warn("Could not get a recovery credential; an expired identity will need a person until the next renewal gets one")
	} else if changed {
		renewed = refreshed
	}
	// The new token is used at once; storing it is retried by the next renewal if the
	// downstream API is briefly unavailable.
	if err := r.Auth.Set(renewed); err != nil {
		return cred, err
	}
	if err := r.Downstream.StoreIdentity(ctx, renewed); err != nil {
		r.Log.WithError(err).Warn("Renewed the cluster credential but could not store it downstream")
	}
	r.Log.WithFields(logrus.Fields{"expires": renewed.Expires.UTC().Format(time.RFC3339), "next": renewed.RenewAt().UTC().Format(time.RFC3339)}).
		Info("Renewed the cluster credential")
	if r.OnRenew != nil {
		r.OnRenew(renewed)
	}
	return renewed, nil
}

// renewCertificate asks for the next certificates with a request signed by the
// agent's key, as the current identity, and uses them at once.
func (r *Renewer) renewCertificate(ctx context.Context, cred Credential) (Credential, error) {
	key, found, err := r.Downstream.existingKey(ctx)
	if err != nil {
		return cred, err
	}
	if !found {
		return cred, fmt.Errorf("the agent's key is gone from Secret %s/%s", r.Downstream.Namespace, names.AgentIdentitySecret)
	}
	renewed, err := proveKey(ctx, r.Downstream, cred, key, r.HubConfig, PurposeRenew, r.Log, "Asked the hub for the next identity certificate")
	if err != nil {
		return cred, err
	}
	if err := r.Auth.Set(*renewed); err != nil {
		return cred, err
	}
	r.Log.WithFields(logrus.Fields{"expires": renewed.Expires.UTC().Format(time.RFC3339), "next": renewed.RenewAt().UTC().Format(time.RFC3339)}).
		Info("Renewed the cluster credential")
	if r.OnRenew != nil {
		r.OnRenew(*renewed)
	}
	return *renewed, nil
}

// sleepUntil waits until t or ctx's end, and says whether t was reached.
func sleepUntil(ctx context.Context, t time.Time) bool {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-timer.C:
		return true
	}
}
