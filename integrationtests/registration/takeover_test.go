package registration

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// A holder of a token that many clusters share (and that stays readable downstream)
// tries to take over a registered cluster: a request with its clientID and a key of
// its own, a replay of the cluster's last request, reading and deleting the answers
// meant for other agents. The hub refuses each, says so where people look, and the
// cluster keeps its identity. The legitimate paths still work: the cluster
// re-registering with its key, and an agent that lost its key coming back once an
// admin allows it with a token bound to the Cluster.
//
// The hub hands out token identities here, whose sealed answer Secrets a token
// holder may read by name; certificate identities leave no answer to read
// (TestCertificateIdentities).
func TestATokenHolderCannotTakeOverACluster(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, "--cluster-identities=tokens")
	ds := framework.StartControlPlane(t, "victim")
	valuesFile := hub.CreateToken(workspace, "shared", "")
	values, err := framework.ReadValues(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	framework.InstallAgent(t, ds, valuesFile)
	agent := framework.StartAgent(t, ds)
	victim := waitRegistered(t, ds)
	waitAgentBundleDeployed(t, ds)
	ctx := context.Background()
	cluster, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, victim.ClusterName, framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	firstKey := cluster.Annotations[names.AgentKeyAnnotation]
	if firstKey != registration.Fingerprint(downstreamKey(t, ds).PublicKey()) {
		t.Fatalf("the Cluster records key %q, not the agent's", firstKey)
	}
	lastUID, _, _ := strings.Cut(cluster.Annotations[names.AgentKeyProofAnnotation], " ")
	holderKube, holder := asIdentity(t, hub, values.Token)

	// 1. The victim's clientID with the attacker's own key.
	attack, attackOpener, err := sendRequest(ctx, holder, "shared", victim.ClientID, nil, newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if granted, reason := waitAnswer(t, hub, attack.Name); granted || reason != "KeyMismatch" {
		t.Fatalf("a request for the victim's clientID with another key: granted=%v reason=%q, want KeyMismatch", granted, reason)
	}
	// The attacker's agent learns why at once, and what would allow it, but not
	// which Cluster holds the clientID or its key: the admin's event says that.
	read, err := holder.FleetV1alpha1().ClusterRegistrationRequests(workspace).Get(ctx, attack.Name, framework.Get)
	if err != nil {
		t.Fatalf("the attacker cannot read the answer to its request: %v", err)
	}
	refused := conditions.Get(read.Status.Conditions, fleet.ConditionReady)
	if refused == nil || refused.Reason != "KeyMismatch" || !strings.Contains(refused.Message, names.ClusterLabel+"=") {
		t.Fatalf("the answer to the attacker: %+v, want a KeyMismatch refusal saying how to allow it", refused)
	}
	if strings.Contains(refused.Message, victim.ClusterName) || strings.Contains(refused.Message, "SHA256:") {
		t.Fatalf("the answer to the attacker names the victim's Cluster or key: %s", refused.Message)
	}
	waitEvent(t, hub, victim.ClusterName, "RegistrationRefused", names.ClusterLabel+"="+victim.ClusterName)

	// 2. A replay of the victim's own last request (as someone who may read requests
	// could send it): signed by the right key, but not after the last one accepted.
	requests, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationRequests(workspace).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var granted *fleet.ClusterRegistrationRequest
	for i := range requests.Items {
		if string(requests.Items[i].UID) == lastUID {
			granted = &requests.Items[i]
		}
	}
	if granted == nil {
		t.Fatalf("no request with the UID %q the Cluster records", lastUID)
	}
	replay := &fleet.ClusterRegistrationRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "request-", Labels: granted.Labels},
		Spec:       granted.Spec,
	}
	replay, err = holder.FleetV1alpha1().ClusterRegistrationRequests(workspace).Create(ctx, replay, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ok, reason := waitAnswer(t, hub, replay.Name); ok || reason != "StaleSignature" {
		t.Fatalf("a replay of the victim's request: granted=%v reason=%q, want StaleSignature", ok, reason)
	}

	// The victim's identity is untouched and still works.
	if got := identity(t, ds); got.Token != victim.Token {
		t.Fatal("the victim's identity changed")
	}
	_, victimFleet := asIdentity(t, hub, victim.Token)
	if _, err := victimFleet.FleetV1alpha1().BundleDeployments(victim.DeploymentNamespace).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatalf("the victim's identity stopped working: %v", err)
	}

	// 3. An answer the token may read by name (its agent has not picked it up yet)
	// is sealed: the token holder reads no credential, and may not delete answers
	// of another token's requests.
	unread := unreadAnswer(t, hub, hub.CreateToken(workspace, "other", ""), "unread")
	answerName := names.CredentialSecret(unread.Spec.ClientID, unread.Spec.ClientRandom)
	answer, err := holderKube.CoreV1().Secrets(names.RegistrationNamespace).Get(ctx, answerName, framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registration.CredentialFromSecretData(answer.Data); err == nil || len(answer.Data[registration.AnswerSealed]) == 0 {
		t.Fatalf("the answer holds a credential in the clear: keys %v", keys(answer.Data))
	}
	if _, err := registration.OpenAnswer(answer.Data, attackOpener, unread.Spec.ClientID, unread.Spec.ClientRandom); err == nil {
		t.Fatal("another request's key opened the answer")
	}
	err = holderKube.CoreV1().Secrets(names.RegistrationNamespace).Delete(ctx, answerName, metav1.DeleteOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "only the answers to its own requests") {
		t.Fatalf("another token deleting the answer: %v, want it forbidden", err)
	}

	// The legitimate paths. The victim re-registers with its key: granted, into the
	// same Cluster.
	reinstall(t, ds, valuesFile)
	again := waitNewIdentity(t, ds, victim.Token)
	if again.ClusterName != victim.ClusterName {
		t.Fatalf("re-registering with its key moved the agent to %s", again.ClusterName)
	}

	// The agent loses its key (its identity Secret is deleted): the shared token no
	// longer registers it, and the agent says, once, what a person must do.
	if err := ds.Client().CoreV1().Secrets(names.SystemNamespace).Delete(ctx, names.AgentIdentitySecret, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	reinstall(t, ds, valuesFile)
	framework.Eventually(t, "the agent to log the refusal", timeout, func(ctx context.Context) error {
		if n := strings.Count(agent.Log(), "refused the registration (KeyMismatch)"); n != 1 {
			return fmt.Errorf("%d refusals in the agent's log", n)
		}
		return nil
	})
	// An admin allows it: a token bound to the Cluster.
	reinstall(t, ds, hub.CreateBoundToken(workspace, "readmit", victim.ClusterName))
	readmitted := waitNewIdentity(t, ds, again.Token)
	if readmitted.ClusterName != victim.ClusterName {
		t.Fatalf("the readmitted agent is %s, want %s", readmitted.ClusterName, victim.ClusterName)
	}
	framework.Eventually(t, "the Cluster to record the new key", timeout, func(ctx context.Context) error {
		c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, victim.ClusterName, framework.Get)
		if err != nil {
			return err
		}
		if got, want := c.Annotations[names.AgentKeyAnnotation], registration.Fingerprint(downstreamKey(t, ds).PublicKey()); got != want || want == firstKey {
			return fmt.Errorf("records %q, want the new key %q (the first was %q)", got, want, firstKey)
		}
		return nil
	})
}

