package registration

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

func mustKey(t *testing.T) AgentKey {
	t.Helper()
	key, err := NewAgentKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

func TestASignedRequestVerifiesAndAnyChangeBreaksIt(t *testing.T) {
	key := mustKey(t)
	signed, _, err := NewRequest("clusters", "token", "client", map[string]string{"env": "dev"}, key)
	if err != nil {
		t.Fatal(err)
	}
	signed.Name = "request-abc"
	if err := VerifyProof(signed); err != nil {
		t.Fatalf("a signed request: %v", err)
	}
	if parsed, err := ParseAgentKey(key.PEM()); err != nil || parsed.PublicKey() != key.PublicKey() {
		t.Fatalf("the key does not survive PEM: %v", err)
	}

	other := mustKey(t)
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	ecDER, err := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		change func(r *fleet.ClusterRegistrationRequest)
	}{
		{"another workspace", func(r *fleet.ClusterRegistrationRequest) { r.Namespace = "other" }},
		{"another token", func(r *fleet.ClusterRegistrationRequest) { r.Labels[names.RegistrationTokenLabel] = "other" }},
		{"another clientID", func(r *fleet.ClusterRegistrationRequest) { r.Spec.ClientID = "victim" }},
		{"another clientRandom", func(r *fleet.ClusterRegistrationRequest) { r.Spec.ClientRandom = "fresh" }},
		{"another label", func(r *fleet.ClusterRegistrationRequest) { r.Spec.ClusterLabels["env"] = "prod" }},
		{"an added label", func(r *fleet.ClusterRegistrationRequest) { r.Spec.ClusterLabels["extra"] = "x" }},
		{"another encryption key", func(r *fleet.ClusterRegistrationRequest) {
			r.Spec.EncryptionKey = base64.StdEncoding.EncodeToString([]byte("x"))
		}},
		{"a later signedAt", func(r *fleet.ClusterRegistrationRequest) {
			r.Spec.SignedAt = &metav1.MicroTime{Time: r.Spec.SignedAt.Add(time.Microsecond)}
		}},
		{"another public key", func(r *fleet.ClusterRegistrationRequest) { r.Spec.PublicKey = other.PublicKey() }},
		{"an ECDSA public key", func(r *fleet.ClusterRegistrationRequest) { r.Spec.PublicKey = base64.StdEncoding.EncodeToString(ecDER) }},
		{"no signature", func(r *fleet.ClusterRegistrationRequest) { r.Spec.Signature = "" }},
		{"no public key", func(r *fleet.ClusterRegistrationRequest) { r.Spec.PublicKey = "" }},
		{"no signedAt", func(r *fleet.ClusterRegistrationRequest) { r.Spec.SignedAt = nil }},
		{"a signature that is not base64", func(r *fleet.ClusterRegistrationRequest) { r.Spec.Signature = "!!" }},
		{"a public key that is not DER", func(r *fleet.ClusterRegistrationRequest) { r.Spec.PublicKey = "AAAA" }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := signed.DeepCopy()
			tc.change(r)
			var proofErr *ProofError
			if err := VerifyProof(r); !errors.As(err, &proofErr) {
				t.Fatalf("VerifyProof = %v, want a ProofError", err)
			}
		})
	}
	for name, labels := range map[string]map[string]string{"no labels": nil, "empty labels": {}, "labels": {"a": "b"}} {
		t.Run("a request with "+name+" survives the API server's JSON", func(t *testing.T) {
			r, _, err := NewRequest("clusters", "token", "client", labels, key)
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(r)
			if err != nil {
				t.Fatal(err)
			}
			var back fleet.ClusterRegistrationRequest
			if err := json.Unmarshal(raw, &back); err != nil {
				t.Fatal(err)
			}
			if err := VerifyProof(&back); err != nil {
				t.Fatal(err)
			}
		})
	}
	t.Run("a signed request whose encryption key takes no answer (a low-order point)", func(t *testing.T) {
		r := signed.DeepCopy()
		r.Spec.EncryptionKey = base64.StdEncoding.EncodeToString(make([]byte, 32))
		if err := key.Sign(r); err != nil {
			t.Fatal(err)
		}
		var proofErr *ProofError
		if err := VerifyProof(r); !errors.As(err, &proofErr) {
			t.Fatalf("VerifyProof = %v, want a ProofError", err)
		}
	})
	t.Run("the request's name is not signed (the API server picks it)", func(t *testing.T) {
		r := signed.DeepCopy()
		r.Name = "request-xyz"
		if err := VerifyProof(r); err != nil {
			t.Fatal(err)
		}
	})
}

