package registration

import (
	"context"
	"fmt"
	"strings"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// sendRequest creates a request as an agent with token's values and key would, and
// returns the one-time key its answer opens with.
func sendRequest(ctx context.Context, client versioned.Interface, token, clientID string, labels map[string]string, key registration.AgentKey) (*fleet.ClusterRegistrationRequest, *registration.Opener, error) {
	req, opener, err := registration.NewRequest(workspace, token, clientID, labels, key)
	if err != nil {
		return nil, nil, err
	}
	created, err := client.FleetV1alpha1().ClusterRegistrationRequests(workspace).Create(ctx, req, metav1.CreateOptions{})
	return created, opener, err
}

// unreadAnswer has a new cluster register with the token of valuesFile and waits for
// the grant, without picking up the credential as an agent would, so its answer
// Secret stays in the registration namespace.
func unreadAnswer(t *testing.T, hub *framework.Hub, valuesFile, clientID string) *fleet.ClusterRegistrationRequest {
	t.Helper()
	values, err := framework.ReadValues(valuesFile)
	if err != nil {
		t.Fatal(err)
	}
	_, client := asIdentity(t, hub, values.Token)
	req, _, err := sendRequest(context.Background(), client, values.TokenName, clientID, nil, newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if granted, reason := waitAnswer(t, hub, req.Name); !granted {
		t.Fatalf("a new cluster was refused: %s", reason)
	}
	return req
}

// newKey is a fresh agent key.
func newKey(t *testing.T) registration.AgentKey {
	t.Helper()
	key, err := registration.NewAgentKey()
	if err != nil {
		t.Fatal(err)
	}
	return key
}

// grantedCredential is the credential the hub granted req, signed with key, as the
// agent that sent it reads it: certificates in the request's status, or a token in
// the answer Secret.
func grantedCredential(ctx context.Context, t *testing.T, hub *framework.Hub, kube kubernetes.Interface, req *fleet.ClusterRegistrationRequest,
	opener *registration.Opener, key registration.AgentKey) (registration.Credential, error) {
	t.Helper()
	got, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationRequests(req.Namespace).Get(ctx, req.Name, framework.Get)
	if err != nil {
		return registration.Credential{}, err
	}
	if got.Status.Identity == nil {
		return openAnswer(ctx, t, kube, req, opener)
	}
	cfg := hub.RESTConfig()
	cred, err := registration.CredentialFromIdentity(got.Status.Identity, key, registration.Credential{APIServerURL: cfg.Host, APIServerCA: cfg.CAData})
	cred.ClusterName = got.Status.ClusterName
	return cred, err
}

// asKey returns clients of the hub as cred, whose certificate (if any) is for key.
func asKey(t *testing.T, hub *framework.Hub, cred registration.Credential, key registration.AgentKey) (kubernetes.Interface, versioned.Interface) {
	t.Helper()
	if !cred.HasCertificate() {
		return asIdentity(t, hub, cred.Token)
	}
	auth, err := registration.NewHubAuth(cred, key)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := cred.ClientConfig(auth, registration.HubProxy{})
	if err != nil {
		t.Fatal(err)
	}
	return framework.ClientsFor(t, cfg)
}

// openAnswer reads the answer Secret of req, as the agent that sent it.
func openAnswer(ctx context.Context, t *testing.T, kube kubernetes.Interface, req *fleet.ClusterRegistrationRequest, opener *registration.Opener) (registration.Credential, error) {
	t.Helper()
	secret, err := kube.CoreV1().Secrets(names.RegistrationNamespace).Get(ctx, names.CredentialSecret(req.Spec.ClientID, req.Spec.ClientRandom), framework.Get)
	if err != nil {
		return registration.Credential{}, err
	}
	return registration.OpenAnswer(secret.Data, opener, req.Spec.ClientID, req.Spec.ClientRandom)
}

// waitAnswer waits for the hub's answer to request name: granted, or refused with a reason.
func waitAnswer(t *testing.T, hub *framework.Hub, name string) (granted bool, reason string) {
	t.Helper()
	framework.Eventually(t, "the hub to answer request "+name, timeout, func(ctx context.Context) error {
		r, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationRequests(workspace).Get(ctx, name, framework.Get)
		if err != nil {
			return err
		}
		for _, c := range r.Status.Conditions {
			if c.Type == "Ready" && c.Status == corev1.ConditionTrue {
				granted = true
				return nil
			}
			if c.Type == "Ready" && c.Status == corev1.ConditionFalse && c.Reason != "" {
				reason = c.Reason
				return nil
			}
		}
		return fmt.Errorf("no answer yet: %+v", r.Status)
	})
	return granted, reason
}

// A token holder's floods: a request with thousands of labels, more clusters than the
// token allows, refused requests without end. The API server bounds the labels, the
// token its clusters, and the hub removes refused requests after a while; the
// legitimate registrations keep working.
func TestTokenHoldersInputIsBounded(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, "--request-retention=15s")
	values, err := framework.ReadValues(hub.CreateToken(workspace, "single-use", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	hub.MustKubectl(`kind: ClusterRegistrationToken
apiVersion: fleet.cattle.io/v1alpha1
metadata: {name: single-use, namespace: clusters}
spec: {ttl: 1h, maxRegistrations: 1}
`, "apply", "-f", "-")
	_, client := asIdentity(t, hub, values.Token)
	ctx := context.Background()
	key := newKey(t)

	many := map[string]string{}
	for i := 0; i < 15000; i++ {
		many[fmt.Sprintf("label-%05d", i)] = "x"
	}
	if _, _, err := sendRequest(ctx, client, "single-use", "flood", many, key); !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "must have at most 64 items") {
		t.Fatalf("a request with 15,000 labels: %v, want it refused by the API server as invalid", err)
	}
	for _, labels := range []map[string]string{
		{strings.Repeat("k", 64): "v"},
		{"k": strings.Repeat("v", 64)},
		{"-bad/k": "v"},
	} {
		if _, _, err := sendRequest(ctx, client, "single-use", "bad-labels", labels, key); !apierrors.IsInvalid(err) {
			t.Fatalf("a request with labels %v: %v, want it refused as invalid", labels, err)
		}
	}

	sixtyFour := map[string]string{}
	for i := 0; i < 64; i++ {
		sixtyFour[fmt.Sprintf("example.com/label-%02d", i)] = strings.Repeat("v", 63)
	}
	first, _, err := sendRequest(ctx, client, "single-use", "first", sixtyFour, key)
	if err != nil {
		t.Fatalf("a request with 64 valid labels: %v", err)
	}
	if granted, reason := waitAnswer(t, hub, first.Name); !granted {
		t.Fatalf("the single-use token's first cluster was refused: %s", reason)
	}
	cluster, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, names.ClusterForClientID("first"), framework.Get)
	if err != nil || len(cluster.Labels) != 64 {
		t.Fatalf("the first cluster has %d labels (err=%v), want 64", len(cluster.Labels), err)
	}

	second, _, err := sendRequest(ctx, client, "single-use", "second", nil, newKey(t))
	if err != nil {
		t.Fatal(err)
	}
	if granted, reason := waitAnswer(t, hub, second.Name); granted || reason != "RegistrationLimitReached" {
		t.Fatalf("a second cluster with a single-use token: granted=%v reason=%q, want RegistrationLimitReached", granted, reason)
	}
	if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, names.ClusterForClientID("second"), framework.Get); !apierrors.IsNotFound(err) {
		t.Fatalf("a Cluster was made for the refused request: %v", err)
	}
	// The first cluster registering again (with its key) takes no second place.
	again, _, err := sendRequest(ctx, client, "single-use", "first", map[string]string{"again": "true"}, key)
	if err != nil {
		t.Fatal(err)
	}
	if granted, reason := waitAnswer(t, hub, again.Name); !granted {
		t.Fatalf("the first cluster registering again was refused: %s", reason)
	}
	token, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationTokens(workspace).Get(ctx, "single-use", framework.Get)
	if err != nil || len(token.Status.RegisteredClients) != 1 || token.Status.RegisteredClients[0] != names.ClientIDHash("first") {
		t.Fatalf("token status %+v (err=%v), want the first cluster's clientID hash only", token.Status, err)
	}

	// Answered requests, refused and granted, are deleted with their answer Secrets
	// once they have been kept for the retention.
	for _, req := range []*fleet.ClusterRegistrationRequest{second, again} {
		framework.Eventually(t, "request "+req.Spec.ClientID+" and its answer to be deleted", timeout, func(ctx context.Context) error {
			_, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationRequests(workspace).Get(ctx, req.Name, framework.Get)
			_, secretErr := hub.Client().CoreV1().Secrets(names.RegistrationNamespace).Get(ctx, names.CredentialSecret(req.Spec.ClientID, req.Spec.ClientRandom), framework.Get)
			if apierrors.IsNotFound(err) && apierrors.IsNotFound(secretErr) {
				return nil
			}
			return fmt.Errorf("still there (request: %v, answer: %v)", err, secretErr)
		})
	}
	if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, names.ClusterForClientID("first"), framework.Get); err != nil {
		t.Fatalf("the Cluster went with its request: %v", err)
	}
}

