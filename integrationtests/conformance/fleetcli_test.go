package conformance

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/pkg/names"
)

// Fleet's own CLI, `fleet`, built from rancher/fleet (taken from $FLEET_BIN; these
// tests skip without it), against a Flotilla hub and beside `hub test`.

// stdout runs cmd in dir and returns its standard output; its standard error (where
// both CLIs say which target matched, and Fleet's says `test` is deprecated) goes to
// the failure message.
func stdout(t *testing.T, dir, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s in %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), dir, err, out.String(), errOut.String())
	}
	return out.String()
}

// TestFleetsTestRendersWhatHubTestRenders runs Fleet's `fleet test` and `hub test` in
// every example folder for every environment, and compares the objects they print
// (order and Fleet's bookkeeping labels aside) and the target they say matched.
func TestFleetsTestRendersWhatHubTestRenders(t *testing.T) {
	fleetCLI := framework.FleetBinary(t, "fleet")
	hubCLI := filepath.Join(framework.BinDir(t), "hub")
	repo := newChartRepository(t)
	for _, ex := range examples(t) {
		for _, env := range envs {
			t.Run(ex.Case+"/"+env, func(t *testing.T) {
				dir := localExample(t, ex.Case, repo)
				var labels []string
				if ex.MultiCluster {
					labels = []string{"-l", "env=" + env}
				}
				fromFleet := stdout(t, dir, fleetCLI, append([]string{"test"}, labels...)...)
				fromHub := stdout(t, dir, hubCLI, append([]string{"test", "--allowed-networks", "127.0.0.0/8"}, labels...)...)
				if a, b := matched(fromFleet), matched(fromHub); a != b {
					t.Errorf("fleet test says %q, hub test %q", a, b)
				}
				for _, d := range differences("objects", objects(t, []byte(fromHub)), objects(t, []byte(fromFleet)), 20) {
					t.Error(d)
				}
			})
		}
	}
}

// matched is the "# Matched: TARGET" line both CLIs print first.
func matched(out string) string {
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "# Matched:") {
			return line
		}
	}
	return ""
}

// TestFleetsApplyDeploysToAFlotillaHub applies every example with Fleet's
// `fleet apply` to a Flotilla hub with three downstream clusters labelled env=dev,
// test and prod, as tests/test.sh applies them to Fleet, and finds downstream every
// object Fleet's expected output has for each cluster's environment. Helm values
// Fleet's CLI keeps in a Secret behind spec.valuesHash are deployed with the chart.
func TestFleetsApplyDeploysToAFlotillaHub(t *testing.T) {
	fleetCLI := framework.FleetBinary(t, "fleet")
	repo := newChartRepository(t)
	hub, clusters := startHubWithLabelledClusters(t)

	for _, ex := range examples(t) {
		paths := []string{"."}
		if ex.Case == "single-cluster/helm-multi-chart" {
			// Only its guestbook, as in TestFleetExamplesDeployToLabelledClusters.
			paths = []string{"guestbook"}
		}
		name := strings.ReplaceAll(ex.Case, "/", "-")
		stdout(t, localExample(t, ex.Case, repo), fleetCLI, append([]string{"apply", "-n", deployWorkspace, "--kubeconfig", hub.Kubeconfig, name}, paths...)...)
	}

	list, err := hub.Fleet().FleetV1alpha1().Bundles(deployWorkspace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	withValuesHash := 0
	var made []string
	for _, b := range list.Items {
		if b.Labels[names.AgentBundleLabel] != "" {
			continue
		}
		made = append(made, b.Name)
		if b.Spec.ValuesHash != "" {
			withValuesHash++
			if _, err := hub.Client().CoreV1().Secrets(deployWorkspace).Get(context.Background(), b.Name, metav1.GetOptions{}); err != nil {
				t.Errorf("Bundle %s names values by hash, and its values Secret: %v", b.Name, err)
			}
		}
	}
	if len(made) < len(examples(t)) {
		t.Fatalf("fleet apply made %d Bundles (%v), want one or more per example", len(made), made)
	}
	if withValuesHash == 0 {
		t.Errorf("no Bundle of %v keeps its values behind spec.valuesHash, as Fleet's CLI does for Helm values", made)
	}
	waitBundlesReady(t, hub, made)
	found := expectDeployed(t, clusters)
	t.Logf("fleet apply made %d Bundles, %d with values behind valuesHash; objects of Fleet's expected output found: %v", len(made), withValuesHash, found)
}
