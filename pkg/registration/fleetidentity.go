package registration

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/flotilla/flotilla/pkg/kubeconfig"
)

// Fleet's agent keeps its identity in the same downstream Secret, fleet-agent, in
// its own form: a kubeconfig of the hub (server, CA and token, the per-cluster
// namespace as its context's namespace) beside clusterName, clusterNamespace and
// deploymentNamespace. Flotilla's agent, deployed over Fleet's by the agent bundle,
// reads it to carry on as the same Cluster, then binds its key to that Cluster
// (Claim) and stores its identity in its own form.

// fleetKubeconfig is the key of Fleet's agent's identity Secret holding its hub
// kubeconfig.
const fleetKubeconfig = "kubeconfig"

// isFleetIdentity says whether data is the identity Secret of Fleet's agent.
func isFleetIdentity(data map[string][]byte) bool {
	return len(data[credToken]) == 0 && len(data[fleetKubeconfig]) > 0
}

// credentialFromFleetIdentity decodes the identity Secret Fleet's agent wrote. The
// kubeconfig is read as untrusted data (no programs, no files, no proxy); the token's
// expiry is read from its claims without checking its signature, which only the hub
// can, to know when to replace it. The result has KeyUnbound set and no ClientID (Fleet
// keeps none there).
func credentialFromFleetIdentity(data map[string][]byte) (Credential, error) {
	cfg, err := kubeconfig.FromUntrusted(data[fleetKubeconfig])
	if err != nil {
		return Credential{}, fmt.Errorf("Fleet's agent's %s: %w", fleetKubeconfig, err)
	}
	if cfg.BearerToken == "" {
		return Credential{}, fmt.Errorf("Fleet's agent's %s has no token", fleetKubeconfig)
	}
	c := Credential{
		Token:               cfg.BearerToken,
		APIServerURL:        cfg.Host,
		APIServerCA:         cfg.CAData,
		ClusterName:         string(data[credClusterName]),
		ClusterNamespace:    string(data[credClusterNamespace]),
		DeploymentNamespace: string(data[credDeploymentNamespace]),
		KeyUnbound:          true,
	}
	var missing []string
	for key, value := range map[string]string{credClusterName: c.ClusterName, credClusterNamespace: c.ClusterNamespace, credDeploymentNamespace: c.DeploymentNamespace} {
		if value == "" {
			missing = append(missing, key)
		}
	}
	if len(missing) > 0 {
		return c, fmt.Errorf("Fleet's agent's identity lacks %s", strings.Join(missing, ", "))
	}
	// Issued stays unknown, so the token is replaced as soon as the agent runs.
	c.Expires, _ = tokenExpiry(c.Token)
	return c, nil
}

// maxTokenSize bounds the token whose claims are read: a bound ServiceAccount token is
// about a kilobyte.
const maxTokenSize = 16 << 10

// tokenExpiry is the exp claim of a JWT, unverified.
func tokenExpiry(token string) (time.Time, error) {
	if len(token) > maxTokenSize {
		return time.Time{}, fmt.Errorf("the token is %d bytes, more than %d", len(token), maxTokenSize)
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("the token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return time.Time{}, fmt.Errorf("the token's claims: %w", err)
	}
	var claims struct {
		Exp int64 `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return time.Time{}, fmt.Errorf("the token's claims: %w", err)
	}
	if claims.Exp <= 0 {
		return time.Time{}, errors.New("the token has no expiry")
	}
	return time.Unix(claims.Exp, 0), nil
}
