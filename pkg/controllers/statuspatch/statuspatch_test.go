package statuspatch

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

type status struct {
	Ready   bool     `json:"ready,omitempty"`
	Message string   `json:"message,omitempty"`
	Nodes   []string `json:"nodes,omitempty"`
}

func TestForHoldsOnlyWhatChanged(t *testing.T) {
	for name, c := range map[string]struct {
		before, after status
		want          string
	}{
		"unchanged":     {status{Ready: true}, status{Ready: true}, ""},
		"one field":     {status{Ready: true, Message: "a"}, status{Ready: true, Message: "b"}, `{"status":{"message":"b"}}`},
		"removed field": {status{Ready: true, Message: "a"}, status{Ready: true}, `{"status":{"message":null}}`},
		"list replaced": {status{Nodes: []string{"a"}}, status{Nodes: []string{"a", "b"}}, `{"status":{"nodes":["a","b"]}}`},
	} {
		got, err := For(c.before, c.after)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if string(got) != c.want {
			t.Errorf("%s: patch %s, want %s", name, got, c.want)
		}
	}
}

func TestLimiterSpacesPatchesOfEachObject(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := Limiter{Now: func() time.Time { return now }}
	if got := l.Wait("a"); got != Debounce {
		t.Fatalf("first patch of a: wait %v, want %v", got, Debounce)
	}
	now = now.Add(Debounce / 4)
	if got := l.Wait("a"); got != Debounce*3/4 {
		t.Fatalf("a a quarter later: wait %v, want %v", got, Debounce*3/4)
	}
	if got := l.Wait("b"); got != Debounce {
		t.Fatalf("b is its own object: wait %v, want %v", got, Debounce)
	}
	now = now.Add(Debounce)
	if got := l.Wait("a"); got != 0 {
		t.Fatalf("a after its Debounce: wait %v, want 0", got)
	}
	if got := l.Wait("a"); got != Debounce {
		t.Fatalf("a right after a patch: wait %v, want %v", got, Debounce)
	}
	l.Forget("a")
	if got := l.Wait("a"); got != Debounce {
		t.Fatalf("a forgotten then seen again: wait %v, want %v", got, Debounce)
	}
}

func TestLimiterFirstPatchWaitsFirst(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l := Limiter{First: 3 * Debounce, Now: func() time.Time { return now }}
	if got := l.Wait("a"); got != 3*Debounce {
		t.Fatalf("first patch: wait %v, want %v", got, 3*Debounce)
	}
	now = now.Add(2 * Debounce)
	if got := l.Wait("a"); got != Debounce {
		t.Fatalf("two Debounces in: wait %v, want %v", got, Debounce)
	}
	now = now.Add(Debounce)
	if got := l.Wait("a"); got != 0 {
		t.Fatalf("after First: wait %v, want 0", got)
	}
	if got := l.Wait("a"); got != Debounce {
		t.Fatalf("right after a patch: wait %v, want %v", got, Debounce)
	}
}

func TestBecomesReadyOnlyOnTheTurn(t *testing.T) {
	ready := []fleet.Condition{{Type: fleet.ConditionReady, Status: corev1.ConditionTrue}}
	notReady := []fleet.Condition{{Type: fleet.ConditionReady, Status: corev1.ConditionFalse}}
	for name, c := range map[string]struct {
		before, after []fleet.Condition
		want          bool
	}{
		"no status yet, Ready":   {nil, ready, true},
		"not Ready, then Ready":  {notReady, ready, true},
		"Ready, still Ready":     {ready, ready, false},
		"Ready, then not Ready":  {ready, notReady, false},
		"no status yet, not yet": {nil, notReady, false},
	} {
		if got := BecomesReady(c.before, c.after); got != c.want {
			t.Errorf("%s: %v, want %v", name, got, c.want)
		}
	}
}
