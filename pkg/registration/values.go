package registration

import (
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"
)

// ValuesKey is the key of a ClusterRegistrationToken's Secret that holds the values.yaml.
const ValuesKey = "values"

// Values are the registration values of the fleet-agent chart: what a
// ClusterRegistrationToken's Secret holds under "values" as a values.yaml, and what the
// chart puts in the downstream fleet-agent-bootstrap Secret.
type Values struct {
	// Token is the registration token's credential for the hub's API.
	Token string `json:"token"`
	// TokenName is the ClusterRegistrationToken's name.
	TokenName string `json:"tokenName"`
	// APIServerURL is the hub's API address as agents reach it.
	APIServerURL string `json:"apiServerURL"`
	// APIServerCA is the PEM certificate (or its base64, as in a kubeconfig's
	// certificate-authority-data) that signed the hub's serving certificate.
	APIServerCA string `json:"apiServerCA"`
	// ClusterNamespace is the workspace the token registers clusters into.
	ClusterNamespace string `json:"clusterNamespace"`
	// SystemRegistrationNamespace is where the hub puts credentials for agents.
	SystemRegistrationNamespace string `json:"systemRegistrationNamespace"`
}

// YAML renders v as a values.yaml.
func (v Values) YAML() ([]byte, error) {
	return yaml.Marshal(v)
}

// Validate says what is missing for an agent to register with v.
func (v Values) Validate() error {
	var missing []string
	for name, value := range map[string]string{
		"token": v.Token, "apiServerURL": v.APIServerURL, "clusterNamespace": v.ClusterNamespace,
		"systemRegistrationNamespace": v.SystemRegistrationNamespace,
	} {
		if value == "" {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("registration values lack %s", strings.Join(slices.Sorted(slices.Values(missing)), ", "))
	}
	return nil
}

// Keys of the downstream bootstrap Secret, one per value.
const (
	KeyToken                       = "token"
	KeyTokenName                   = "tokenName"
	KeyAPIServerURL                = "apiServerURL"
	KeyAPIServerCA                 = "apiServerCA"
	KeyClusterNamespace            = "clusterNamespace"
	KeySystemRegistrationNamespace = "systemRegistrationNamespace"
)

// ValuesFromSecretData reads the downstream bootstrap Secret.
func ValuesFromSecretData(data map[string][]byte) Values {
	return Values{
		Token:                       strings.TrimSpace(string(data[KeyToken])),
		TokenName:                   string(data[KeyTokenName]),
		APIServerURL:                strings.TrimSpace(string(data[KeyAPIServerURL])),
		APIServerCA:                 string(data[KeyAPIServerCA]),
		ClusterNamespace:            string(data[KeyClusterNamespace]),
		SystemRegistrationNamespace: string(data[KeySystemRegistrationNamespace]),
	}
}

// DecodeCA turns a CA given as PEM, or as base64 of PEM (a kubeconfig's
// certificate-authority-data, as the Fleet documentation suggests), into PEM. An
// empty CA means the system's trust store.
func DecodeCA(ca string) ([]byte, error) {
	ca = strings.TrimSpace(ca)
	if ca == "" {
		return nil, nil
	}
	if block, _ := pem.Decode([]byte(ca)); block != nil {
		return []byte(ca + "\n"), nil
	}
	decoded, err := base64.StdEncoding.DecodeString(ca)
	if err == nil {
		if block, _ := pem.Decode(decoded); block != nil {
			return decoded, nil
		}
	}
	return nil, errors.New("apiServerCA is neither a PEM certificate nor base64 of one")
}
