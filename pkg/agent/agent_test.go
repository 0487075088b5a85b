package agent

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

func TestAnAgentWithoutAnythingSaysHowToInstall(t *testing.T) {
	d := registration.Downstream{Client: fake.NewSimpleClientset(), Namespace: "cattle-fleet-system"}
	cred, err := tryIdentity(context.Background(), d, logrus.New())
	if cred != nil || err == nil || !strings.Contains(err.Error(), "install the fleet-agent chart with the values.yaml") {
		t.Fatalf("got %v, %v", cred, err)
	}
}

func TestAnAgentWithAnExpiredIdentitySaysWhatToDo(t *testing.T) {
	expired := registration.Credential{
		Token: "old", APIServerURL: "https://hub", ClusterName: "c1", ClusterNamespace: "clusters", DeploymentNamespace: "ns",
		Issued: time.Now().Add(-48 * time.Hour), Expires: time.Now().Add(-24 * time.Hour),
	}
	client := fake.NewSimpleClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.AgentIdentitySecret, Namespace: "cattle-fleet-system"},
		Data:       expired.SecretData(),
	})
	d := registration.Downstream{Client: client, Namespace: "cattle-fleet-system"}
	cred, err := tryIdentity(context.Background(), d, logrus.New())
	if cred != nil || err == nil {
		t.Fatalf("an expired identity was used: %v, %v", cred, err)
	}
	for _, want := range []string{"expired", "clusters/c1", "ClusterRegistrationToken", "helm"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the message lacks %q: %v", want, err)
		}
	}
}

func TestAStoredIdentityIsUsed(t *testing.T) {
	valid := registration.Credential{
		Token: "t", APIServerURL: "https://hub", ClusterName: "c1", ClusterNamespace: "clusters", DeploymentNamespace: "ns",
		Issued: time.Now(), Expires: time.Now().Add(24 * time.Hour),
	}
	client := fake.NewSimpleClientset(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.AgentIdentitySecret, Namespace: "cattle-fleet-system"},
		Data:       valid.SecretData(),
	})
	cred, err := tryIdentity(context.Background(), registration.Downstream{Client: client, Namespace: "cattle-fleet-system"}, logrus.New())
	if err != nil || cred == nil || cred.ClusterName != "c1" {
		t.Fatalf("got %v, %v", cred, err)
	}
}
