package registration

import (
	"context"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	certutil "k8s.io/client-go/util/cert"

	"github.com/flotilla/flotilla/pkg/names"
)

func TestSanitizeLabelsDropsReservedKeys(t *testing.T) {
	got := SanitizeLabels(map[string]string{
		"env": "dev", "example.com/team": "a",
		"fleet.cattle.io/cluster": "x", "management.cattle.io/owner": "y", "sub.fleet.cattle.io/z": "z",
		"notfleet.cattle.io/ok": "kept",
	})
	want := map[string]string{"env": "dev", "example.com/team": "a", "notfleet.cattle.io/ok": "kept"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestCredentialRoundTripsThroughASecret(t *testing.T) {
	issued := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	c := Credential{
		Token: "t", Issued: issued, Expires: issued.Add(24 * time.Hour), RenewAfter: 20 * time.Second,
		APIServerURL: "https://hub:6443", APIServerCA: []byte("ca"), ClusterName: "c", ClusterNamespace: "clusters",
		DeploymentNamespace: "cluster-clusters-c-1234", ClientID: "id",
	}
	got, err := CredentialFromSecretData(c.SecretData())
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, c) {
		t.Fatalf("got %+v, want %+v", got, c)
	}
	if _, err := CredentialFromSecretData(map[string][]byte{"token": []byte("t")}); err == nil || !strings.Contains(err.Error(), "apiServerURL") {
		t.Fatalf("an incomplete credential was accepted or not explained: %v", err)
	}
}

func TestRenewAt(t *testing.T) {
	issued := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	c := Credential{Issued: issued, Expires: issued.Add(24 * time.Hour)}
	if got := c.RenewAt(); !got.Equal(issued.Add(12 * time.Hour)) {
		t.Errorf("renews at %s, want half way", got)
	}
	c.RenewAfter = 20 * time.Second
	if got := c.RenewAt(); !got.Equal(issued.Add(20 * time.Second)) {
		t.Errorf("renews at %s, want after RenewAfter", got)
	}
}

const testCA = `-----BEGIN CERTIFICATE-----
MIIBfDCCASKgAwIBAgIIXF3dovvS+8gwCgYIKoZIzj0EAwIwFjEUMBIGA1UEAxML
-----END CERTIFICATE-----`

func TestDecodeCAAcceptsPEMAndBase64PEM(t *testing.T) {
	for name, in := range map[string]string{"pem": testCA, "base64": base64.StdEncoding.EncodeToString([]byte(testCA))} {
		got, err := DecodeCA(in)
		if err != nil || !strings.HasPrefix(string(got), "-----BEGIN CERTIFICATE-----") {
			t.Errorf("%s: %q, %v", name, got, err)
		}
	}
	if got, err := DecodeCA(""); err != nil || got != nil {
		t.Errorf("empty CA: %q, %v", got, err)
	}
	if _, err := DecodeCA("not a certificate"); err == nil {
		t.Error("garbage accepted as a CA")
	}
}

func TestValuesValidateNamesWhatIsMissing(t *testing.T) {
	err := Values{TokenName: "x"}.Validate()
	if err == nil || err.Error() != "registration values lack apiServerURL, clusterNamespace, systemRegistrationNamespace, token" {
		t.Fatalf("got %v", err)
	}
}

func TestExplainKeepsTheCause(t *testing.T) {
	cause := apierrors.NewUnauthorized("nope")
	err := Explain("checking in", "https://hub", cause)
	if !apierrors.IsUnauthorized(err) || !errors.Is(err, cause) {
		t.Fatal("the explained error lost its cause")
	}
	if !strings.Contains(err.Error(), "401 Unauthorized") {
		t.Fatalf("unclear: %v", err)
	}
	forbidden := Explain("x", "https://hub", apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "s", errors.New("no")))
	if !strings.Contains(forbidden.Error(), "403") {
		t.Fatalf("unclear: %v", forbidden)
	}
}

func TestSettingsAndClientIDFromTheDownstream(t *testing.T) {
	client := fake.NewSimpleClientset(
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: "uid-1"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.AgentConfigMap, Namespace: "cattle-fleet-system"},
			Data: map[string]string{"labels": `{"env":"dev"}`, "checkinInterval": "5s", "maxBundleSize": "1048576"}},
	)
	d := Downstream{Client: client, Namespace: "cattle-fleet-system"}
	ctx := context.Background()
	s, err := d.Settings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Labels["env"] != "dev" || s.CheckinInterval != 5*time.Second || s.MaxBundleSize != 1<<20 {
		t.Fatalf("settings %+v", s)
	}
	id, err := d.ClientID(ctx, s)
	if err != nil || id != "uid-1" {
		t.Fatalf("clientID %q, %v; want the kube-system UID", id, err)
	}
	s.ClientID = "really-random"
	if id, _ := d.ClientID(ctx, s); id != "really-random" {
		t.Fatalf("configured clientID ignored: %q", id)
	}

	bad := Downstream{Client: fake.NewSimpleClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: names.AgentConfigMap, Namespace: "ns"}, Data: map[string]string{"checkinInterval": "soon"}}), Namespace: "ns"}
	if _, err := bad.Settings(ctx); err == nil || !strings.Contains(err.Error(), "checkinInterval") {
		t.Fatalf("a bad interval was not explained: %v", err)
	}
	bad = Downstream{Client: fake.NewSimpleClientset(&corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: names.AgentConfigMap, Namespace: "ns"}, Data: map[string]string{"maxBundleSize": "-1"}}), Namespace: "ns"}
	if _, err := bad.Settings(ctx); err == nil || !strings.Contains(err.Error(), "maxBundleSize") {
		t.Fatalf("a bad size was not explained: %v", err)
	}
}

