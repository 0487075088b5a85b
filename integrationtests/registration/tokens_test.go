package registration

import (
	"context"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/pkg/names"
)

// The attack of issue 35 on credential lifetimes: a cluster identity, which may mint
// tokens for itself and its recovery ServiceAccount, asks for a 364-day token although
// the hub gives 2-hour ones. The API server refuses it with the bound, on the embedded
// control plane and on an existing cluster the hub is installed into; the lifetimes
// the hub gives are minted as before.
func TestClusterIdentitiesCannotMintLongerTokens(t *testing.T) {
	t.Parallel()
	ttls := []string{"--cluster-token-ttl=2h", "--cluster-recovery-ttl=48h"}
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) *framework.Hub
	}{
		// Token identities; a certificate identity may mint no tokens at all
		// (TestCertificateIdentities, and the identity authorizer's unit tests).
		{"embedded", func(t *testing.T) *framework.Hub {
			return framework.StartHub(t, append(ttls, "--cluster-identities=tokens")...)
		}},
		{"on an existing cluster", func(t *testing.T) *framework.Hub {
			return framework.StartHubOn(t, framework.StartControlPlane(t, "existing"), ttls...)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			hub := tc.start(t)
			values, err := framework.ReadValues(hub.CreateToken(workspace, "mint", "1h"))
			if err != nil {
				t.Fatal(err)
			}
			kube, client := asIdentity(t, hub, values.Token)
			ctx := context.Background()
			req, opener, err := sendRequest(ctx, client, "mint", "minter", nil, newKey(t))
			if err != nil {
				t.Fatal(err)
			}
			if granted, reason := waitAnswer(t, hub, req.Name); !granted {
				t.Fatalf("the request was refused: %s", reason)
			}
			cred, err := openAnswer(ctx, t, kube, req, opener)
			if err != nil {
				t.Fatal(err)
			}
			if got := cred.RequestSeconds(); got != 7200 {
				t.Errorf("the credential's lifetime is %d s, want the hub's 7200", got)
			}
			agent, _ := asIdentity(t, hub, cred.Token)
			sas := agent.CoreV1().ServiceAccounts(cred.DeploymentNamespace)
			mint := func(sa string, lifetime time.Duration) error {
				seconds := int64(lifetime / time.Second)
				_, err := sas.CreateToken(ctx, sa, &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, metav1.CreateOptions{})
				return err
			}
			if _, err := sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: names.AgentRecoveryServiceAccount}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				t.Fatal(err)
			}
			for _, c := range []struct {
				sa       string
				lifetime time.Duration
				refused  string
			}{
				{names.AgentIdentityServiceAccount, 364 * 24 * time.Hour, "may mint a token for fleet-agent of at most 7200 seconds"},
				{names.AgentIdentityServiceAccount, 2*time.Hour + time.Second, "of at most 7200 seconds"},
				{names.AgentRecoveryServiceAccount, 364 * 24 * time.Hour, "may mint a token for fleet-agent-recovery of at most 172800 seconds"},
				{names.AgentIdentityServiceAccount, 2 * time.Hour, ""},
				{names.AgentRecoveryServiceAccount, 48 * time.Hour, ""},
			} {
				err := mint(c.sa, c.lifetime)
				switch {
				case c.refused == "" && err != nil:
					t.Errorf("minting %s for %s, as the hub gives: %v", c.sa, c.lifetime, err)
				case c.refused != "" && (!apierrors.IsForbidden(err) || !strings.Contains(err.Error(), c.refused)):
					t.Errorf("minting %s for %s: %v, want it forbidden: %s", c.sa, c.lifetime, err, c.refused)
				}
			}
		})
	}
}
