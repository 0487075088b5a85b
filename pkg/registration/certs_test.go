package registration

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"math/big"
	"strings"
	"testing"
	"time"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// testSigner is an identity signer with a fresh CA.
func testSigner(t *testing.T) (*IdentitySigner, *x509.Certificate) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	template := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test-ca"}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, template, template, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := NewIdentitySigner(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}))
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := x509.ParseCertificate(der)
	return signer, ca
}

func TestIssuedCertificates(t *testing.T) {
	signer, ca := testSigner(t)
	key, err := NewAgentKey()
	if err != nil {
		t.Fatal(err)
	}
	ns := names.ClusterNamespace("clusters", "a")
	now := time.Now()
	for _, recovery := range []bool{false, true} {
		certPEM, err := signer.Issue(key.PublicKey(), ns, recovery, 24*time.Hour, now)
		if err != nil {
			t.Fatal(err)
		}
		cert, err := parseCertificate(certPEM)
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AddCert(ca)
		if _, err := cert.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
			t.Errorf("recovery %t: the CA does not verify it as a client certificate: %v", recovery, err)
		}
		user, recoveryUser, ok := names.ClusterUserOf(cert.Subject.CommonName)
		if !ok || user != ns || recoveryUser != recovery {
			t.Errorf("recovery %t: subject %q reads as namespace %q, recovery %t", recovery, cert.Subject.CommonName, user, recoveryUser)
		}
		if got := names.AgentKeyOf(cert.Subject.Organization); got != Fingerprint(key.PublicKey()) {
			t.Errorf("recovery %t: key group %q, want the key's fingerprint", recovery, got)
		}
		if cert.IsCA || !cert.NotAfter.Before(now.Add(24*time.Hour+time.Second)) {
			t.Errorf("recovery %t: CA %t, until %v", recovery, cert.IsCA, cert.NotAfter)
		}
	}
}

func TestIdentityAnswers(t *testing.T) {
	signer, _ := testSigner(t)
	key, _ := NewAgentKey()
	other, _ := NewAgentKey()
	ns := names.ClusterNamespace("clusters", "a")
	now := time.Now()
	cert, _ := signer.Issue(key.PublicKey(), ns, false, 24*time.Hour, now)
	recovery, _ := signer.Issue(key.PublicKey(), ns, true, 90*24*time.Hour, now)
	otherCert, _ := signer.Issue(other.PublicKey(), ns, false, 24*time.Hour, now)
	base := Credential{APIServerURL: "https://hub", ClusterName: "a", ClusterNamespace: "clusters", ClientID: "c"}
	for name, c := range map[string]struct {
		identity fleet.ClusterIdentity
		wantErr  string
	}{
		"both certificates for the key":  {fleet.ClusterIdentity{Certificate: string(cert), RecoveryCertificate: string(recovery), DeploymentNamespace: ns}, ""},
		"no recovery certificate":        {fleet.ClusterIdentity{Certificate: string(cert), DeploymentNamespace: ns}, ""},
		"a certificate for another key":  {fleet.ClusterIdentity{Certificate: string(otherCert), DeploymentNamespace: ns}, "not for the agent's key"},
		"a recovery one for another key": {fleet.ClusterIdentity{Certificate: string(cert), RecoveryCertificate: string(otherCert), DeploymentNamespace: ns}, "recoveryCertificate"},
		"not PEM":                        {fleet.ClusterIdentity{Certificate: "garbage", DeploymentNamespace: ns}, "not a PEM certificate"},
	} {
		t.Run(name, func(t *testing.T) {
			cred, err := CredentialFromIdentity(&c.identity, key, base)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("err %v, want %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !cred.HasCertificate() || cred.DeploymentNamespace != ns || cred.APIServerURL != base.APIServerURL {
				t.Fatalf("credential %+v", cred)
			}
			if got := cred.RenewAt(); got.Before(now.Add(11*time.Hour)) || got.After(now.Add(13*time.Hour)) {
				t.Errorf("renews at %v, want half way through the day from %v", got, now)
			}
			if c.identity.RecoveryCertificate != "" && !cred.CanRecover(now) {
				t.Error("cannot recover with its recovery certificate")
			}
			round, err := CredentialFromSecretData(cred.SecretData())
			if err != nil || string(round.Certificate) != string(cred.Certificate) || string(round.RecoveryCertificate) != string(cred.RecoveryCertificate) {
				t.Errorf("stored and read back: %v", err)
			}
		})
	}
}

func TestIssueRefusesWhatIsNotAnAgentKey(t *testing.T) {
	signer, _ := testSigner(t)
	ecKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalPKIXPublicKey(&ecKey.PublicKey)
	for name, publicKey := range map[string]string{
		"not base64":   "%%%",
		"not a key":    "aGVsbG8=",
		"an ECDSA key": base64.StdEncoding.EncodeToString(der),
	} {
		if _, err := signer.Issue(publicKey, "cluster-x-0123456789abcdef", false, time.Hour, time.Now()); err == nil {
			t.Errorf("%s: signed", name)
		}
	}
}
