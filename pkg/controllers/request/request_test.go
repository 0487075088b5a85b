package request

import (
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

func TestRegistrationSlot(t *testing.T) {
	limit := func(n int32) *int32 { return &n }
	for _, tc := range []struct {
		name       string
		max        *int32
		registered []string
		hash       string
		want       slot
	}{
		{"no limit", nil, []string{"a", "b"}, "c", slot{}},
		{"a single-use token, first cluster", limit(1), nil, "a", slot{record: true}},
		{"a single-use token, the same cluster again", limit(1), []string{"a"}, "a", slot{}},
		{"a single-use token, a second cluster", limit(1), []string{"a"}, "b", slot{refused: true}},
		{"under the limit", limit(3), []string{"a", "b"}, "c", slot{record: true}},
		{"at the limit", limit(2), []string{"a", "b"}, "c", slot{refused: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			token := &fleet.ClusterRegistrationToken{
				Spec:   fleet.ClusterRegistrationTokenSpec{MaxRegistrations: tc.max},
				Status: fleet.ClusterRegistrationTokenStatus{RegisteredClients: tc.registered},
			}
			if got := registrationSlot(token, tc.hash); got != tc.want {
				t.Fatalf("registrationSlot = %+v, want %+v", got, tc.want)
			}
		})
	}
}

func TestRefusedLeft(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		since string
		want  time.Duration
	}{
		{"just refused", "2026-12-03T12:00:00Z", time.Hour},
		{"refused 50 minutes ago", "2026-12-03T11:10:00Z", 10 * time.Minute},
		{"refused two hours ago", "2026-12-03T10:00:00Z", -time.Hour},
		{"no time", "", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := answeredLeft(&fleet.Condition{LastTransitionTime: tc.since}, time.Hour, now); got != tc.want {
				t.Fatalf("answeredLeft = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestJudgeKey(t *testing.T) {
	at := func(s int) time.Time { return time.Unix(1700000000+int64(s), 0) }
	recorded := func(key, request string, signed int) map[string]string {
		return keyRecord{Fingerprint: registration.Fingerprint(key), Request: request, SignedAt: at(signed)}.annotations()
	}
	for _, tc := range []struct {
		name       string
		recorded   map[string]string
		key        string
		request    string
		signed     int
		boundToken bool
		want       string // refusal reason, "" for accepted
	}{
		{"a predefined Cluster is claimed", nil, "k1", "r1", 10, false, ""},
		{"a proof without a key is claimed", map[string]string{names.AgentKeyProofAnnotation: "r9 2030-01-01T00:00:00.000000Z"}, "k1", "r1", 10, false, ""},
		{"the same key, signed later", recorded("k1", "r1", 10), "k1", "r2", 11, false, ""},
		{"the same key, a replay of an older request", recorded("k1", "r2", 11), "k1", "r1", 10, false, "StaleSignature"},
		{"the same key, another request signed at the same moment", recorded("k1", "r1", 10), "k1", "r2", 10, false, "StaleSignature"},
		{"the same key, with an unreadable proof", map[string]string{names.AgentKeyAnnotation: registration.Fingerprint("k1"), names.AgentKeyProofAnnotation: "garbage"}, "k1", "r2", 10, false, ""},
		{"the request that recorded the key, retried", recorded("k1", "r1", 10), "k1", "r1", 10, false, ""},
		{"a copy under the name of the request that recorded the key (another UID)", recorded("k1", "r1", 10), "k1", "r1-copy", 10, false, "StaleSignature"},
		{"another key", recorded("k1", "r1", 10), "k2", "r2", 11, false, "KeyMismatch"},
		{"another key, signed earlier", recorded("k1", "r1", 10), "k2", "r2", 5, false, "KeyMismatch"},
		{"another key with a token bound to the Cluster", recorded("k1", "r1", 10), "k2", "r2", 11, true, ""},
		{"the same key with a token bound to the Cluster, replayed", recorded("k1", "r2", 11), "k1", "r1", 10, true, "StaleSignature"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ws", Annotations: tc.recorded}}
			req := &fleet.ClusterRegistrationRequest{
				ObjectMeta: metav1.ObjectMeta{Name: "request-x", UID: types.UID(tc.request), Namespace: "ws"},
				Spec:       fleet.ClusterRegistrationRequestSpec{PublicKey: tc.key, SignedAt: &metav1.MicroTime{Time: at(tc.signed)}},
			}
			err := judgeKey(cluster, req, tc.boundToken)
			got := ""
			var refused *refusal
			if errors.As(err, &refused) {
				got = refused.reason
				if refused.cluster != cluster {
					t.Errorf("the refusal does not name the Cluster for its event")
				}
			} else if err != nil {
				t.Fatalf("judgeKey = %v", err)
			}
			if got != tc.want {
				t.Fatalf("judgeKey = %q, want %q", got, tc.want)
			}
			if got == "KeyMismatch" && !strings.Contains(err.Error(), names.ClusterLabel+"=c") {
				t.Errorf("the refusal does not say how to allow it: %v", err)
			}
			if refused != nil && got != "" {
				// What the token holder reads names neither the Cluster nor a key.
				answer := refused.answerText()
				for _, secret := range []string{"SHA256:", "ws/c", recordOf(cluster).Request} {
					if secret != "" && strings.Contains(answer, secret) {
						t.Errorf("the answer %q gives away %q", answer, secret)
					}
				}
			}
		})
	}
	t.Run("a record reads back as written", func(t *testing.T) {
		r := keyRecord{Fingerprint: "SHA256:x", Request: "request-abc", SignedAt: time.Date(2026, 12, 4, 3, 0, 0, 123456000, time.UTC)}
		local := r
		local.SignedAt = r.SignedAt.Local()
		if got := recordOf(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Annotations: local.annotations()}}); !got.same(r) {
			t.Fatalf("read back %+v, wrote %+v", got, r)
		}
	})
}

// A Cluster's key annotations may be edited by a workspace user: reading them and
// judging a request against them never panics, and a Cluster whose recorded key is
// not the request's refuses it unless the token is bound to the Cluster.
func FuzzJudgeKey(f *testing.F) {
	f.Add("SHA256:abc", "uid 2026-12-04T00:00:00.000000Z", "k1", int64(0))
	f.Add("", "garbage", "", int64(-1<<40))
	f.Fuzz(func(t *testing.T, fingerprint, proof, key string, signed int64) {
		cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "ws",
			Annotations: map[string]string{names.AgentKeyAnnotation: fingerprint, names.AgentKeyProofAnnotation: proof}}}
		req := &fleet.ClusterRegistrationRequest{
			ObjectMeta: metav1.ObjectMeta{Name: "r", UID: "u", Namespace: "ws"},
			Spec:       fleet.ClusterRegistrationRequestSpec{PublicKey: key, SignedAt: &metav1.MicroTime{Time: time.Unix(0, signed)}},
		}
		err := judgeKey(cluster, req, false)
		if fingerprint != "" && fingerprint != registration.Fingerprint(key) && err == nil {
			t.Fatalf("a request with another key was accepted: recorded %q, asked %q", fingerprint, registration.Fingerprint(key))
		}
		_ = recordOf(cluster).same(recordFor(req))
	})
}
