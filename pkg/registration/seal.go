package registration

import (
	"crypto/hpke"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
)

// The credential a grant hands out travels sealed with HPKE (RFC 9180) to a one-time
// key of the agent's request: a hybrid of ML-KEM-768 and X25519, so it stays secret
// even from someone who records it now to break X25519 later. The private half
// never leaves the agent's memory, and the request's signature covers the public
// half, so whoever else can read the credential Secret reads nothing of use.
var (
	sealKEM  = hpke.MLKEM768X25519()
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
		return nil, &ProofError{Why: "encryptionKey is not an ML-KEM-768+X25519 public key: " + err.Error()}
	}
	plaintext, err := json.Marshal(cred.SecretData())
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
	var data map[string][]byte
	if err := json.Unmarshal(plaintext, &data); err != nil {
		return Credential{}, fmt.Errorf("the sealed credential: %w", err)
	}
	return CredentialFromSecretData(data)
}
