package registration

import (
	"context"
	"crypto/ed25519"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// credID is what tells one identity from the next: its certificate, or its token.
func credID(c registration.Credential) string {
	if c.HasCertificate() {
		return string(c.Certificate)
	}
	return c.Token
}

// TestCertificateIdentities registers a cluster on the embedded control plane, whose
// identity is then a client certificate for the agent's key: no ServiceAccount, no
// token, no answer Secret. The agent renews it in place with the same key, comes
// back with its recovery certificate once it has expired, and a revoked or deleted
// Cluster's certificates stop working at once.
func TestCertificateIdentities(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, "--agent-token-renew-after", "5s")
	ds := framework.StartControlPlane(t, "downstream")
	framework.InstallAgent(t, ds, hub.CreateToken(workspace, "certs", "1h"))
	agent := framework.StartAgent(t, ds)
	first := waitRegistered(t, ds)
	ctx := context.Background()

	if !first.HasCertificate() || first.Token != "" || len(first.RecoveryCertificate) == 0 {
		t.Fatalf("the identity is not a pair of certificates: certificate %t, token %t, recovery certificate %t",
			first.HasCertificate(), first.Token != "", len(first.RecoveryCertificate) > 0)
	}
	cert := parseCert(t, first.Certificate)
	if cert.Subject.CommonName != names.ClusterUser(first.DeploymentNamespace) {
		t.Errorf("the certificate's subject is %q, want %q", cert.Subject.CommonName, names.ClusterUser(first.DeploymentNamespace))
	}
	if life := cert.NotAfter.Sub(cert.NotBefore); life > 25*time.Hour {
		t.Errorf("the certificate lasts %v, want the hub's --cluster-token-ttl (24h)", life)
	}
	sas, err := hub.Client().CoreV1().ServiceAccounts(first.DeploymentNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(sas.Items) != 0 {
		t.Errorf("the per-cluster namespace has %d ServiceAccounts, want none", len(sas.Items))
	}
	answers, err := hub.Client().CoreV1().Secrets(names.RegistrationNamespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range answers.Items {
		if string(s.Type) == names.CredentialSecretType {
			t.Errorf("an answer Secret %s was written for a certificate identity", s.Name)
		}
	}
	waitReady(t, hub, first.ClusterName)

	// Renewed in place, with the same key, every 5 s.
	renewed := waitNewIdentity(t, ds, credID(first))
	if key, ok := parseCert(t, renewed.Certificate).PublicKey.(ed25519.PublicKey); !ok || !key.Equal(cert.PublicKey) {
		t.Error("the renewed certificate is for another key")
	}
	_, fleetClient := hub.AsCluster(ds, names.SystemNamespace, renewed)
	if _, err := fleetClient.FleetV1alpha1().BundleDeployments(renewed.DeploymentNamespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the renewed identity does not work: %v", err)
	}

	// The agent stops and its identity expires: it comes back with its recovery
	// certificate, proving its key.
	expire := func() registration.Credential {
		t.Helper()
		if err := agent.Stop(); err != nil {
			t.Fatal(err)
		}
		secrets := ds.Client().CoreV1().Secrets(names.SystemNamespace)
		secret, err := secrets.Get(ctx, names.AgentIdentitySecret, framework.Get)
		if err != nil {
			t.Fatal(err)
		}
		secret.Data["expires"] = []byte(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
		if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		return identity(t, ds)
	}
	expired := expire()
	agent.Restart()
	recovered := waitNewIdentity(t, ds, credID(expired))
	if recovered.ClusterName != first.ClusterName {
		t.Fatalf("the recovered agent is %s, was %s", recovered.ClusterName, first.ClusterName)
	}
	waitEvent(t, hub, first.ClusterName, "Recovered")

	// The recovery certificate may ask for a new identity and nothing more.
	recoveryAs := recovered
	recoveryAs.Certificate = recovered.RecoveryCertificate
	_, recoveryFleet := hub.AsCluster(ds, names.SystemNamespace, recoveryAs)
	if _, err := recoveryFleet.FleetV1alpha1().BundleDeployments(recovered.DeploymentNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the recovery certificate may list BundleDeployments (err=%v)", err)
	}

	// An admin revokes the identity by removing the key its namespace names: every
	// certificate stops working at once, and the agent, expired again, stays out.
	kube, _ := hub.AsCluster(ds, names.SystemNamespace, recovered)
	patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:null}}}`, names.AgentKeyAnnotation)
	if _, err := hub.Client().CoreV1().Namespaces().Patch(ctx, recovered.DeploymentNamespace, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the revoked certificate to be refused", timeout, func(ctx context.Context) error {
		_, err := kube.CoordinationV1().Leases(recovered.DeploymentNamespace).Get(ctx, "fleet-agent", framework.Get)
		if !apierrors.IsForbidden(err) {
			return fmt.Errorf("got %v, want 403", err)
		}
		return nil
	})
	stale := expire()
	agent.Restart()
	framework.Eventually(t, "the agent to say it cannot come back by itself", timeout, func(ctx context.Context) error {
		if n := strings.Count(agent.Log(), "no longer accepts this cluster's recovery credential"); n != 1 {
			return fmt.Errorf("said %d times", n)
		}
		return nil
	})
	if got := identity(t, ds); credID(got) != credID(stale) {
		t.Fatal("the revoked agent got a new identity")
	}
}

// TestADeletedClustersCertificateStopsWorking deletes a registered Cluster: its
// agent's certificate, valid for another day, is refused as soon as the Cluster's
// namespace is being deleted.
func TestADeletedClustersCertificateStopsWorking(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "downstream")
	framework.InstallAgent(t, ds, hub.CreateToken(workspace, "certs", "1h"))
	agent := framework.StartAgent(t, ds)
	cred := waitRegistered(t, ds)
	waitReady(t, hub, cred.ClusterName)
	if err := agent.Stop(); err != nil {
		t.Fatal(err)
	}
	_, fleetClient := hub.AsCluster(ds, names.SystemNamespace, cred)
	ctx := context.Background()
	if _, err := fleetClient.FleetV1alpha1().Contents().Get(ctx, "s-nothing", framework.Get); !apierrors.IsNotFound(err) {
		t.Fatalf("before the delete a Content get gives %v, want 404", err)
	}
	if err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Delete(ctx, cred.ClusterName, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the deleted Cluster's certificate to be refused", timeout, func(ctx context.Context) error {
		// Contents are cluster-scoped: only the identity authorizer stands between
		// a deleted Cluster's certificate and them.
		if _, err := fleetClient.FleetV1alpha1().Contents().Get(ctx, "s-nothing", framework.Get); !apierrors.IsForbidden(err) {
			return fmt.Errorf("got %v, want 403", err)
		}
		return nil
	})
}

func parseCert(t *testing.T, data []byte) *x509.Certificate {
	t.Helper()
	block, _ := pem.Decode(data)
	if block == nil {
		t.Fatal("not PEM")
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
