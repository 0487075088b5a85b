package registration

import (
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// What a token's values.yaml puts in the downstream bootstrap Secret comes from
// whoever installed the chart: reading and checking it never panics.
func FuzzBootstrapValues(f *testing.F) {
	f.Add("token", "https://hub:6443", "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n", "clusters")
	f.Add("", "http://x", "LS0tLS1CRUdJTg==", "")
	f.Add("t", "https://[::1]:6443/path?q", "\x00\xff", "a/b")
	f.Fuzz(func(t *testing.T, token, url, ca, namespace string) {
		values := ValuesFromSecretData(map[string][]byte{
			KeyToken: []byte(token), KeyAPIServerURL: []byte(url), KeyAPIServerCA: []byte(ca), KeyClusterNamespace: []byte(namespace),
		})
		if values.Validate() != nil {
			return
		}
		_, _ = HubConfig(values.APIServerURL, values.APIServerCA, values.Token)
	})
}

// An agent's identity Secret, and the hub's answer to its request, are read by the
// agent: neither panics on any content.
func FuzzCredentialAndAnswer(f *testing.F) {
	f.Add([]byte("token"), []byte("2026-12-04T00:00:00Z"), []byte("1h"), []byte("sealed"), []byte(""))
	f.Add([]byte(""), []byte("not a time"), []byte("-5s"), []byte{}, []byte("KeyMismatch"))
	opener, err := NewOpener()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, token, expires, duration, sealed, refused []byte) {
		data := map[string][]byte{
			credToken: token, credExpires: expires, credRenewAfter: duration, credRecoveryLifetime: duration,
			credRecoveryExpires: expires, credAPIServerURL: []byte("https://hub"), credClusterName: []byte("c"),
			credClusterNamespace: []byte("ws"), credDeploymentNamespace: []byte("cluster-ws-c-00000000"),
		}
		if c, err := CredentialFromSecretData(data); err == nil {
			_ = c.RenewAt()
			_ = c.Expired(time.Now())
			_ = c.CanRecover(time.Now())
		}
		_, err := OpenAnswer(map[string][]byte{AnswerSealed: sealed, AnswerRefusedReason: refused}, opener, "client", "random")
		if err == nil {
			t.Fatal("a fuzzed answer opened")
		}
	})
}

// A request is written by a token holder: verifying it never panics, and whatever
// it carries, it verifies only if its key signed exactly it.
func FuzzVerifyProof(f *testing.F) {
	// The same key in every fuzzing process: the seeds are made in one and run in
	// the others.
	key := AgentKey{private: ed25519.NewKeyFromSeed(make([]byte, ed25519.SeedSize))}
	signed, _, err := NewRequest("clusters", "token", "client", map[string]string{"env": "dev"}, key)
	if err != nil {
		f.Fatal(err)
	}
	raw, err := json.Marshal(signed.Spec)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(raw, "clusters", "token")
	f.Add([]byte(`{"clientID":"c","clientRandom":"r","publicKey":"AAAA","signature":"!!","encryptionKey":"","signedAt":null}`), "ws", "")
	f.Add([]byte(`{"clusterLabels":{"":""},"signedAt":"2026-12-04T00:00:00.000000Z"}`), "", "t")
	f.Fuzz(func(t *testing.T, spec []byte, namespace, token string) {
		req := &fleet.ClusterRegistrationRequest{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Labels: map[string]string{names.RegistrationTokenLabel: token}}}
		if json.Unmarshal(spec, &req.Spec) != nil {
			return
		}
		err := VerifyProof(req)
		var proofErr *ProofError
		if err != nil && !errors.As(err, &proofErr) {
			t.Fatalf("VerifyProof = %v, not a ProofError", err)
		}
		if err == nil && req.Spec.PublicKey != key.PublicKey() {
			t.Fatalf("a request verified with a key the fuzzer made up: %+v", req.Spec)
		}
		_ = SignedInTheFuture(req, time.Now())
		_ = Fingerprint(req.Spec.PublicKey)
	})
}

// Labels an agent asks for are sanitised without panicking, and never keep a
// reserved key.
func FuzzSanitizeLabels(f *testing.F) {
	f.Add("env", "dev", "fleet.cattle.io/agent-bundle", "c")
	f.Add("a.management.cattle.io/x", "", "", "\x00")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		for key := range SanitizeLabels(map[string]string{k1: v1, k2: v2}) {
			if names.Reserved(key) {
				t.Fatalf("kept reserved label %q", key)
			}
		}
	})
}
