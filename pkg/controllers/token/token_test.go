package token

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

func TestCredentialLifetime(t *testing.T) {
	created := time.Date(2026, 12, 2, 10, 0, 0, 0, time.UTC)
	year := 365 * 24 * time.Hour
	cases := []struct {
		name string
		ttl  *metav1.Duration
		now  time.Time
		want time.Duration
	}{
		{"no ttl", nil, created, year},
		{"zero ttl", &metav1.Duration{}, created, year},
		{"negative ttl", &metav1.Duration{Duration: -time.Hour}, created, year},
		{"240h at creation", &metav1.Duration{Duration: 240 * time.Hour}, created, 240 * time.Hour},
		{"what is left", &metav1.Duration{Duration: 240 * time.Hour}, created.Add(40 * time.Hour), 200 * time.Hour},
		{"shorter than the API allows", &metav1.Duration{Duration: time.Minute}, created, 10 * time.Minute},
	}
	for _, c := range cases {
		if got := CredentialLifetime(created, c.now, c.ttl, year); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
	if !Expiry(created, nil).IsZero() || !Expiry(created, &metav1.Duration{Duration: time.Hour}).Equal(created.Add(time.Hour)) {
		t.Error("Expiry is wrong")
	}
}

func TestValuesSecretIsTheChartsValues(t *testing.T) {
	token := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Name: "new-token", Namespace: "clusters", UID: "u"}}
	secret, err := ValuesSecret(token, registration.Values{Token: "jwt", TokenName: "new-token", APIServerURL: "https://hub:6443",
		ClusterNamespace: "clusters", SystemRegistrationNamespace: names.RegistrationNamespace})
	if err != nil {
		t.Fatal(err)
	}
	if secret.Name != "new-token" || string(secret.Type) != "fleet.cattle.io/cluster-registration-values" {
		t.Fatalf("secret %s of type %s", secret.Name, secret.Type)
	}
	if !metav1.IsControlledBy(secret, token) {
		t.Fatal("the values Secret is not owned by its token")
	}
	want := "apiServerCA: \"\"\napiServerURL: https://hub:6443\nclusterNamespace: clusters\nsystemRegistrationNamespace: cattle-fleet-clusters-system\ntoken: jwt\ntokenName: new-token\n"
	if got := string(secret.Data["values"]); got != want {
		t.Fatalf("values.yaml:\n%s\nwant:\n%s", got, want)
	}
}
