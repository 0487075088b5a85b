package gitrepo

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestPoll(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	accepted := []fleet.Condition{{Type: ConditionAccepted, Status: corev1.ConditionTrue}}
	refused := []fleet.Condition{{Type: ConditionAccepted, Status: corev1.ConditionFalse, Reason: "AuthFailed"}}
	repo := func(generation, force int64, conds []fleet.Condition, disable bool) *fleet.GitRepo {
		return &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Generation: generation},
			Spec:   fleet.GitRepoSpec{ForceSyncGeneration: force, DisablePolling: disable},
			Status: fleet.GitRepoStatus{Commit: "abc", Conditions: conds}}
	}
	looked := func(ago time.Duration, generation, force int64) Attempt {
		return Attempt{At: now.Add(-ago), Generation: generation, ForceSyncGeneration: force}
	}
	for _, tc := range []struct {
		name string
		gr   *fleet.GitRepo
		last Attempt
		want bool
	}{
		{"never looked at", repo(1, 0, nil, false), Attempt{}, true},
		{"a spec not looked at yet", repo(2, 0, accepted, false), looked(time.Second, 1, 0), true},
		{"forceSyncGeneration raised", repo(1, 1, accepted, false), looked(time.Second, 1, 0), true},
		{"within the interval", repo(1, 0, accepted, false), looked(5*time.Second, 1, 0), false},
		{"the interval has passed", repo(1, 0, accepted, false), looked(15*time.Second, 1, 0), true},
		{"polling off", repo(1, 0, accepted, true), looked(time.Hour, 1, 0), false},
		{"a failure is retried at the interval, polling off or not", repo(1, 0, refused, true), looked(15*time.Second, 1, 0), true},
		{"a failure is not retried sooner, whatever writes the GitRepo", repo(2, 0, refused, false), looked(time.Second, 2, 0), false},
		{"a first look that failed either", repo(1, 0, nil, false), looked(time.Second, 1, 0), false},
		{"new GitRepoRestrictions", repo(1, 0, accepted, true), Attempt{At: now.Add(-time.Second), Generation: 1, Restrictions: "old@1"}, true},
		{"new restrictions, even after a failure", repo(1, 0, refused, false), Attempt{At: now.Add(-time.Second), Generation: 1, Restrictions: "old@1"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Poll(tc.gr, tc.last, "", now, 15*time.Second); got != tc.want {
				t.Errorf("Poll = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPollOnAPushEvent(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 500, time.UTC)
	accepted := []fleet.Condition{{Type: ConditionAccepted, Status: corev1.ConditionTrue}}
	repo := func(webhook string, at time.Time) *fleet.GitRepo {
		return &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: fleet.GitRepoSpec{DisablePolling: true},
			Status: fleet.GitRepoStatus{Commit: "aaa", Conditions: accepted, WebhookCommit: webhook, LastWebhookTime: metav1.NewTime(at)}}
	}
	last := Attempt{At: now.Add(-time.Minute), Generation: 1}
	for _, tc := range []struct {
		name string
		gr   *fleet.GitRepo
		last Attempt
		want bool
	}{
		{"a new commit pushed since the last look", repo("bbb", now.Add(-time.Second)), last, true},
		{"the commit deployed", repo("aaa", now.Add(-time.Second)), last, false},
		{"a push before the last look", repo("bbb", now.Add(-time.Hour)), last, false},
		{"a push in the second of the last look", repo("bbb", now.Add(-2*time.Second).Truncate(time.Second)), Attempt{At: now.Add(-2 * time.Second), Generation: 1}, true},
		{"but not more than once a second", repo("bbb", now.Truncate(time.Second)), Attempt{At: now.Add(-100 * time.Millisecond), Generation: 1}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Poll(tc.gr, tc.last, "", now, time.Hour); got != tc.want {
				t.Errorf("Poll = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestPathsStayInTheCheckout(t *testing.T) {
	checkout := t.TempDir()
	for _, dir := range []string{"apps/a", "apps/b", "single"} {
		if err := os.MkdirAll(filepath.Join(checkout, dir), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	outside := t.TempDir()
	if err := os.Symlink(outside, filepath.Join(checkout, "escape")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("single", filepath.Join(checkout, "alias")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		paths []string
		want  string // joined, or the error's start
	}{
		{"the root by default", nil, "."},
		{"folders", []string{"single", "apps/a/"}, "single,apps/a"},
		{"a glob", []string{"apps/*"}, "apps/*"},
		{"a link inside", []string{"alias"}, "alias"},
		{"parent", []string{"../x"}, `error: path "../x" leaves the repository`},
		{"cleaned up to the parent", []string{"apps/../../x"}, `error: path "apps/../../x" leaves the repository`},
		{"absolute", []string{"/etc"}, `error: path "/etc" leaves the repository`},
		{"a link out", []string{"escape"}, `error: path "escape" leaves the repository (a link to`},
		{"missing", []string{"nope"}, `error: path "nope": no such folder`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Paths(checkout, tc.paths)
			text := strings.Join(got, ",")
			if err != nil {
				text = "error: " + err.Error()
			}
			if !strings.HasPrefix(text, tc.want) {
				t.Errorf("Paths = %q, want %q", text, tc.want)
			}
		})
	}
}

// A bundles base is one folder inside the checkout: a pattern that matches a safe
// folder while naming a link out of the repository is refused.
func TestBundlesBasesStayInTheCheckout(t *testing.T) {
	checkout := t.TempDir()
	if err := os.MkdirAll(filepath.Join(checkout, "x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(checkout, "[x]")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(t.TempDir(), filepath.Join(checkout, "out")); err != nil {
		t.Fatal(err)
	}
	for _, base := range []string{"[x]", "*", `\x`, "out", "../..", "/etc", "missing"} {
		t.Run(base, func(t *testing.T) {
			if _, dirs, err := folders(checkout, fleet.GitRepoSpec{Bundles: []fleet.BundlePath{{Base: base}}}); err == nil {
				t.Errorf("base %q accepted: %+v", base, dirs)
			}
		})
	}
	if _, dirs, err := folders(checkout, fleet.GitRepoSpec{Bundles: []fleet.BundlePath{{Base: "x", Options: "fleet-dev.yaml"}}}); err != nil || len(dirs) != 1 || dirs[0].Dir != "x" {
		t.Errorf("base x: %+v %v", dirs, err)
	}
}

// A push event that comes less than MinPollingInterval after the last look is not
// looked at yet, but stays pending, so that the controller comes back to it even
// with polling off.
func TestAPushTooSoonStaysPending(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 500, time.UTC)
	gr := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Generation: 1}, Spec: fleet.GitRepoSpec{DisablePolling: true},
		Status: fleet.GitRepoStatus{Commit: "aaa", WebhookCommit: "bbb", LastWebhookTime: metav1.NewTime(now.Truncate(time.Second)),
			Conditions: []fleet.Condition{{Type: ConditionAccepted, Status: corev1.ConditionTrue}}}}
	last := Attempt{At: now.Add(-100 * time.Millisecond), Generation: 1}
	if Poll(gr, last, "", now, time.Hour) {
		t.Error("looked at again within MinPollingInterval")
	}
	if !PushPending(gr, last) {
		t.Error("the push is not pending")
	}
	if !Poll(gr, last, "", now.Add(MinPollingInterval), time.Hour) {
		t.Error("not looked at once MinPollingInterval has passed")
	}
	gr.Status.Commit = "bbb"
	if PushPending(gr, last) {
		t.Error("a push of the deployed commit is pending")
	}
}
