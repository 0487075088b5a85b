package registration

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// Credential is a cluster's identity on the hub: what the hub grants a request in a
// credential Secret, and what the agent keeps in its downstream fleet-agent Secret.
// Both Secrets use the same keys.
type Credential struct {
	// Token is a bound ServiceAccount token of the cluster's identity, on hubs that
	// hand out tokens; empty when the identity is Certificate.
	Token string
	// Certificate is the identity's x509 client certificate (PEM) for the agent's
	// key, on hubs that sign them.
	Certificate []byte
	// RecoveryCertificate is the recovery identity's certificate for the same key.
	RecoveryCertificate []byte
	// Expires is when Token or Certificate stops working.
	Expires time.Time
	// RenewAfter is how long after it was issued the agent replaces Token; zero means
	// when half its lifetime has passed.
	RenewAfter time.Duration
	// APIServerURL and APIServerCA reach the hub.
	APIServerURL string
	APIServerCA  []byte
	// ClusterName and ClusterNamespace name the Cluster (ClusterNamespace is its
	// workspace).
	ClusterName      string
	ClusterNamespace string
	// DeploymentNamespace is the per-cluster namespace holding the cluster's
	// BundleDeployments and its identity ServiceAccount.
	DeploymentNamespace string
	// ClientID is the clientID the cluster registered with.
	ClientID string
	// Issued is when Token was issued.
	Issued time.Time
	// RecoveryToken is a token of the cluster's recovery ServiceAccount, which may
	// only ask for a new identity with a request signed by the agent's key; it lets
	// an agent whose Token expired come back by itself. Empty when the hub hands out
	// none.
	RecoveryToken string
	// RecoveryExpires is when RecoveryToken stops working.
	RecoveryExpires time.Time
	// RecoveryLifetime is how long a recovery token the agent asks for should last;
	// zero when the hub hands out none.
	RecoveryLifetime time.Duration
	// KeyUnbound says the agent's key is not bound to the Cluster yet: the credential
	// is the one Fleet's agent had (or a renewal of it), and the agent asks the hub to
	// bind its key (Claim) each time it starts.
	KeyUnbound bool
}

// Keys of a credential Secret.
const (
	credToken               = "token"
	credExpires             = "expires"
	credRenewAfter          = "renewAfter"
	credAPIServerURL        = "apiServerURL"
	credAPIServerCA         = "apiServerCA"
	credClusterName         = "clusterName"
	credClusterNamespace    = "clusterNamespace"
	credDeploymentNamespace = "deploymentNamespace"
	credClientID            = "clientID"
	credIssued              = "issued"
	credRecoveryToken       = "recoveryToken"
	credRecoveryExpires     = "recoveryExpires"
	credRecoveryLifetime    = "recoveryLifetime"
	credKeyUnbound          = "keyUnbound"
	credCertificate         = "certificate"
	credRecoveryCertificate = "recoveryCertificate"
)

// SecretData encodes c for a Secret.
func (c Credential) SecretData() map[string][]byte {
	data := map[string][]byte{
		credExpires:             []byte(c.Expires.UTC().Format(time.RFC3339)),
		credAPIServerURL:        []byte(c.APIServerURL),
		credAPIServerCA:         c.APIServerCA,
		credClusterName:         []byte(c.ClusterName),
		credClusterNamespace:    []byte(c.ClusterNamespace),
		credDeploymentNamespace: []byte(c.DeploymentNamespace),
		credClientID:            []byte(c.ClientID),
	}
	if c.Token != "" {
		data[credToken] = []byte(c.Token)
	}
	if len(c.Certificate) > 0 {
		data[credCertificate] = c.Certificate
	}
	if len(c.RecoveryCertificate) > 0 {
		data[credRecoveryCertificate] = c.RecoveryCertificate
		data[credRecoveryExpires] = []byte(c.RecoveryExpires.UTC().Format(time.RFC3339))
	}
	if c.RenewAfter > 0 {
		data[credRenewAfter] = []byte(c.RenewAfter.String())
	}
	if !c.Issued.IsZero() {
		data[credIssued] = []byte(c.Issued.UTC().Format(time.RFC3339))
	}
	if c.RecoveryLifetime > 0 {
		data[credRecoveryLifetime] = []byte(c.RecoveryLifetime.String())
	}
	if c.KeyUnbound {
		data[credKeyUnbound] = []byte("true")
	}
	if c.RecoveryToken != "" {
		data[credRecoveryToken] = []byte(c.RecoveryToken)
		data[credRecoveryExpires] = []byte(c.RecoveryExpires.UTC().Format(time.RFC3339))
	}
	return data
}

