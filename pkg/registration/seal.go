package registration

import (
	"crypto/ecdh"
	"crypto/hpke"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// The credential a grant hands out travels sealed with HPKE (RFC 9180) to a one-time
// X25519 key of the agent's request. The private half never leaves the agent's
// memory, and the request's signature covers the public half, so whoever else can
// read the credential Secret reads nothing of use. What it seals is a token that
// lasts a day, not a secret to keep for years, so the 32-byte keys of X25519 are
// chosen over a post-quantum hybrid whose 1.2 KB keys every request and answer of a
// fleet would carry (docs/scale.md measures the difference).
var (
	sealKEM  = hpke.DHKEM(ecdh.X25519())
	sealKDF  = hpke.HKDFSHA256()
	sealAEAD = hpke.AES256GCM()
)

// maxSealed bounds what an agent decrypts: a credential is a token, a CA bundle and
// a few names.
const maxSealed = 256 << 10

// Opener is the one-time key an agent receives its credential with.
type Opener struct{ private hpke.PrivateKey }

// NewOpener makes a one-time key.
func NewOpener() (*Opener, error) {
	private, err := sealKEM.GenerateKey()
	if err != nil {
		return nil, fmt.Errorf("making the one-time encryption key: %w", err)
	}
	return &Opener{private: private}, nil
}

// PublicKey is the public half as a request carries it (base64).
func (o *Opener) PublicKey() string {
	return base64.StdEncoding.EncodeToString(o.private.PublicKey().Bytes())
}

// sealInfo binds a sealed credential to the request it answers.
func sealInfo(clientID, clientRandom string) []byte {
	return []byte("flotilla cluster credential v1\x00" + clientID + "\x00" + clientRandom)
}

// SealCredential encrypts cred to encryptionKey, a request's one-time key, for the
// request of clientID and clientRandom.
func SealCredential(encryptionKey, clientID, clientRandom string, cred Credential) ([]byte, error) {
	raw, err := base64.StdEncoding.DecodeString(encryptionKey)
	if err != nil {
		return nil, &ProofError{Why: "encryptionKey is not base64"}
	}
	public, err := sealKEM.NewPublicKey(raw)
	if err != nil {
		return nil, &ProofError{Why: "encryptionKey is not an X25519 public key: " + err.Error()}
	}
	plaintext, err := json.Marshal(asStrings(cred.SecretData()))
	if err != nil {
		return nil, err
	}
	return hpke.Seal(public, sealKDF, sealAEAD, sealInfo(clientID, clientRandom), plaintext)
}

// Open decrypts a credential sealed to o for the request of clientID and
// clientRandom.
func (o *Opener) Open(clientID, clientRandom string, sealed []byte) (Credential, error) {
	if len(sealed) > maxSealed {
		return Credential{}, fmt.Errorf("the sealed credential is %d bytes, more than %d", len(sealed), maxSealed)
	}
	plaintext, err := hpke.Open(o.private, sealKDF, sealAEAD, sealInfo(clientID, clientRandom), sealed)
	if err != nil {
		return Credential{}, errors.New("the sealed credential does not open with this request's key")
	}
	var data map[string]string
	if err := json.Unmarshal(plaintext, &data); err != nil {
		return Credential{}, fmt.Errorf("the sealed credential: %w", err)
	}
	bytes := make(map[string][]byte, len(data))
	for k, v := range data {
		bytes[k] = []byte(v)
	}
	return CredentialFromSecretData(bytes)
}

// asStrings is a credential's Secret data as text (all of it is: a token, a PEM CA,
// names, times), so sealing it does not base64 it first.
func asStrings(data map[string][]byte) map[string]string {
	out := make(map[string]string, len(data))
	for k, v := range data {
		out[k] = string(v)
	}
	return out
}
