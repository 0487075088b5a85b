package registration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/pkg/names"
)

// An agent whose identity expired while it was stopped (longer than
// --cluster-token-ttl) comes back by itself, proving its key with its recovery token:
// no person, no new registration token. Once an admin revoked its recovery (or deleted
// the Cluster), it does not: it logs once what a person must do, and no Cluster is
// made again.
func TestAnExpiredIdentityComesBackWithTheAgentsKey(t *testing.T) {
	t.Parallel()
	// Agents renew after 5 s, and get their recovery token with the first renewal.
	// Token identities: TestCertificateIdentities recovers a certificate identity.
	hub := framework.StartHub(t, "--agent-token-renew-after", "5s", "--cluster-identities=tokens")
	ds := framework.StartControlPlane(t, "downstream")
	framework.InstallAgent(t, ds, hub.CreateToken(workspace, "shared", "1h"))
	agent := framework.StartAgent(t, ds)
	first := waitRegistered(t, ds)
	ctx := context.Background()
	framework.Eventually(t, "the agent to hold a recovery token", timeout, func(ctx context.Context) error {
		if identity(t, ds).RecoveryToken == "" {
			return errors.New("none yet")
		}
		return nil
	})

	// The agent stops; its identity expires meanwhile.
	expire := func() {
		t.Helper()
		if err := agent.Stop(); err != nil {
			t.Fatal(err)
		}
		secrets := ds.Client().CoreV1().Secrets(names.SystemNamespace)
		secret, err := secrets.Get(ctx, names.AgentIdentitySecret, framework.Get)
		if err != nil {
			t.Fatal(err)
		}
		secret.Data["token"] = []byte("expired")
		secret.Data["expires"] = []byte(time.Now().Add(-time.Hour).UTC().Format(time.RFC3339))
		if _, err := secrets.Update(ctx, secret, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	expire()
	agent.Restart()
	recovered := waitNewIdentity(t, ds, "expired")
	if recovered.ClusterName != first.ClusterName {
		t.Fatalf("the recovered agent is %s, was %s", recovered.ClusterName, first.ClusterName)
	}
	_, fleetClient := asIdentity(t, hub, recovered.Token)
	if _, err := fleetClient.FleetV1alpha1().BundleDeployments(recovered.DeploymentNamespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the recovered identity does not work: %v", err)
	}
	waitEvent(t, hub, first.ClusterName, "Recovered")
	waitReady(t, hub, first.ClusterName)

	// The recovery token alone asks for nothing the key did not sign: a request
	// without a signature is refused.
	recoveryKube, recoveryFleet := asIdentity(t, hub, recovered.RecoveryToken)
	if _, err := recoveryKube.CoreV1().Secrets(names.RegistrationNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the recovery token may list registration Secrets (err=%v)", err)
	}
	if _, err := recoveryFleet.FleetV1alpha1().BundleDeployments(recovered.DeploymentNamespace).List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("the recovery token may list BundleDeployments (err=%v)", err)
	}
	forged, _, err := sendRequest(ctx, recoveryFleet, "", first.ClientID, nil, newKey(t))
	if err == nil {
		t.Fatalf("a recovery request in the workspace %s was accepted by the API server: %s", workspace, forged.Name)
	}

	// An admin revokes the cluster's recovery: the agent, expired again, stays out and
	// says what to do, once.
	if err := hub.Client().CoreV1().ServiceAccounts(recovered.DeploymentNamespace).Delete(ctx, names.AgentRecoveryServiceAccount, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	expire()
	agent.Restart()
	framework.Eventually(t, "the agent to say it cannot come back by itself", timeout, func(ctx context.Context) error {
		if n := strings.Count(agent.Log(), "no longer accepts this cluster's recovery credential"); n != 1 {
			return fmt.Errorf("said %d times", n)
		}
		return nil
	})
	if got := identity(t, ds); got.Token != "expired" {
		t.Fatal("the revoked agent got a new identity")
	}
}
