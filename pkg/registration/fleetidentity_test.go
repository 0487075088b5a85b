package registration

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flotilla/flotilla/pkg/names"
)

// fleetKubeconfigOf is a kubeconfig as Fleet's agent writes it: the bootstrap
// kubeconfig with the identity's token and the per-cluster namespace.
func fleetKubeconfigOf(server, token, user string) string {
	return fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: cluster
  cluster:
    server: %s
    certificate-authority-data: %s
contexts:
- name: default
  context:
    cluster: cluster
    user: user
    namespace: cluster-clusters-c-0123
current-context: default
users:
- name: user
  user:
%s
`, server, base64.StdEncoding.EncodeToString([]byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")), user+"\n    token: "+token)
}

func jwtWithExpiry(exp int64) string {
	enc := base64.RawURLEncoding
	return enc.EncodeToString([]byte(`{"alg":"RS256"}`)) + "." + enc.EncodeToString([]byte(fmt.Sprintf(`{"exp":%d,"sub":"system:serviceaccount:x:fleet-agent"}`, exp))) + ".c2ln"
}

func fleetIdentityData(kubeconfig string) map[string][]byte {
	return map[string][]byte{
		fleetKubeconfig:         []byte(kubeconfig),
		credClusterName:         []byte("c-0123"),
		credClusterNamespace:    []byte("clusters"),
		credDeploymentNamespace: []byte("cluster-clusters-c-0123"),
	}
}

func TestCredentialFromFleetIdentity(t *testing.T) {
	expires := time.Now().Add(168 * time.Hour).Truncate(time.Second)
	token := jwtWithExpiry(expires.Unix())
	missingName := fleetIdentityData(fleetKubeconfigOf("https://hub:6443", token, ""))
	delete(missingName, credClusterName)
	for _, tc := range []struct {
		name    string
		data    map[string][]byte
		wantErr string
	}{
		{name: "as Fleet's agent writes it", data: fleetIdentityData(fleetKubeconfigOf("https://hub:6443", token, ""))},
		{name: "no cluster name", data: missingName, wantErr: "lacks clusterName"},
		{name: "no token", data: fleetIdentityData(strings.Replace(fleetKubeconfigOf("https://hub:6443", "x", ""), "    token: x", "", 1)), wantErr: "has no token"},
		// The Secret is downstream data: a kubeconfig in it runs nothing and reads no file.
		{name: "a program to run", data: fleetIdentityData(fleetKubeconfigOf("https://hub:6443", token, "    exec:\n      apiVersion: client.authentication.k8s.io/v1\n      command: /bin/sh")), wantErr: "exec is not allowed"},
		{name: "a file to read", data: fleetIdentityData(fleetKubeconfigOf("https://hub:6443", token, "    tokenFile: /var/run/secrets/hub")), wantErr: "tokenFile is not allowed"},
		{name: "a huge kubeconfig", data: fleetIdentityData(fleetKubeconfigOf("https://hub:6443", token, "") + "# " + strings.Repeat("x", 300<<10)), wantErr: "more than"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := credentialFromFleetIdentity(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Token != token || c.APIServerURL != "https://hub:6443" || !strings.Contains(string(c.APIServerCA), "BEGIN CERTIFICATE") ||
				c.ClusterName != "c-0123" || c.ClusterNamespace != "clusters" || c.DeploymentNamespace != "cluster-clusters-c-0123" {
				t.Errorf("credential %+v", c)
			}
			if !c.KeyUnbound || !c.Expires.Equal(expires) || !c.Issued.IsZero() {
				t.Errorf("unbound %t, expires %s (want %s), issued %s", c.KeyUnbound, c.Expires, expires, c.Issued)
			}
			// Its issue unknown, it is replaced at once.
			if !c.RenewAt().Before(time.Now()) {
				t.Errorf("renews at %s", c.RenewAt())
			}
		})
	}
}

func TestTokenExpiry(t *testing.T) {
	for _, tc := range []struct {
		name  string
		token string
		want  int64
	}{
		{name: "a JWT", token: jwtWithExpiry(1900000000), want: 1900000000},
		{name: "opaque", token: "abcdef"},
		{name: "bad base64", token: "a.!!!.c"},
		{name: "no exp", token: "a." + base64.RawURLEncoding.EncodeToString([]byte(`{}`)) + ".c"},
		{name: "too long", token: "a." + strings.Repeat("e", maxTokenSize) + ".c"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tokenExpiry(tc.token)
			if tc.want == 0 {
				if err == nil {
					t.Fatalf("expiry %s, want an error", got)
				}
				return
			}
			if err != nil || got.Unix() != tc.want {
				t.Fatalf("expiry %s, %v; want %d", got, err, tc.want)
			}
		})
	}
}

// Flotilla's agent, started where Fleet's agent ran, reads its identity, keeps its key
// in the same Secret, and replaces Fleet's form with its own in place.
func TestFleetsIdentityIsReadThenReplacedInPlace(t *testing.T) {
	token := jwtWithExpiry(time.Now().Add(time.Hour).Unix())
	client := fake.NewSimpleClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.AgentIdentitySecret, Namespace: names.SystemNamespace},
		Type:       corev1.SecretTypeOpaque,
		Data:       fleetIdentityData(fleetKubeconfigOf("https://hub:6443", token, "")),
	})
	d := Downstream{Client: client, Namespace: names.SystemNamespace}
	ctx := context.Background()
	cred, err := d.Identity(ctx)
	if err != nil || cred == nil || !cred.KeyUnbound || cred.Token != token {
		t.Fatalf("identity %+v, %v", cred, err)
	}
	key, err := d.Key(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Still Fleet's identity, now with the key beside it.
	if again, err := d.Identity(ctx); err != nil || again == nil || !again.KeyUnbound {
		t.Fatalf("identity with the key stored: %+v, %v", again, err)
	}
	bound := *cred
	bound.KeyUnbound, bound.Token, bound.ClientID = false, "flotilla-token", "kube-system-uid"
	if err := d.StoreIdentity(ctx, bound); err != nil {
		t.Fatal(err)
	}
	secret, err := client.CoreV1().Secrets(names.SystemNamespace).Get(ctx, names.AgentIdentitySecret, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() == "delete" {
			t.Errorf("the Secret holding the key was deleted (%v): a crash then would lose the key", a)
		}
	}
	if _, ok := secret.Data[fleetKubeconfig]; ok {
		t.Error("Fleet's kubeconfig, with its revoked token, is still stored")
	}
	stored, err := d.Identity(ctx)
	if err != nil || stored.KeyUnbound || stored.Token != "flotilla-token" {
		t.Fatalf("stored identity %+v, %v", stored, err)
	}
	if again, err := d.Key(ctx); err != nil || string(again.PEM()) != string(key.PEM()) {
		t.Fatalf("the key changed (%v)", err)
	}
}

func TestAnUnboundCredentialStaysUnboundThroughASecret(t *testing.T) {
	c := Credential{Token: "t", APIServerURL: "https://hub", ClusterName: "c", ClusterNamespace: "w", DeploymentNamespace: "d", KeyUnbound: true}
	got, err := CredentialFromSecretData(c.SecretData())
	if err != nil || !got.KeyUnbound {
		t.Fatalf("%+v, %v", got, err)
	}
	c.KeyUnbound = false
	if got, _ := CredentialFromSecretData(c.SecretData()); got.KeyUnbound {
		t.Fatal("a bound credential reads back unbound")
	}
}
