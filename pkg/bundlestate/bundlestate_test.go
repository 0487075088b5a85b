package bundlestate

import (
	"strings"
	"testing"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func bd(id, applied string, ready, nonModified bool, deployErr string) *fleet.BundleDeployment {
	b := &fleet.BundleDeployment{}
	b.Spec.DeploymentID, b.Spec.StagedDeploymentID = id, id
	b.Status.AppliedDeploymentID, b.Status.Ready, b.Status.NonModified = applied, ready, nonModified
	if deployErr != "" {
		b.Status.Conditions = []fleet.Condition{{Type: ConditionDeployed, Status: "False", Message: deployErr}}
	}
	return b
}

func TestOf(t *testing.T) {
	for _, tc := range []struct {
		bd   *fleet.BundleDeployment
		want fleet.BundleState
	}{
		{bd("s-1:a", "", false, false, ""), fleet.WaitApplied},
		{bd("s-1:a", "", false, false, "boom"), fleet.ErrApplied},
		{bd("s-2:a", "s-1:a", true, true, ""), fleet.WaitApplied},
		{bd("s-1:a", "s-1:a", false, true, ""), fleet.NotReady},
		{bd("s-1:a", "s-1:a", true, false, ""), fleet.Modified},
		{bd("s-1:a", "s-1:a", true, true, ""), fleet.Ready},
		{bd("s-1:a", "s-1:a", true, true, "drift correction failed"), fleet.ErrApplied},
	} {
		if got := Of(tc.bd); got != tc.want {
			t.Errorf("%+v: got %s, want %s", tc.bd.Status, got, tc.want)
		}
	}
	paused := bd("s-1:a", "s-1:a", true, true, "")
	paused.Spec.StagedDeploymentID = "s-2:a"
	if got := Of(paused); got != fleet.OutOfSync {
		t.Errorf("staged change: got %s, want OutOfSync", got)
	}
}

func TestSummary(t *testing.T) {
	var s Summary
	s.Add("clusters/a", bd("s-1:a", "s-1:a", true, true, ""))
	s.Add("clusters/b", bd("s-1:a", "", false, false, "rendering failed"))
	s.Add("clusters/c", bd("s-1:a", "s-1:a", false, true, ""))
	s.Add("clusters/d", bd("s-1:a", "s-1:a", false, true, ""))
	if s.ReadyString() != "1/4" || s.AllReady() || s.Worst() != fleet.ErrApplied || s.ErrApplied != 1 || s.NotReady != 2 {
		t.Errorf("summary %+v worst %s", s.BundleSummary, s.Worst())
	}
	msg := s.NotReadyMessage("Cluster")
	if !strings.HasPrefix(msg, "ErrApplied(1) [Cluster clusters/b: rendering failed]; NotReady(2) [Cluster clusters/c; Cluster clusters/d]") {
		t.Errorf("message %q", msg)
	}
	var empty Summary
	if !empty.AllReady() || empty.ReadyString() != "0/0" || empty.NotReadyMessage("Cluster") != "" {
		t.Errorf("empty summary %+v", empty)
	}
}