func TestStoreIdentityCreatesThenUpdates(t *testing.T) {
	client := fake.NewSimpleClientset()
	d := Downstream{Client: client, Namespace: "cattle-fleet-system"}
	ctx := context.Background()
	c := Credential{Token: "one", APIServerURL: "https://hub", ClusterName: "c", ClusterNamespace: "w", DeploymentNamespace: "d"}
	if err := d.StoreIdentity(ctx, c); err != nil {
		t.Fatal(err)
	}
	c.Token = "two"
	if err := d.StoreIdentity(ctx, c); err != nil {
		t.Fatal(err)
	}
	got, err := d.Identity(ctx)
	if err != nil || got == nil || got.Token != "two" {
		t.Fatalf("identity %+v, %v", got, err)
	}
	if _, err := Register(ctx, d, Values{}, logrus.New()); err == nil || !strings.Contains(err.Error(), "lack") {
		t.Fatalf("registering without values: %v", err)
	}
}

func TestExpiredAdviceSaysWhatToDo(t *testing.T) {
	c := Credential{ClusterName: "c1", ClusterNamespace: "clusters", Expires: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	advice := c.ExpiredAdvice()
	for _, want := range []string{"clusters/c1", "2026-01-01T00:00:00Z", "ClusterRegistrationToken", "helm", "redeployAgentGeneration"} {
		if !strings.Contains(advice, want) {
			t.Errorf("advice lacks %q: %s", want, advice)
		}
	}
}

func TestClusterRolesManifestParses(t *testing.T) {
	roles, err := ClusterRoles()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]bool{}
	for _, r := range roles {
		got[r.Name] = true
	}
	for _, want := range []string{names.AgentClusterRole, names.AgentContentsClusterRole, names.RegistrationClusterRole} {
		if !got[want] {
			t.Errorf("ClusterRole %s missing from manifests/clusterroles.yaml", want)
		}
	}
}

func TestExplainNamesTheUsualMistakes(t *testing.T) {
	server := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	defer server.Close()
	// A CA that did not sign the server's certificate.
	otherCAPEM, _, err := certutil.GenerateSelfSignedCertKey("other-ca", nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	cfg, err := HubConfig(server.URL, string(otherCAPEM), "token")
	if err != nil {
		t.Fatal(err)
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().Namespaces().Get(context.Background(), "x", metav1.GetOptions{})
	if msg := Explain("registering", server.URL, err).Error(); !strings.Contains(msg, "not signed by the apiServerCA") {
		t.Errorf("wrong CA: %s", msg)
	}

	closed := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {}))
	url := closed.URL
	closed.Close()
	cfg, _ = HubConfig(url, "", "token")
	client, _ = kubernetes.NewForConfig(cfg)
	_, err = client.CoreV1().Namespaces().Get(context.Background(), "x", metav1.GetOptions{})
	if msg := Explain("registering", url, err).Error(); !strings.Contains(msg, "cannot reach the hub at "+url) {
		t.Errorf("unreachable: %s", msg)
	}
}

func TestFlowControlPutsRegistrationInItsOwnLevel(t *testing.T) {
	level, schema, err := FlowControl()
	if err != nil {
		t.Fatal(err)
	}
	if *schema.Spec.PriorityLevelConfiguration.Name != *level.Name {
		t.Errorf("FlowSchema %s sends to %q, not to the priority level %s", *schema.Name, *schema.Spec.PriorityLevelConfiguration.Name, *level.Name)
	}
	// Before the API server's "service-accounts" FlowSchema, which would take them.
	if *schema.Spec.MatchingPrecedence >= 9000 {
		t.Errorf("matchingPrecedence %d comes after service-accounts (9000)", *schema.Spec.MatchingPrecedence)
	}
	q := level.Spec.Limited.LimitResponse.Queuing
	if held := *q.HandSize * *q.QueueLengthLimit; held < 1000 {
		t.Errorf("one flow (one token's agents) can queue %d requests, fewer than a thousand registering at once", held)
	}
}

func TestRequestSeconds(t *testing.T) {
	at := time.Date(2026, 12, 6, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name     string
		lifetime time.Duration
		want     int64
	}{
		{"a whole day", 24 * time.Hour, 86400},
		{"seconds a clock added are dropped", 24*time.Hour + 3*time.Second, 86400},
		{"seconds short of a minute are kept", 24*time.Hour - 3*time.Second, 86397},
		{"a lifetime of odd seconds is not asked longer", 90*time.Minute + 30*time.Second, 5400},
		{"the shortest the API allows", 10 * time.Minute, 600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := Credential{Issued: at, Expires: at.Add(tc.lifetime)}
			if got := c.RequestSeconds(); got != tc.want {
				t.Fatalf("RequestSeconds = %d, want %d", got, tc.want)
			}
		})
	}
	// A token's issue by the server's clock makes its lifetime what was asked.
	expires := at.Add(86400 * time.Second)
	if got := (Credential{Issued: TokenIssued(expires, 86400), Expires: expires}).RequestSeconds(); got != 86400 {
		t.Fatalf("after TokenIssued, RequestSeconds = %d", got)
	}
}
