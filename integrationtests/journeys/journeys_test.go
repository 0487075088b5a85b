// Package journeys runs the user journeys of JOURNEYS.md as shell scripts with the
// real kubectl and helm command-line tools, against a real hub and real downstream
// control planes.
package journeys

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/internal/gittest"
)

// runJourney runs one of this package's scripts (framework.RunJourney).
func runJourney(t *testing.T, script string, env ...string) string {
	t.Helper()
	return framework.RunJourney(t, filepath.Join("integrationtests", "journeys", script), env...)
}

func TestJourneyJ1AgentInitiatedRegistration(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "downstream")
	// The script runs the agent; this stands in for its Pod's kubelet.
	framework.StandInForAgentPod(t, ds, "cattle-fleet-system", nil)
	out := runJourney(t, "j1.sh", "HUB="+hub.Kubeconfig, "DS="+ds.Kubeconfig)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "helm install to Ready") || strings.HasPrefix(line, "J1 passed") {
			t.Log(line)
		}
	}
}

func TestJourneyJ3ManagerInitiatedRegistration(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t, framework.AllowLocalImports)
	ds := framework.StartControlPlane(t, "downstream")
	framework.StandInForAgentPod(t, ds, "cattle-fleet-system", nil)
	out := runJourney(t, "j3.sh", "HUB="+hub.Kubeconfig, "DS="+ds.Kubeconfig)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "kubectl apply to Ready") || strings.HasPrefix(line, "broken:") || strings.HasPrefix(line, "J3 passed") {
			t.Log(line)
		}
	}
}

func TestJourneyJ6BundlesReachClusters(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	dev := framework.StartControlPlane(t, "dev")
	prod := framework.StartControlPlane(t, "prod")
	for _, ds := range []*framework.Cluster{dev, prod} {
		framework.StandInForAgentPod(t, ds, "cattle-fleet-system", nil)
	}
	out := runJourney(t, "j6.sh", "HUB="+hub.Kubeconfig, "DEV="+dev.Kubeconfig, "PROD="+prod.Kubeconfig)
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "kubectl apply to Bundle Ready") || strings.HasPrefix(line, "J6 passed") || strings.HasPrefix(line, "fleet.yaml passed") {
			t.Log(line)
		}
	}
}

func TestJourneyJ9GitOps(t *testing.T) {
	t.Parallel()
	git := gittest.Start(t, "git", "s3cret")
	hub := framework.StartHub(t, "--gitrepo-allowed-networks=127.0.0.0/8")
	clusters := framework.RegisterSimulatedClusters(t, hub, "fleet-default", map[string]string{"dev": "dev"})
	out := runJourney(t, "j9.sh", "HUB="+hub.Kubeconfig, "DEV="+clusters[0].Kubeconfig, "REPO="+git.URL, "PUSH="+git.Bare,
		"GIT_USER=git", "GIT_PASSWORD=s3cret")
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "git push to") || strings.HasPrefix(line, "J9 passed") {
			t.Log(line)
		}
	}
}