// A token holder labels its request with another token (for instance, to escape an
// import token's binding to one Cluster), and a cluster's agent creates Leases
// other than its heartbeat: the API server refuses both, by the hub's admission
// policies; the requests and Lease of the legitimate path are allowed.
func TestRequestsNameTheirOwnTokenAndAgentsTheirOwnLease(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	values, err := framework.ReadValues(hub.CreateToken(workspace, "mine", "1h"))
	if err != nil {
		t.Fatal(err)
	}
	hub.CreateToken(workspace, "other", "1h")
	kube, client := asIdentity(t, hub, values.Token)
	ctx := context.Background()

	_, _, err = sendRequest(ctx, client, "other", "posing", nil, newKey(t))
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "must name the token it is made with") {
		t.Fatalf("a request labelled with another token: %v, want it forbidden", err)
	}
	_, err = client.FleetV1alpha1().ClusterRegistrationRequests(workspace).Create(ctx, &fleet.ClusterRegistrationRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "request-"},
		Spec:       fleet.ClusterRegistrationRequestSpec{ClientID: "unlabelled", ClientRandom: "r"},
	}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("a request naming no token: %v, want it forbidden", err)
	}

	lasting := &fleet.ClusterRegistrationRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "request-", Labels: map[string]string{names.RegistrationTokenLabel: "mine"}, Finalizers: []string{"example.com/forever"}},
		Spec:       fleet.ClusterRegistrationRequestSpec{ClientID: "lasting", ClientRandom: "r"},
	}
	if _, err := client.FleetV1alpha1().ClusterRegistrationRequests(workspace).Create(ctx, lasting, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a request with a finalizer: %v, want it forbidden", err)
	}
	lasting.Finalizers, lasting.Annotations = nil, map[string]string{"padding": strings.Repeat("x", 200<<10)}
	if _, err := client.FleetV1alpha1().ClusterRegistrationRequests(workspace).Create(ctx, lasting, metav1.CreateOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("a request with 200 KiB of annotations: %v, want it forbidden", err)
	}

	key := newKey(t)
	req, opener, err := sendRequest(ctx, client, "mine", "honest", nil, key)
	if err != nil {
		t.Fatalf("a request labelled with its own token: %v", err)
	}
	if granted, reason := waitAnswer(t, hub, req.Name); !granted {
		t.Fatalf("the honest request was refused: %s", reason)
	}
	cred, err := grantedCredential(ctx, t, hub, kube, req, opener, key)
	if err != nil {
		t.Fatal(err)
	}
	agent, _ := asKey(t, hub, cred, key)
	lease := func(name string) error {
		_, err := agent.CoordinationV1().Leases(cred.DeploymentNamespace).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err
	}
	if err := lease("squatter"); !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), "may create only its heartbeat Lease") {
		t.Fatalf("the agent creating Lease squatter: %v, want it forbidden", err)
	}
	if err := lease(names.AgentLease); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatalf("the agent creating its heartbeat Lease: %v", err)
	}
}
