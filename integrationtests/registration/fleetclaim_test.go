package registration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/kubeconfig"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// registerAsFleetsAgent does, through the API, what Fleet's agent does with a
// token's values (integrationtests/fleet runs Fleet's agent itself): it creates a
// ClusterRegistration with the token, reads the answer Fleet's agent reads, in the
// clear, and leaves its identity downstream in the fleet-agent Secret in Fleet's
// form (a hub kubeconfig beside the Cluster's names). It returns that identity's token
// and the Cluster's name.
func registerAsFleetsAgent(t *testing.T, hub *framework.Hub, ds *framework.Cluster, valuesFile string) (string, string) {
	t.Helper()
	ctx := context.Background()
	values, err := framework.ReadValues(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	kubeSystem, err := ds.Client().CoreV1().Namespaces().Get(ctx, "kube-system", framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	random := make([]byte, 16)
	if _, err := rand.Read(random); err != nil {
		t.Fatal(err)
	}
	clientID, clientRandom := string(kubeSystem.UID), hex.EncodeToString(random)
	tokenKube, tokenFleet := hub.As(values.Token)
	_, err = tokenFleet.FleetV1alpha1().ClusterRegistrations(values.ClusterNamespace).Create(ctx, &fleet.ClusterRegistration{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "request-", Labels: map[string]string{names.RegistrationTokenLabel: values.TokenName}},
		Spec:       fleet.ClusterRegistrationSpec{ClientID: clientID, ClientRandom: clientRandom},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var answer *corev1.Secret
	framework.Eventually(t, "the answer to the ClusterRegistration", timeout, func(ctx context.Context) error {
		answer, err = tokenKube.CoreV1().Secrets(values.SystemRegistrationNamespace).Get(ctx, names.FleetAnswerSecret(clientID, clientRandom), framework.Get)
		return err
	})
	ca, err := registration.DecodeCA(values.APIServerCA)
	if err != nil {
		t.Fatal(err)
	}
	cfg := kubeconfig.New("hub", values.APIServerURL, ca, kubeconfig.Credential{Token: string(answer.Data["token"])})
	cfg.Contexts["hub"].Namespace = string(answer.Data["deploymentNamespace"])
	raw, err := clientcmd.Write(*cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ds.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names.SystemNamespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	_, err = ds.Client().CoreV1().Secrets(names.SystemNamespace).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.AgentIdentitySecret},
		Data: map[string][]byte{
			"kubeconfig":          raw,
			"clusterName":         answer.Data["clusterName"],
			"clusterNamespace":    answer.Data["clusterNamespace"],
			"deploymentNamespace": answer.Data["deploymentNamespace"],
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return string(answer.Data["token"]), string(answer.Data["clusterName"])
}

// Flotilla's agent, started where Fleet's agent registered (the agent bundle deploys
// it over Fleet's release), carries on as the same Cluster, binds its key to it with
// the identity Fleet's agent left, and stores its own; Fleet's agent's token stops
// working.
func TestFlotillasAgentClaimsTheClusterFleetsAgentRegistered(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "was-fleets")
	fleetToken, clusterName := registerAsFleetsAgent(t, hub, ds, hub.CreateToken(workspace, "for-fleet", "1h"))
	c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(context.Background(), clusterName, framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	if c.Annotations[names.AgentKeyAnnotation] != "" {
		t.Fatalf("a key is recorded before any agent had one: %v", c.Annotations)
	}

	framework.StartAgent(t, ds)
	waitEvent(t, hub, clusterName, "KeyBound", "registered by Fleet's agent")
	framework.Eventually(t, "the agent to store its own identity", timeout, func(ctx context.Context) error {
		if err := framework.Registered(ctx, ds); err != nil {
			return err
		}
		if id := identity(t, ds); credID(id) == fleetToken || !id.CanRecover(time.Now()) {
			return errors.New("still Fleet's agent's token, or no recovery credential yet")
		}
		return nil
	})
	id := identity(t, ds)
	if !id.HasCertificate() {
		t.Errorf("the claimed identity is a token, want a certificate")
	}
	if id.ClusterName != clusterName || id.KeyUnbound {
		t.Errorf("identity of %s, key unbound %t; want %s, bound", id.ClusterName, id.KeyUnbound, clusterName)
	}
	key, err := registration.Downstream{Client: ds.Client(), Namespace: names.SystemNamespace}.Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cluster := waitReady(t, hub, clusterName)
	if got, want := cluster.Annotations[names.AgentKeyAnnotation], registration.Fingerprint(key.PublicKey()); got != want {
		t.Errorf("the Cluster records key %q, the agent holds %q", got, want)
	}
	clusters, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(clusters.Items) != 1 {
		t.Errorf("want the one Cluster Fleet's agent registered (err=%v, %d)", err, len(clusters.Items))
	}
	framework.Eventually(t, "Fleet's agent's token to stop working", timeout, func(ctx context.Context) error {
		_, fleetClient := asIdentity(t, hub, fleetToken)
		_, err := fleetClient.FleetV1alpha1().BundleDeployments(id.DeploymentNamespace).List(ctx, metav1.ListOptions{})
		if apierrors.IsUnauthorized(err) {
			return nil
		}
		return fmt.Errorf("listing BundleDeployments with it: %v", err)
	})
}

// A hub that recovers no identities (--cluster-recovery-ttl 0) binds no key either:
// Flotilla's agent says why once, works as the Cluster with Fleet's agent's
// credential, and keeps it marked as unbound, to ask again when it next starts.
func TestWithoutRecoveryTheAgentCarriesOnUnbound(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, "--cluster-recovery-ttl", "0")
	ds := framework.StartControlPlane(t, "unbound")
	fleetToken, clusterName := registerAsFleetsAgent(t, hub, ds, hub.CreateToken(workspace, "for-fleet", "1h"))
	agent := framework.StartAgent(t, ds)
	waitReady(t, hub, clusterName)
	framework.Eventually(t, "the agent to say it cannot bind its key", timeout, func(ctx context.Context) error {
		if !strings.Contains(agent.Log(), "does not let this agent bind its key") {
			return errors.New("not said yet")
		}
		return nil
	})
	framework.Eventually(t, "the agent to renew Fleet's agent's credential", timeout, func(ctx context.Context) error {
		if err := framework.Registered(ctx, ds); err != nil {
			return err
		}
		id := identity(t, ds)
		if id.Token == fleetToken || !id.KeyUnbound || id.ClusterName != clusterName {
			return fmt.Errorf("identity of %s, unbound %t, renewed %t", id.ClusterName, id.KeyUnbound, id.Token != fleetToken)
		}
		return nil
	})
	c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(context.Background(), clusterName, framework.Get)
	if err != nil || c.Annotations[names.AgentKeyAnnotation] != "" {
		t.Errorf("Cluster %s: key %q (err=%v), want none", clusterName, c.Annotations[names.AgentKeyAnnotation], err)
	}
}
