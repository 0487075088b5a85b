package cluster

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlestate"
)

func TestReadiness(t *testing.T) {
	now := time.Date(2026, 12, 5, 12, 0, 0, 0, time.UTC)
	deployment := func(ready bool) *fleet.BundleDeployment {
		bd := &fleet.BundleDeployment{Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-1:a"}}
		bd.Status.AppliedDeploymentID, bd.Status.Ready, bd.Status.NonModified = "s-1:a", ready, true
		return bd
	}
	summary := func(ready ...bool) *bundlestate.Summary {
		var s bundlestate.Summary
		for i, r := range ready {
			s.Add("ws/b"+string(rune('0'+i)), deployment(r))
		}
		return &s
	}
	const offlineAfter = 5 * time.Minute
	for _, c := range []struct {
		name        string
		seen        time.Time
		agentBundle bool
		summary     *bundlestate.Summary
		want        clusterReadiness
		message     string
	}{
		{name: "never checked in", agentBundle: true, summary: summary(true),
			want: clusterReadiness{state: StateWaitCheckIn, status: corev1.ConditionFalse, reason: StateWaitCheckIn}, message: "waiting for the cluster's agent"},
		{name: "silent for longer than the threshold", seen: now.Add(-6 * time.Minute), agentBundle: true, summary: summary(true),
			want: clusterReadiness{state: ReasonOffline, status: corev1.ConditionUnknown, reason: ReasonOffline}, message: "since 2026-12-05T11:54:00Z, more than 5m0s ago"},
		{name: "silent for exactly the threshold", seen: now.Add(-offlineAfter), agentBundle: true, summary: summary(true),
			want: clusterReadiness{state: ReasonOffline, status: corev1.ConditionUnknown, reason: ReasonOffline}},
		{name: "checked in, no agent bundle yet", seen: now.Add(-time.Minute), summary: summary(),
			want: clusterReadiness{state: ReasonWaitAgentBundle, status: corev1.ConditionFalse, reason: ReasonWaitAgentBundle, recheck: 4*time.Minute + time.Second}},
		{name: "checked in, every bundle ready", seen: now.Add(-time.Minute), agentBundle: true, summary: summary(true, true),
			want: clusterReadiness{status: corev1.ConditionTrue, recheck: 4*time.Minute + time.Second}},
		{name: "checked in, a bundle not ready", seen: now, agentBundle: true, summary: summary(true, false),
			want: clusterReadiness{status: corev1.ConditionFalse, reason: ReasonBundlesNotReady, recheck: offlineAfter + time.Second}, message: "NotReady"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := readiness(now, c.seen, offlineAfter, c.agentBundle, c.summary)
			message := got.message
			got.message = ""
			if got != c.want {
				t.Errorf("got %+v, want %+v", got, c.want)
			}
			if !strings.Contains(message, c.message) {
				t.Errorf("message %q does not say %q", message, c.message)
			}
		})
	}
}