// downstreamKey is the agent key kept in ds's identity Secret.
func downstreamKey(t *testing.T, ds *framework.Cluster) registration.AgentKey {
	t.Helper()
	key, err := registration.Downstream{Client: ds.Client(), Namespace: names.SystemNamespace}.Key(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// reinstall hands the agent of ds the values of valuesFile in its bootstrap Secret,
// as `helm upgrade --values` of the agent chart does.
func reinstall(t *testing.T, ds *framework.Cluster, valuesFile string) {
	t.Helper()
	values, err := framework.ReadValues(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.AgentBootstrapSecret, Namespace: names.SystemNamespace},
		Data: map[string][]byte{
			registration.KeyToken: []byte(values.Token), registration.KeyTokenName: []byte(values.TokenName),
			registration.KeyAPIServerURL: []byte(values.APIServerURL), registration.KeyAPIServerCA: []byte(values.APIServerCA),
			registration.KeyClusterNamespace:            []byte(values.ClusterNamespace),
			registration.KeySystemRegistrationNamespace: []byte(values.SystemRegistrationNamespace),
		},
	}
	secrets := ds.Client().CoreV1().Secrets(names.SystemNamespace)
	_, err = secrets.Create(context.Background(), secret, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		// One the agent keeps because the hub refused it: replaced, as helm upgrade does.
		_, err = secrets.Update(context.Background(), secret, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatal(err)
	}
}

// waitNewIdentity waits until the agent of ds has consumed its bootstrap Secret and
// holds an identity other than the one with token previous.
func waitNewIdentity(t *testing.T, ds *framework.Cluster, previous string) registration.Credential {
	t.Helper()
	framework.Eventually(t, ds.Name+" to register again", timeout, func(ctx context.Context) error {
		if _, err := ds.Client().CoreV1().Secrets(names.SystemNamespace).Get(ctx, names.AgentBootstrapSecret, framework.Get); !apierrors.IsNotFound(err) {
			return fmt.Errorf("bootstrap Secret not consumed yet (err=%v)", err)
		}
		if err := framework.Registered(ctx, ds); err != nil {
			return err
		}
		if credID(identity(t, ds)) == previous {
			return errors.New("identity not replaced yet")
		}
		return nil
	})
	return identity(t, ds)
}

// waitEvent waits for an event with reason on Cluster name.
// waitEvent waits for an event with reason on Cluster name whose message says each
// of want.
func waitEvent(t *testing.T, hub *framework.Hub, name, reason string, want ...string) {
	t.Helper()
	framework.Eventually(t, "a "+reason+" event on Cluster "+name, timeout, func(ctx context.Context) error {
		events, err := hub.Client().CoreV1().Events(workspace).List(ctx, metav1.ListOptions{
			FieldSelector: "involvedObject.kind=Cluster,involvedObject.name=" + name + ",reason=" + reason})
		if err != nil || len(events.Items) == 0 {
			return fmt.Errorf("none yet (%v)", err)
		}
		for _, w := range want {
			if !strings.Contains(events.Items[0].Message, w) {
				return fmt.Errorf("the event says %q, want %q", events.Items[0].Message, w)
			}
		}
		return nil
	})
}

func keys(data map[string][]byte) []string {
	var out []string
	for k := range data {
		out = append(out, k)
	}
	return out
}
