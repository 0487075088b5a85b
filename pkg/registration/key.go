package registration

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// AgentKey is the key pair an agent binds its cluster to: made on its first
// registration, kept downstream in its identity Secret, and proven by signing each
// later request. Its public half is recorded on the Cluster.
type AgentKey struct{ private ed25519.PrivateKey }

// NewAgentKey makes a fresh key.
func NewAgentKey() (AgentKey, error) {
	_, private, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return AgentKey{}, fmt.Errorf("making the agent key: %w", err)
	}
	return AgentKey{private: private}, nil
}

// ParseAgentKey reads a key written by PEM.
func ParseAgentKey(data []byte) (AgentKey, error) {
	block, _ := pem.Decode(data)
	if block == nil || block.Type != "PRIVATE KEY" {
		return AgentKey{}, errors.New("the agent key is not a PEM PRIVATE KEY")
	}
	parsed, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return AgentKey{}, fmt.Errorf("the agent key: %w", err)
	}
	private, ok := parsed.(ed25519.PrivateKey)
	if !ok {
		return AgentKey{}, fmt.Errorf("the agent key is a %T, not an Ed25519 key", parsed)
	}
	return AgentKey{private: private}, nil
}

// PEM encodes the private key as PKCS#8 PEM.
func (k AgentKey) PEM() []byte {
	der, err := x509.MarshalPKCS8PrivateKey(k.private)
	if err != nil {
		// An Ed25519 key always marshals.
		panic(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// PublicKey is the public half as a request carries it: base64 of its PKIX DER.
func (k AgentKey) PublicKey() string {
	der, err := x509.MarshalPKIXPublicKey(k.private.Public())
	if err != nil {
		panic(err)
	}
	return base64.StdEncoding.EncodeToString(der)
}

// Sign signs the request as sent to the hub: it fills in PublicKey and Signature
// of its spec. SignedAt and EncryptionKey must be set before.
func (k AgentKey) Sign(req *fleet.ClusterRegistrationRequest) error {
	req.Spec.PublicKey = k.PublicKey()
	payload, err := proofPayload(req)
	if err != nil {
		return err
	}
	req.Spec.Signature = base64.StdEncoding.EncodeToString(ed25519.Sign(k.private, payload))
	return nil
}

// Fingerprint names a public key for people: "SHA256:" and the unpadded base64 of
// the SHA-256 of its DER, as ssh-keygen -l prints keys.
func Fingerprint(publicKey string) string {
	der, err := base64.StdEncoding.DecodeString(publicKey)
	if err != nil {
		der = []byte(publicKey)
	}
	sum := sha256.Sum256(der)
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// ProofError is a request whose signature does not prove its key.
type ProofError struct{ Why string }

func (e *ProofError) Error() string { return e.Why }

// VerifyProof checks that req is signed by the private half of the public key it
// carries, over everything it asks for (see proofPayload). It says nothing about
// whether that key is the one the Cluster is bound to.
func VerifyProof(req *fleet.ClusterRegistrationRequest) error {
	spec := req.Spec
	if spec.PublicKey == "" || spec.Signature == "" || spec.SignedAt == nil || spec.EncryptionKey == "" {
		return &ProofError{Why: "the request carries no public key, encryption key and signature; it was sent by an agent older than this hub, upgrade the agent"}
	}
	der, err := base64.StdEncoding.DecodeString(spec.PublicKey)
	if err != nil {
		return &ProofError{Why: "publicKey is not base64"}
	}
	parsed, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return &ProofError{Why: "publicKey is not a PKIX public key: " + err.Error()}
	}
	public, ok := parsed.(ed25519.PublicKey)
	if !ok {
		return &ProofError{Why: fmt.Sprintf("publicKey is a %T; only Ed25519 keys are accepted", parsed)}
	}
	signature, err := base64.StdEncoding.DecodeString(spec.Signature)
	if err != nil {
		return &ProofError{Why: "signature is not base64"}
	}
	payload, err := proofPayload(req)
	if err != nil {
		return &ProofError{Why: err.Error()}
	}
	if !ed25519.Verify(public, payload, signature) {
		return &ProofError{Why: "the signature does not match the request and its public key"}
	}
	// The encryption key must take a sealed answer (a low-order X25519 half does not),
	// or the hub would grant and then fail to answer.
	if _, err := SealCredential(spec.EncryptionKey, spec.ClientID, spec.ClientRandom, Credential{}); err != nil {
		var proofErr *ProofError
		if errors.As(err, &proofErr) {
			return err
		}
		return &ProofError{Why: "encryptionKey does not take a sealed answer: " + err.Error()}
	}
	return nil
}

// maxClockSkew is how far in the future a request may be signed: an agent's clock
// may run a little ahead of the hub's, but a Cluster must not refuse its agent's
// requests for long because one was signed far ahead.
const maxClockSkew = 10 * time.Minute

// SignedInTheFuture says whether req was signed further ahead of now than clocks
// drift.
func SignedInTheFuture(req *fleet.ClusterRegistrationRequest, now time.Time) bool {
	return req.Spec.SignedAt != nil && req.Spec.SignedAt.After(now.Add(maxClockSkew))
}

// signedRequest is what an agent signs: every field of the request that the hub acts
// on, and the workspace and token it is sent to, so a signature cannot be moved to
// another request, workspace or token.
type signedRequest struct {
	Purpose       string            `json:"purpose"`
	Namespace     string            `json:"namespace"`
	Token         string            `json:"token"`
	ClientID      string            `json:"clientID"`
	ClientRandom  string            `json:"clientRandom"`
	ClusterLabels map[string]string `json:"clusterLabels"`
	PublicKey     string            `json:"publicKey"`
	EncryptionKey string            `json:"encryptionKey"`
	SignedAt      string            `json:"signedAt"`
}

// proofPurpose separates registration signatures from anything else the key might
// ever sign.
const proofPurpose = "flotilla.cattle.io/cluster-registration-request/v1"

// proofPayload is the byte string a request's signature covers: signedRequest as
// JSON, whose encoding of a struct and of a map with sorted keys is deterministic.
func proofPayload(req *fleet.ClusterRegistrationRequest) ([]byte, error) {
	if req.Spec.SignedAt == nil {
		return nil, errors.New("the request has no signedAt")
	}
	labels := req.Spec.ClusterLabels
	if len(labels) == 0 {
		// No labels travel the same as empty ones (omitempty).
		labels = nil
	}
	return json.Marshal(signedRequest{
		Purpose:       proofPurpose,
		Namespace:     req.Namespace,
		Token:         req.Labels[names.RegistrationTokenLabel],
		ClientID:      req.Spec.ClientID,
		ClientRandom:  req.Spec.ClientRandom,
		ClusterLabels: labels,
		PublicKey:     req.Spec.PublicKey,
		EncryptionKey: req.Spec.EncryptionKey,
		SignedAt:      req.Spec.SignedAt.UTC().Format(metav1.RFC3339Micro),
	})
}
