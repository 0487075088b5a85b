package bundle

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Bundles made by current Fleet's `fleet apply` keep their Helm values in a Secret
// named after the Bundle, in its namespace, and spec.valuesHash says which.
const (
	// SecretTypeBundleValues is the type of such a Secret; no other is read.
	SecretTypeBundleValues corev1.SecretType = "fleet.cattle.io/bundle-values/v1alpha1"
	// valuesKey holds the Bundle's own values; every other key a target's, by name.
	valuesKey = "values.yaml"
)

// Processed reasons of a Bundle whose values are in a Secret.
const (
	reasonValuesSecretNotFound = "ValuesSecretNotFound"
	reasonValuesSecretMismatch = "ValuesSecretMismatch"
)

// valuesRetry is how soon a Bundle waiting for its values Secret is looked at again:
// fleet apply writes the Secret and the Bundle one after the other.
const valuesRetry = 5 * time.Second

// ValuesHash is the hash fleet apply writes into spec.valuesHash for the data of the
// values Secret: sha256 of its JSON (keys sorted, values base64).
func ValuesHash(data map[string][]byte) (string, error) {
	raw, err := json.Marshal(data)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]), nil
}

// withValues returns bundle with the values of its values Secret put back, or bundle
// itself when it keeps its values inline. The Secret must be of the values type and
// hash to spec.valuesHash: a Bundle cannot make the hub read another Secret (and
// its author learns nothing of one from the error).
func withValues(bundle *fleet.Bundle, secret *corev1.Secret) (*fleet.Bundle, error) {
	if bundle.Spec.ValuesHash == "" {
		return bundle, nil
	}
	where := fmt.Sprintf("the Secret %s/%s", bundle.Namespace, bundle.Name)
	if secret == nil {
		return nil, &refusal{reasonValuesSecretNotFound, fmt.Errorf("spec.valuesHash is set, so the Helm values are in %s, which does not exist (yet)", where)}
	}
	if secret.Type != SecretTypeBundleValues {
		return nil, &refusal{reasonValuesSecretMismatch, fmt.Errorf("spec.valuesHash is set, but %s is not of type %s", where, SecretTypeBundleValues)}
	}
	hash, err := ValuesHash(secret.Data)
	if err != nil {
		return nil, err
	}
	if hash != bundle.Spec.ValuesHash {
		return nil, &refusal{reasonValuesSecretMismatch, fmt.Errorf("the values in %s do not match spec.valuesHash (the Secret or the Bundle is being updated)", where)}
	}
	out := bundle.DeepCopy()
	if v := secret.Data[valuesKey]; len(v) > 0 {
		values, err := genericMap(v, "values.yaml")
		if err != nil {
			return nil, err
		}
		if out.Spec.Helm == nil {
			out.Spec.Helm = &fleet.HelmOptions{}
		}
		out.Spec.Helm.Values = values
	}
	for i := range out.Spec.Targets {
		v := secret.Data[out.Spec.Targets[i].Name]
		if out.Spec.Targets[i].Name == "" || len(v) == 0 {
			continue
		}
		values, err := genericMap(v, "target "+out.Spec.Targets[i].Name)
		if err != nil {
			return nil, err
		}
		if out.Spec.Targets[i].Helm == nil {
			out.Spec.Targets[i].Helm = &fleet.HelmOptions{}
		}
		out.Spec.Targets[i].Helm.Values = values
	}
	return out, nil
}

func genericMap(data []byte, what string) (*fleet.GenericMap, error) {
	m := &fleet.GenericMap{}
	if err := m.UnmarshalJSON(data); err != nil {
		return nil, &refusal{"InvalidOptions", fmt.Errorf("the values Secret's %s: %w", what, err)}
	}
	return m, nil
}
