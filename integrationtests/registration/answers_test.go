package registration

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// TestAnswersWhoseRequestIsGoneAreRemoved plants a registration answer whose request
// does not exist, as a request deleted while its answer was being written leaves
// one: the hub removes it, and keeps the answer of a request that exists.
func TestAnswersWhoseRequestIsGoneAreRemoved(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ctx := context.Background()
	hub.MustKubectl("", "create", "namespace", workspace)
	// A request that exists, with an answer Secret, as a token credential is answered
	// (the hub writes none for a refusal, which the request's status says).
	req, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationRequests(workspace).Create(ctx, &fleet.ClusterRegistrationRequest{
		ObjectMeta: metav1.ObjectMeta{GenerateName: "request-"},
		Spec:       fleet.ClusterRegistrationRequestSpec{ClientID: "answer-test", ClientRandom: "r1"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secrets := hub.Client().CoreV1().Secrets(names.RegistrationNamespace)
	kept := names.CredentialSecret("answer-test", "r1")
	if _, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: kept, Labels: map[string]string{
			names.ManagedLabel: "true", names.RequestLabel: req.Name, names.RequestNamespaceLabel: workspace,
		}},
		Type: names.CredentialSecretType,
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	orphan, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.CredentialSecret("gone", "r2"), Labels: map[string]string{
			names.ManagedLabel: "true", names.RequestLabel: "request-gone", names.RequestNamespaceLabel: workspace,
		}},
		Type: names.CredentialSecretType,
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// A minute's grace, then a sweep every minute.
	framework.Eventually(t, "the orphaned answer to go", 4*time.Minute, func(ctx context.Context) error {
		if _, err := secrets.Get(ctx, orphan.Name, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("still there (%v)", err)
		}
		return nil
	})
	if _, err := secrets.Get(ctx, kept, metav1.GetOptions{}); err != nil {
		t.Errorf("the answer of request %s, which exists, was removed too: %v", req.Name, err)
	}
}
