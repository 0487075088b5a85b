package request

import (
	"testing"
	"time"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
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
			if got := refusedLeft(&fleet.Condition{LastTransitionTime: tc.since}, time.Hour, now); got != tc.want {
				t.Fatalf("refusedLeft = %s, want %s", got, tc.want)
			}
		})
	}
}
