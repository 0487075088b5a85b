package registration

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

// doctor runs `hub cluster doctor` and returns its DOCTOR lines and whether it
// passed.
func doctor(t *testing.T, hub *framework.Hub, args ...string) (string, bool) {
	t.Helper()
	out, err := tryHub(t, hub, append([]string{"cluster", "doctor", "-n", workspace}, args...)...)
	lines := grepLines(out, "DOCTOR")
	t.Logf("hub cluster doctor %s:\n%s", strings.Join(args, " "), lines)
	return lines, err == nil
}

// expectDoctor checks that doctor fails with a line of check saying message.
func expectDoctor(t *testing.T, hub *framework.Hub, check, message string, args ...string) {
	t.Helper()
	lines, ok := doctor(t, hub, args...)
	if ok || !strings.Contains(lines, "DOCTOR "+check+": ") || !strings.Contains(lines, message) {
		t.Errorf("hub cluster doctor %s: passed %v, want a %q line saying %q:\n%s", strings.Join(args, " "), ok, check, message, lines)
	}
}

// TestHubClusterDoctorSaysWhatIsWrong: `hub cluster doctor` passes for a Ready
// cluster and prints a DOCTOR line, and fails, for a cluster that does not exist,
// an agent of another version, one gone offline, a BundleDeployment not ready and
// check-ins dated ahead of the hub's clock. (Approval and refusals:
// TestApprovalHoldsNewClustersForAnAdmin.)
func TestHubClusterDoctorSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, "--cluster-offline-after", "5s")
	ds := framework.StartControlPlane(t, "doctor")
	framework.InstallAgent(t, ds, hub.CreateToken(workspace, "doctor", ""))
	agent := framework.StartAgent(t, ds)
	name := waitRegistered(t, ds).ClusterName
	waitReady(t, hub, name)

	if lines, ok := doctor(t, hub, name); !ok || lines != "DOCTOR ok: no problem found with Cluster "+workspace+"/"+name {
		t.Errorf("doctor of a Ready cluster: passed %v\n%s", ok, lines)
	}
	expectDoctor(t, hub, "cluster", "there is no Cluster "+workspace+"/no-such-cluster", "no-such-cluster")
	expectDoctor(t, hub, "versions", "and the hub v0.0.0-other", name, "--agent-version", "v0.0.0-other")

	agent.Kill()
	framework.Eventually(t, "the cluster to go offline", timeout, func(ctx context.Context) error {
		c, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, name, framework.Get)
		if err != nil {
			return err
		}
		for _, cond := range c.Status.Conditions {
			if cond.Type == "Ready" && cond.Reason == "Offline" {
				return nil
			}
		}
		return fmt.Errorf("conditions %+v", c.Status.Conditions)
	})
	expectDoctor(t, hub, "agent", "the agent has not checked in since", name)

	hub.MustKubectl(strings.ReplaceAll(movedBundle, "moved-app", "doctor-bundle"), "apply", "-f", "-")
	framework.Eventually(t, "doctor to name the BundleDeployment the stopped agent does not deploy", timeout, func(context.Context) error {
		if lines, _ := doctor(t, hub, name); !strings.Contains(lines, "DOCTOR bundles: 1 BundleDeployments in ") || !strings.Contains(lines, "doctor-bundle") {
			return fmt.Errorf("doctor:\n%s", lines)
		}
		return nil
	})

	// Check-ins dated an hour ahead: the cluster's clock is off.
	patch, _ := json.Marshal(map[string]any{"status": map[string]any{"agent": map[string]any{"lastSeen": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}})
	if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Patch(context.Background(), name, types.MergePatchType, patch, metav1.PatchOptions{}, "status"); err != nil {
		t.Fatal(err)
	}
	expectDoctor(t, hub, "clock", "ahead of the hub's clock", name)
}
