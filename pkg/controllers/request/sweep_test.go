package request

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/pkg/names"
)

func TestOrphanedAnswers(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	clusterNS := names.ClusterNamespace("ws", "c1")
	answer := func(name, namespace string, age time.Duration, labels map[string]string) corev1.Secret {
		return corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace, Labels: labels, CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Type:       names.CredentialSecretType,
		}
	}
	requests := map[string]bool{"ws/alive": true, clusterNS + "/recovering": true}
	exists := func(_, namespace, name string) bool {
		if namespace == "" {
			return name == "alive"
		}
		return requests[namespace+"/"+name]
	}
	for _, c := range []struct {
		name   string
		secret corev1.Secret
		orphan bool
	}{
		{"its request exists", answer("a", names.RegistrationNamespace, time.Hour,
			map[string]string{names.RequestLabel: "alive", names.RequestNamespaceLabel: "ws"}), false},
		{"its request is gone", answer("b", names.RegistrationNamespace, time.Hour,
			map[string]string{names.RequestLabel: "gone", names.RequestNamespaceLabel: "ws"}), true},
		{"a request of that name in another namespace", answer("c", names.RegistrationNamespace, time.Hour,
			map[string]string{names.RequestLabel: "alive", names.RequestNamespaceLabel: "other"}), true},
		{"its request is gone, but it is new", answer("d", names.RegistrationNamespace, 30*time.Second,
			map[string]string{names.RequestLabel: "gone", names.RequestNamespaceLabel: "ws"}), false},
		{"written before answers named the namespace, request alive", answer("e", names.RegistrationNamespace, time.Hour,
			map[string]string{names.RequestLabel: "alive"}), false},
		{"written before answers named the namespace, request gone", answer("f", names.RegistrationNamespace, time.Hour,
			map[string]string{names.RequestLabel: "gone"}), true},
		{"a recovery answer in its cluster's namespace", answer("g", clusterNS, time.Hour,
			map[string]string{names.RequestLabel: "recovering"}), false},
		{"a recovery answer whose request is gone", answer("h", clusterNS, time.Hour,
			map[string]string{names.RequestLabel: "recovered"}), true},
		{"not an answer: no request label", answer("i", names.RegistrationNamespace, time.Hour, nil), false},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := orphanedAnswers([]corev1.Secret{c.secret}, exists, now)
			if (len(got) == 1) != c.orphan {
				t.Errorf("orphaned: %t, want %t", len(got) == 1, c.orphan)
			}
		})
	}
	other := answer("j", names.RegistrationNamespace, time.Hour, map[string]string{names.RequestLabel: "gone"})
	other.Type = corev1.SecretTypeOpaque
	if got := orphanedAnswers([]corev1.Secret{other}, exists, now); len(got) != 0 {
		t.Errorf("a Secret of another type was taken for an answer")
	}
}
