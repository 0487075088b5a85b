package statuspatch

import (
	"encoding/json"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// step advances the clock by after, forgets key if asked, then asks Wait(key, from, to).
type step struct {
	what   string
	after  time.Duration
	forget bool
	key    string
	// from and to are the conditions the patch takes the status from and to.
	from, to []fleet.Condition
	want     time.Duration
}

func runLimiter(t *testing.T, l *Limiter, steps []step) {
	t.Helper()
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	l.Now = func() time.Time { return now }
	for _, s := range steps {
		now = now.Add(s.after)
		if s.forget {
			l.Forget(s.key)
		}
		if got := l.Wait(s.key, s.from, s.to); got != s.want {
			t.Fatalf("%s: wait %v, want %v", s.what, got, s.want)
		}
	}
}

func TestLimiterSpacesPatchesOfEachObject(t *testing.T) {
	runLimiter(t, &Limiter{}, []step{
		{what: "first patch of a", key: "a", want: Debounce},
		{what: "a a quarter later", after: Debounce / 4, key: "a", want: Debounce * 3 / 4},
		{what: "b is its own object", key: "b", want: Debounce},
		{what: "a after its Debounce", after: Debounce, key: "a", want: 0},
		{what: "a right after a patch", key: "a", want: Debounce},
		{what: "a forgotten then seen again", forget: true, key: "a", want: Debounce},
	})
}

func TestLimiterFirstPatchWaitsFirst(t *testing.T) {
	runLimiter(t, &Limiter{First: 3 * Debounce}, []step{
		{what: "first patch", key: "a", want: 3 * Debounce},
		{what: "two Debounces in", after: 2 * Debounce, key: "a", want: Debounce},
		{what: "after First", after: Debounce, key: "a", want: 0},
		{what: "right after a patch", key: "a", want: Debounce},
	})
}

func TestLimiterLetsTurningReadyThrough(t *testing.T) {
	ready := []fleet.Condition{{Type: fleet.ConditionReady, Status: corev1.ConditionTrue}}
	runLimiter(t, &Limiter{First: 3 * Debounce}, []step{
		{what: "first patch, not Ready", key: "a", want: 3 * Debounce},
		{what: "turning Ready", key: "a", to: ready, want: 0},
		{what: "Ready again right after", key: "a", from: ready, to: ready, want: Debounce},
	})
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

func TestWrittenIsTheBaseUntilTheCacheMoves(t *testing.T) {
	var w Written[status]
	cached := status{Message: "cached"}
	if got := w.Base("a", "1", cached); got.Message != cached.Message {
		t.Fatalf("nothing written: base %+v, want the cached status", got)
	}
	w.Remember("a", "1", status{Ready: true, Message: "written"})
	if got := w.Base("a", "1", cached); !got.Ready || got.Message != "written" {
		t.Errorf("cache still at the version patched over: base %+v, want what was written", got)
	}
	if got := w.Base("b", "1", cached); got.Message != cached.Message {
		t.Errorf("another key: base %+v, want its cached status", got)
	}
	moved := status{Ready: true, Message: "moved"}
	if got := w.Base("a", "2", moved); got.Message != moved.Message {
		t.Errorf("cache moved on: base %+v, want the cached status", got)
	}
	// Once the cache has moved on, the old write is gone for good.
	if got := w.Base("a", "1", cached); got.Message != cached.Message {
		t.Errorf("after the cache moved: base %+v, want the cached status", got)
	}
	w.Remember("a", "2", status{Message: "again"})
	w.Forget("a")
	if got := w.Base("a", "2", moved); got.Message != moved.Message {
		t.Errorf("forgotten: base %+v, want the cached status", got)
	}
}

func TestOwnerPatchHoldsOnlyItsFieldsAndConditions(t *testing.T) {
	gen := int64(2)
	status := fleet.ClusterStatus{
		Namespace:               "cluster-ns",
		AgentDeployedGeneration: &gen,
		AgentConfigHash:         "h",
		Display:                 fleet.ClusterDisplay{State: "WaitCheckIn"},
		Conditions: []fleet.Condition{
			{Type: fleet.ConditionReady, Status: corev1.ConditionFalse, Reason: "WaitCheckIn"},
			{Type: fleet.ConditionImported, Status: corev1.ConditionTrue},
		},
	}
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "c1", UID: "uid-1", ResourceVersion: "7"}}
	emptyCondition := `"lastTransitionTime":"","lastUpdateTime":"","message":""`
	for _, c := range []struct {
		name   string
		owner  Owner
		status fleet.ClusterStatus
		want   string
		// resourceVersion is what the patch's metadata holds, "" for none.
		resourceVersion string
	}{
		{name: "cluster controller: zeros and empty strings explicit", owner: ClusterOwner, status: status,
			want: `{"conditions":[{` + emptyCondition + `,"reason":"WaitCheckIn","status":"False","type":"Ready"}],` +
				`"display":{"readyBundles":"","readyNodes":"","sampleNode":"","state":"WaitCheckIn"},"namespace":"cluster-ns",` +
				`"summary":{"desiredReady":0,"errApplied":0,"modified":0,"nonReadyResources":[],"notReady":0,"outOfSync":0,"pending":0,"ready":0,"waitApplied":0}}`},
		{name: "import controller", owner: ImportsOwner, status: status,
			want: `{"agentConfigHash":"h","agentDeployedGeneration":2,"conditions":[{` + emptyCondition + `,"reason":"","status":"True","type":"Imported"}]}`},
		{name: "an unset pointer is left out; optimistic: over the version it read", owner: Owner{Manager: "m", Fields: ImportsOwner.Fields, Optimistic: true},
			status: fleet.ClusterStatus{Namespace: "x"}, resourceVersion: "7",
			want: `{"agentConfigHash":""}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			patch, err := c.owner.Patch("Cluster", cluster, c.status)
			if err != nil {
				t.Fatal(err)
			}
			var got struct {
				APIVersion, Kind string
				Metadata         map[string]string
				Status           json.RawMessage
			}
			if err := json.Unmarshal(patch, &got); err != nil {
				t.Fatal(err)
			}
			if got.APIVersion != "fleet.cattle.io/v1alpha1" || got.Kind != "Cluster" || got.Metadata["namespace"] != "ws" || got.Metadata["name"] != "c1" ||
				got.Metadata["uid"] != "uid-1" || got.Metadata["resourceVersion"] != c.resourceVersion {
				t.Errorf("object %s %s %v", got.APIVersion, got.Kind, got.Metadata)
			}
			if string(got.Status) != c.want {
				t.Errorf("status\n%s, want\n%s", got.Status, c.want)
			}
		})
	}
}
