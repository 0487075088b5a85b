package signing

import (
	"crypto/ed25519"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/target"
)

// Reasons an agent with trusted keys refuses a BundleDeployment: the reason of its
// Deployed condition.
const (
	// ReasonUnsigned: the Bundle carries no signature.
	ReasonUnsigned = "Unsigned"
	// ReasonUntrustedKey: signed, by a key the agent does not trust.
	ReasonUntrustedKey = "UntrustedKey"
	// ReasonBadSignature: the signature does not verify, or cannot be read.
	ReasonBadSignature = "BadSignature"
	// ReasonNotSigned: the signature is good, but not for the resources and options
	// this cluster would get: the Bundle changed after it was signed.
	ReasonNotSigned = "NotSigned"
	// ReasonInvalidTrustedKeys: the agent's trusted keys cannot be read, so it
	// deploys nothing rather than everything.
	ReasonInvalidTrustedKeys = "InvalidTrustedKeys"
)

// IsRefusalReason says whether reason is one of the reasons above.
func IsRefusalReason(reason string) bool {
	switch reason {
	case ReasonUnsigned, ReasonUntrustedKey, ReasonBadSignature, ReasonNotSigned, ReasonInvalidTrustedKeys:
		return true
	}
	return false
}

// MaxTrustedKeys bounds the trusted keys an agent reads.
const MaxTrustedKeys = 64

// MaxSignatureSize bounds the annotation: room for some 500 targets. The hub copies it
// to every BundleDeployment, so it is kept well below the 256 KiB the API server
// allows an object's annotations.
const MaxSignatureSize = 64 << 10

// fingerprintPattern is what a key's fingerprint looks like: only such a name is
// repeated in a message.
var fingerprintPattern = regexp.MustCompile(`^SHA256:[A-Za-z0-9+/]{43}$`)

// RefusedError is a BundleDeployment the agent will not deploy, and why.
type RefusedError struct {
	Reason  string
	Message string
}

func (e *RefusedError) Error() string { return e.Message }

// Verifier checks BundleDeployments against the keys an agent trusts.
type Verifier struct {
	keys map[string]ed25519.PublicKey
	// invalid, when set, refuses everything: the trusted keys could not be read.
	invalid error
}

// ParseTrustedKeys reads PEM "PUBLIC KEY" blocks of Ed25519 keys. No key at all
// (only blank space) gives a nil Verifier: the agent verifies nothing. Anything it
// cannot read is an error, never fewer keys: call Refusing with it.
func ParseTrustedKeys(data []byte) (*Verifier, error) {
	if strings.TrimSpace(string(data)) == "" {
		return nil, nil
	}
	v := &Verifier{keys: map[string]ed25519.PublicKey{}}
	rest := data
	for {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			break
		}
		if block.Type != "PUBLIC KEY" {
			return nil, fmt.Errorf("a PEM %q block: want only \"PUBLIC KEY\" blocks", block.Type)
		}
		key, err := x509.ParsePKIXPublicKey(block.Bytes)
		if err != nil {
			return nil, fmt.Errorf("a public key: %w", err)
		}
		pub, ok := key.(ed25519.PublicKey)
		if !ok {
			return nil, fmt.Errorf("a %T public key: want Ed25519", key)
		}
		if len(v.keys) == MaxTrustedKeys {
			return nil, fmt.Errorf("more than %d keys", MaxTrustedKeys)
		}
		v.keys[Fingerprint(pub)] = pub
	}
	if strings.TrimSpace(string(rest)) != "" {
		return nil, errors.New("text that is not a PEM block")
	}
	if len(v.keys) == 0 {
		return nil, errors.New("no PEM block")
	}
	return v, nil
}

// Refusing is a Verifier that refuses every BundleDeployment because the trusted
// keys could not be read (err).
func Refusing(err error) *Verifier { return &Verifier{invalid: err} }

// Keys are the fingerprints of the trusted keys, sorted.
func (v *Verifier) Keys() []string {
	out := make([]string, 0, len(v.keys))
	for k := range v.keys {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Verify says whether bd may be deployed: a RefusedError if not. bd's Content is
// checked against its name when it is read (content.Resources), so Verify needs only
// bd itself.
func (v *Verifier) Verify(bd *fleet.BundleDeployment) error {
	if v.invalid != nil {
		return &RefusedError{ReasonInvalidTrustedKeys, fmt.Sprintf("this agent's trustedKeys cannot be read (%v): it deploys nothing until they are fixed", v.invalid)}
	}
	// Listed in refusals only: a BundleDeployment that passes costs no listing.
	trusted := func() string { return strings.Join(v.Keys(), ", ") }
	raw := bd.Annotations[names.SignatureAnnotation]
	if raw == "" {
		return &RefusedError{ReasonUnsigned, fmt.Sprintf("the Bundle is not signed, and this cluster deploys only Bundles signed by a trusted key (%s): sign it with `hub bundle sign`", trusted())}
	}
	if len(raw) > MaxSignatureSize {
		return &RefusedError{ReasonBadSignature, fmt.Sprintf("the Bundle's signature annotation is longer than %d bytes", MaxSignatureSize)}
	}
	var sig Signature
	if err := json.Unmarshal([]byte(raw), &sig); err != nil || !fingerprintPattern.MatchString(sig.Key) {
		return &RefusedError{ReasonBadSignature, "the Bundle's signature annotation cannot be read: sign the Bundle again"}
	}
	key, ok := v.keys[sig.Key]
	if !ok {
		return &RefusedError{ReasonUntrustedKey, fmt.Sprintf("the Bundle is signed by the key %s, which this cluster does not trust (it trusts %s)", sig.Key, trusted())}
	}
	value, err := base64.StdEncoding.DecodeString(sig.Value)
	if err != nil || !ed25519.Verify(key, payload(bd.Labels[names.BundleNamespaceLabel], bd.Name, sig.Deployments), value) {
		return &RefusedError{ReasonBadSignature, fmt.Sprintf("the Bundle's signature does not verify with the key %s: it was changed after signing", sig.Key)}
	}
	// The ID the options and Content give, not the one the hub wrote beside them.
	id, err := target.DeploymentID(target.ContentName(bd.Spec.DeploymentID), bd.Spec.Options)
	if err != nil {
		return &RefusedError{ReasonNotSigned, err.Error()}
	}
	if id != bd.Spec.DeploymentID || !slices.Contains(sig.Deployments, id) {
		return &RefusedError{ReasonNotSigned, fmt.Sprintf("the resources or options this cluster gets are not among those the key %s signed: the Bundle changed after it was signed; sign it again", sig.Key)}
	}
	return nil
}