// CredentialFromSecretData decodes a credential Secret.
func CredentialFromSecretData(data map[string][]byte) (Credential, error) {
	c := Credential{
		Token:               string(data[credToken]),
		APIServerURL:        string(data[credAPIServerURL]),
		APIServerCA:         data[credAPIServerCA],
		ClusterName:         string(data[credClusterName]),
		ClusterNamespace:    string(data[credClusterNamespace]),
		DeploymentNamespace: string(data[credDeploymentNamespace]),
		ClientID:            string(data[credClientID]),
		RecoveryToken:       string(data[credRecoveryToken]),
		KeyUnbound:          string(data[credKeyUnbound]) == "true",
		Certificate:         data[credCertificate],
		RecoveryCertificate: data[credRecoveryCertificate],
	}
	var missing []string
	if c.Token == "" && len(c.Certificate) == 0 {
		missing = append(missing, credToken+" or "+credCertificate)
	}
	for key, value := range map[string]string{
		credAPIServerURL: c.APIServerURL, credClusterName: c.ClusterName,
		credClusterNamespace: c.ClusterNamespace, credDeploymentNamespace: c.DeploymentNamespace,
	} {
		if value == "" {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("credential lacks %s", strings.Join(slices.Sorted(slices.Values(missing)), ", "))
	}
	for key, field := range map[string]*time.Time{credExpires: &c.Expires, credIssued: &c.Issued, credRecoveryExpires: &c.RecoveryExpires} {
		if raw := data[key]; len(raw) > 0 {
			t, err := time.Parse(time.RFC3339, string(raw))
			if err != nil {
				return c, fmt.Errorf("credential %s %q: %w", key, raw, err)
			}
			*field = t
		}
	}
	for key, field := range map[string]*time.Duration{credRenewAfter: &c.RenewAfter, credRecoveryLifetime: &c.RecoveryLifetime} {
		if raw := data[key]; len(raw) > 0 {
			d, err := time.ParseDuration(string(raw))
			if err != nil {
				return c, fmt.Errorf("credential %s %q: %w", key, raw, err)
			}
			*field = d
		}
	}
	return c, nil
}

// ErrExpired says a credential's token has expired.
var ErrExpired = errors.New("the cluster credential has expired")

// Expired says whether c's token has expired at now.
func (c Credential) Expired(now time.Time) bool {
	return !c.Expires.IsZero() && now.After(c.Expires)
}

// CanRecover says whether c holds a recovery token or certificate still valid at now.
func (c Credential) CanRecover(now time.Time) bool {
	return (c.RecoveryToken != "" || len(c.RecoveryCertificate) > 0) && (c.RecoveryExpires.IsZero() || now.Before(c.RecoveryExpires))
}

// HasCertificate says whether c's identity is a client certificate.
func (c Credential) HasCertificate() bool { return len(c.Certificate) > 0 }

// Lifetime is how long the token lasts from its issue, for asking for the next one.
func (c Credential) Lifetime() time.Duration {
	if c.Expires.IsZero() || c.Issued.IsZero() || !c.Expires.After(c.Issued) {
		return 24 * time.Hour
	}
	return c.Expires.Sub(c.Issued)
}

// RequestSeconds is the lifetime to ask the next token for: Lifetime in seconds, less
// up to 30 seconds to a whole minute, so that the seconds a credential's times were
// rounded to, or a clock between hub and agent added, never ask for more than the hub
// gives (an admission policy refuses that).
func (c Credential) RequestSeconds() int64 {
	seconds := int64(c.Lifetime() / time.Second)
	if over := seconds % 60; over <= 30 && seconds-over >= 60 {
		seconds -= over
	}
	return seconds
}

// TokenIssued is when a token asked for seconds was issued, by the clock of the API
// server that issued it: its expiry less its lifetime. Its Lifetime is then exactly
// what was asked, however far the agent's clock is from the server's.
func TokenIssued(expires time.Time, seconds int64) time.Time {
	return expires.Add(-time.Duration(seconds) * time.Second)
}

// RenewAt is when the agent should replace the token: RenewAfter after its issue if
// set, otherwise half way through its lifetime.
func (c Credential) RenewAt() time.Time {
	if c.RenewAfter > 0 {
		return c.Issued.Add(c.RenewAfter)
	}
	return c.Issued.Add(c.Lifetime() / 2)
}
