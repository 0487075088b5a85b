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
	repo := func(generation, observed, force, updated int64, commit string, conds []fleet.Condition, disable bool) *fleet.GitRepo {
		return &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Generation: generation},
			Spec:   fleet.GitRepoSpec{ForceSyncGeneration: force, DisablePolling: disable},
			Status: fleet.GitRepoStatus{ObservedGeneration: observed, UpdateGeneration: updated, Commit: commit, Conditions: conds}}
	}
	for _, tc := range []struct {
		name   string
		gr     *fleet.GitRepo
		polled time.Duration // ago
		want   bool
	}{
		{"never fetched", repo(1, 0, 0, 0, "", nil, false), 0, true},
		{"spec changed", repo(2, 1, 0, 0, "abc", accepted, false), 0, true},
		{"forceSyncGeneration raised", repo(1, 1, 1, 0, "abc", accepted, false), 0, true},
		{"within the interval", repo(1, 1, 0, 0, "abc", accepted, false), 5 * time.Second, false},
		{"the interval has passed", repo(1, 1, 0, 0, "abc", accepted, false), 15 * time.Second, true},
		{"polling off", repo(1, 1, 0, 0, "abc", accepted, true), time.Hour, false},
		{"a failure is retried at the interval, polling off or not", repo(1, 1, 0, 0, "abc", refused, true), 15 * time.Second, true},
		{"but not sooner", repo(1, 1, 0, 0, "abc", refused, false), time.Second, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Poll(tc.gr, now.Add(-tc.polled), now, 15*time.Second); got != tc.want {
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

func TestPollOnAPushEvent(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	accepted := []fleet.Condition{{Type: ConditionAccepted, Status: corev1.ConditionTrue}}
	repo := func(webhook string, at time.Time, disable bool) *fleet.GitRepo {
		return &fleet.GitRepo{Spec: fleet.GitRepoSpec{DisablePolling: disable},
			Status: fleet.GitRepoStatus{Commit: "aaa", Conditions: accepted, WebhookCommit: webhook, LastWebhookTime: metav1.NewTime(at)}}
	}
	for _, tc := range []struct {
		name string
		gr   *fleet.GitRepo
		want bool
	}{
		{"a new commit pushed since the last look", repo("bbb", now.Add(-time.Second), true), true},
		{"the commit deployed", repo("aaa", now.Add(-time.Second), true), false},
		{"a push before the last look", repo("bbb", now.Add(-time.Hour), true), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Poll(tc.gr, now.Add(-time.Minute), now, time.Hour); got != tc.want {
				t.Errorf("Poll = %v, want %v", got, tc.want)
			}
		})
	}
}