func TestASealedCredentialOpensOnlyForItsRequest(t *testing.T) {
	opener, err := NewOpener()
	if err != nil {
		t.Fatal(err)
	}
	cred := Credential{Token: "secret-token", APIServerURL: "https://hub", ClusterName: "c", ClusterNamespace: "ws", DeploymentNamespace: "cluster-ws-c", Expires: time.Now().Add(time.Hour).Truncate(time.Second)}
	sealed, err := SealCredential(opener.PublicKey(), "client", "random", cred)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(sealed), "secret-token") {
		t.Fatal("the sealed credential contains the token in the clear")
	}
	got, err := OpenAnswer(map[string][]byte{AnswerSealed: sealed}, opener, "client", "random")
	if err != nil || got.Token != cred.Token || !got.Expires.Equal(cred.Expires) {
		t.Fatalf("opened %+v, %v", got, err)
	}

	someoneElse, err := NewOpener()
	if err != nil {
		t.Fatal(err)
	}
	for name, open := range map[string]func() (Credential, error){
		"another one-time key": func() (Credential, error) { return someoneElse.Open("client", "random", sealed) },
		"another clientID":     func() (Credential, error) { return opener.Open("victim", "random", sealed) },
		"another clientRandom": func() (Credential, error) { return opener.Open("client", "other", sealed) },
		"a flipped byte": func() (Credential, error) {
			tampered := append([]byte(nil), sealed...)
			tampered[len(tampered)-1] ^= 1
			return opener.Open("client", "random", tampered)
		},
		"an oversized answer": func() (Credential, error) { return opener.Open("client", "random", make([]byte, maxSealed+1)) },
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := open(); err == nil {
				t.Fatal("it opened")
			}
		})
	}
	t.Run("a refusal", func(t *testing.T) {
		_, err := OpenAnswer(map[string][]byte{AnswerRefusedReason: []byte("KeyMismatch"), AnswerRefusedMessage: []byte("do this")}, opener, "client", "random")
		var refused *RefusedError
		if !errors.As(err, &refused) || refused.Reason != "KeyMismatch" || !strings.Contains(err.Error(), "do this") {
			t.Fatalf("err = %v, want the refusal", err)
		}
	})
	t.Run("an encryption key that is not one", func(t *testing.T) {
		if _, err := SealCredential("AAAA", "client", "random", cred); err == nil {
			t.Fatal("sealed to garbage")
		}
	})
}

func TestTheAgentKeyIsMadeOnceAndKeptWithTheIdentity(t *testing.T) {
	ctx := context.Background()
	d := Downstream{Client: fake.NewSimpleClientset(), Namespace: "cattle-fleet-system"}
	key, err := d.Key(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if cred, err := d.Identity(ctx); err != nil || cred != nil {
		t.Fatalf("a Secret with only the key is no identity: %+v, %v", cred, err)
	}
	again, err := d.Key(ctx)
	if err != nil || again.PublicKey() != key.PublicKey() {
		t.Fatalf("a second Key made another key (err=%v)", err)
	}
	cred := Credential{Token: "t", APIServerURL: "https://hub", ClusterName: "c", ClusterNamespace: "ws", DeploymentNamespace: "cluster-ws-c"}
	if err := d.StoreIdentity(ctx, cred); err != nil {
		t.Fatal(err)
	}
	if stored, err := d.Identity(ctx); err != nil || stored == nil || stored.Token != "t" {
		t.Fatalf("identity %+v, %v", stored, err)
	}
	if kept, err := d.Key(ctx); err != nil || kept.PublicKey() != key.PublicKey() {
		t.Fatalf("storing the identity lost the key (err=%v)", err)
	}

	t.Run("an identity Secret of another type keeps the key when replaced", func(t *testing.T) {
		client := fake.NewSimpleClientset(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: names.AgentIdentitySecret, Namespace: "ns"},
			Type:       corev1.SecretTypeOpaque,
		})
		d := Downstream{Client: client, Namespace: "ns"}
		key, err := d.Key(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := d.StoreIdentity(ctx, cred); err != nil {
			t.Fatal(err)
		}
		if kept, err := d.Key(ctx); err != nil || kept.PublicKey() != key.PublicKey() {
			t.Fatalf("the key changed (err=%v)", err)
		}
	})
	t.Run("a damaged key says how to recover", func(t *testing.T) {
		client := fake.NewSimpleClientset(&corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: names.AgentIdentitySecret, Namespace: "ns"},
			Data:       map[string][]byte{agentKeyField: []byte("garbage")},
		})
		_, err := Downstream{Client: client, Namespace: "ns"}.Key(ctx)
		if err == nil || !strings.Contains(err.Error(), "delete the Secret") {
			t.Fatalf("err = %v", err)
		}
	})
}

// The admission policies name by value what the Go code names by constant; they must
// agree, or a policy silently matches nothing.
func TestAdmissionPoliciesNameWhatTheHubUses(t *testing.T) {
	policies, bindings, err := AdmissionPolicies(Admission{HubUser: "flotilla-hub"})
	if err != nil {
		t.Fatal(err)
	}
	if len(policies) != len(bindings) {
		t.Fatalf("%d policies and %d bindings", len(policies), len(bindings))
	}
	text := string(admissionYAML)
	for _, name := range []string{
		names.RegistrationNamespace, names.RegistrationTokenLabel, names.AnswerReaderAnnotation,
		"'-registration'", ":" + names.AgentIdentityServiceAccount + "'", "'" + names.AgentLease + "'",
	} {
		if !strings.Contains(text, name) {
			t.Errorf("manifests/admission.yaml does not mention %s", name)
		}
	}
	if got := names.TokenServiceAccount("t"); got != "t-registration" {
		t.Errorf("a token's ServiceAccount is %q; the policies expect <token>-registration", got)
	}
}

// The hub chart may patch only the admission policies it names: every policy the
// hub applies must be among them.
func TestTheHubChartMayApplyEveryAdmissionPolicy(t *testing.T) {
	chart, err := os.ReadFile("../../charts/fleet-like/hub/templates/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	policies, _, err := AdmissionPolicies(Admission{HubUser: "flotilla-hub"})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range policies {
		if !strings.Contains(string(chart), `"`+*p.Name+`"`) {
			t.Errorf("the hub chart's RBAC does not name admission policy %s", *p.Name)
		}
	}
}
