package request

import (
	"errors"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

func TestJudgeUnkeyed(t *testing.T) {
	keyed := keyRecord{Fingerprint: registration.Fingerprint("k1"), Request: "r1"}.annotations()
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		boundToken  bool
		want        string
	}{
		{"a Cluster with no key", nil, false, ""},
		{"a Cluster with only a proof annotation", map[string]string{names.AgentKeyProofAnnotation: "r9 x"}, false, ""},
		{"a Cluster bound to a key", keyed, false, "KeyRequired"},
		{"a Cluster bound to a key, with a token bound to it", keyed, true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ws", Annotations: tc.annotations}}
			err := judgeUnkeyed(cluster, tc.boundToken)
			got := ""
			var refused *refusal
			if errors.As(err, &refused) {
				got = refused.reason
				if refused.cluster != cluster {
					t.Errorf("the refusal does not name the Cluster for its event")
				}
			} else if err != nil {
				t.Fatal(err)
			}
			if got != tc.want {
				t.Fatalf("judgeUnkeyed = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestKindsAnswerUnderTheirAgentsNames(t *testing.T) {
	req := &fleet.ClusterRegistrationRequest{Spec: fleet.ClusterRegistrationRequestSpec{ClientID: "my-clientID", ClientRandom: "random123"}}
	fleetAgents := kind{name: fleetKind, unkeyed: true}
	// Fleet's agent waits for "c-" and sha256("my-clientID" "random123") (sha256sum of
	// the two written together), cut to 63 characters.
	if got, want := fleetAgents.answerName(req), "c-1ee28605c3b74fc759b060a0043ecab2fe2eedc3d3183812835d9a505c8d2"; got != want {
		t.Errorf("Fleet's agent's answer is %q, want %q", got, want)
	}
	signed := kind{name: requestKind}
	if got := signed.answerName(req); got != names.CredentialSecret("my-clientID", "random123") {
		t.Errorf("Flotilla's agent's answer is %q", got)
	}
	if fleetAgents.keyAnnotations(req) != nil {
		t.Errorf("a Cluster created for Fleet's agent records a key")
	}
	if got := answerSecret(fleetAgents, req, nil).Labels[names.RequestKindLabel]; got != fleetKind {
		t.Errorf("the answer to Fleet's agent is labelled %q", got)
	}
}

func TestARegistrationRoundTripsAsARequest(t *testing.T) {
	r := &fleet.ClusterRegistration{
		ObjectMeta: metav1.ObjectMeta{Name: "request-x", Namespace: "ws", UID: "u", Labels: map[string]string{names.RegistrationTokenLabel: "t"}},
		Spec:       fleet.ClusterRegistrationSpec{ClientID: "id", ClientRandom: "r", ClusterLabels: map[string]string{"env": "dev"}},
		Status:     fleet.ClusterRegistrationRequestStatus{ClusterName: "c", Granted: true},
	}
	back := asRegistration(asRequest(r))
	back.TypeMeta = r.TypeMeta
	if back.Name != r.Name || back.UID != r.UID || back.Spec.ClientID != "id" || back.Spec.ClusterLabels["env"] != "dev" || !back.Status.Granted || back.Status.ClusterName != "c" {
		t.Fatalf("round trip changed the registration: %+v", back)
	}
	if asRegistration(nil) != nil {
		t.Fatal("asRegistration(nil) is not nil")
	}
}
