package registration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

// hubCommand runs the hub binary's user commands against hub.
func hubCommand(t *testing.T, hub *framework.Hub, args ...string) string {
	t.Helper()
	out, err := tryHub(t, hub, args...)
	if err != nil {
		t.Fatalf("hub %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// tryHub runs the hub binary's user commands against hub and returns their output
// and error.
func tryHub(t *testing.T, hub *framework.Hub, args ...string) (string, error) {
	t.Helper()
	out, err := exec.Command(filepath.Join(framework.BinDir(t), "hub"), append(args, "--kubeconfig", hub.Kubeconfig)...).CombinedOutput()
	return string(out), err
}

// curl fetches url with the real curl, as a user would.
func curl(t *testing.T, url string) string {
	t.Helper()
	out, err := exec.Command("curl", "-sf", url).Output()
	if err != nil {
		t.Fatalf("curl %s: %v", url, err)
	}
	return string(out)
}

func grepLines(text, prefix string) string {
	var out []string
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, prefix) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// TestTokenCLIPrintsTheInstallCommand: `hub token create` makes the token, writes its
// values.yaml and prints the helm command; running that command registers a cluster,
// which `hub cluster list` then shows.
func TestTokenCLIPrintsTheInstallCommand(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "downstream")
	dir := t.TempDir()
	values := filepath.Join(dir, "values.yaml")

	out := hubCommand(t, hub, "token", "create", "new-token", "-n", workspace, "--ttl", "240h", "-o", values,
		"--chart", framework.AgentChart(t))
	var helmLine string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "helm ") {
			helmLine = line
		}
	}
	want := "helm -n cattle-fleet-system install --create-namespace --values " + values + " fleet-agent " + framework.AgentChart(t)
	if helmLine != want {
		t.Fatalf("printed:\n%s\nwant the line %q", out, want)
	}
	if data, err := os.ReadFile(values); err != nil || !strings.Contains(string(data), "clusterNamespace: clusters") {
		t.Fatalf("values.yaml: %v\n%s", err, data)
	}
	if ttl := hub.MustKubectl("", "-n", workspace, "get", "clusterregistrationtokens.fleet.cattle.io", "new-token", "-o", "jsonpath={.spec.ttl}"); ttl != "240h0m0s" {
		t.Errorf("token ttl %q", ttl)
	}

	before := curl(t, hub.MetricsURL)
	if !strings.Contains(before, "flotilla_registration_tokens_expired_total 0") || strings.Contains(before, `flotilla_registrations_total{reason="",result="granted"}`) {
		t.Errorf("metrics before any registration:\n%s", grepLines(before, "flotilla_"))
	}

	// The printed command, as printed (helm from bin/ first on PATH).
	fields := strings.Fields(helmLine)
	if _, err := ds.Helm(fields[1:]...); err != nil {
		t.Fatal(err)
	}
	framework.StartAgent(t, ds)
	cluster := waitRegistered(t, ds).ClusterName
	waitReady(t, hub, cluster)

	// The counters moved, as curl of /metrics shows.
	framework.Eventually(t, "the metrics to count the registration and the ready agent bundle", timeout, func(context.Context) error {
		after := curl(t, hub.MetricsURL)
		for _, want := range []string{`flotilla_registrations_total{reason="",result="granted"} 1`, `flotilla_bundledeployments{state="Ready"} 1`, `lasso_controller_reconcile_time_seconds_count`} {
			if !strings.Contains(after, want) {
				return fmt.Errorf("no %q in:\n%s", want, grepLines(after, "flotilla_"))
			}
		}
		return nil
	})

	list := hubCommand(t, hub, "cluster", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if len(lines) != 2 || strings.Join(strings.Fields(lines[0]), " ") != "NAMESPACE NAME BUNDLES-READY NODES-READY SAMPLE-NODE LAST-SEEN STATUS" ||
		!strings.HasPrefix(lines[1], workspace) || !strings.Contains(lines[1], cluster) || !strings.Contains(lines[1], "1/1") {
		t.Errorf("hub cluster list:\n%s", list)
	}

	// Running it again reuses the token; printing without -o tells how to fetch values.
	again := hubCommand(t, hub, "token", "create", "new-token", "-n", workspace)
	if !strings.Contains(again, "exists; using it") || !strings.Contains(again, "get secret new-token -o 'jsonpath={.data.values}' | base64 --decode > values.yaml") {
		t.Errorf("second run printed:\n%s", again)
	}
}
