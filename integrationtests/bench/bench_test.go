// Package bench runs `make bench` at a small scale so that it keeps working. It
// reports the numbers; it does not assert on times.
package bench

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

func TestBenchmarkRunsAtFiftyClusters(t *testing.T) {
	t.Parallel()
	const clusters = 50
	out := filepath.Join(t.TempDir(), "bench.json")
	cmd := exec.Command(filepath.Join(framework.BinDir(t), "bench"), "--clusters", "50", "--bin", framework.BinDir(t), "--out", out,
		"--checkin-interval", "2s", "--idle", "8s")
	table, err := cmd.Output()
	if err != nil {
		stderr := ""
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = string(exit.Stderr)
		}
		t.Fatalf("bench: %v\n%s\n%s", err, table, stderr)
	}
	t.Logf("bench --clusters %d:\n%s", clusters, table)

	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Clusters     int
		Registration struct {
			CredentialedAllSeconds, ReadyAllSeconds float64
			WritesPerRegistration                   map[string]float64 `json:"writesPerRegistration"`
			ObjectsPerRegistration                  map[string]float64 `json:"objectsPerRegistration"`
		}
		Bundle struct{ WrittenAllSeconds, ReadyAllSeconds float64 }
		Hub    struct{ CPUSeconds, PeakRSSMiB float64 }
		Idle   *struct {
			WritesPerMinute map[string]float64 `json:"writesPerMinute"`
		}
	}
	if err := json.Unmarshal(data, &r); err != nil {
		t.Fatalf("the JSON report: %v\n%s", err, data)
	}
	// What the numbers must be for the report to be about a run that happened.
	switch {
	case r.Clusters != clusters:
		t.Errorf("clusters = %d", r.Clusters)
	case r.Registration.CredentialedAllSeconds <= 0 || r.Registration.ReadyAllSeconds < r.Registration.CredentialedAllSeconds:
		t.Errorf("registration times: %+v", r.Registration)
	case r.Registration.ObjectsPerRegistration["Cluster"] != 1:
		t.Errorf("Clusters per registration = %v, want 1", r.Registration.ObjectsPerRegistration["Cluster"])
	case r.Idle == nil:
		t.Errorf("no report of the clusters at rest")
	case r.Idle.WritesPerMinute["PATCH leases"] <= r.Idle.WritesPerMinute["PATCH clusters/status"]:
		// At rest an agent has nothing new to report: it renews its Lease.
		t.Errorf("at rest, want the check-ins to be Lease renewals, not Cluster status patches: %v", r.Idle.WritesPerMinute)
	case r.Registration.WritesPerRegistration["total"] < 1:
		t.Errorf("no API writes counted: %v", r.Registration.WritesPerRegistration)
	case r.Bundle.WrittenAllSeconds <= 0 || r.Bundle.ReadyAllSeconds < r.Bundle.WrittenAllSeconds:
		t.Errorf("bundle times: %+v", r.Bundle)
	case r.Hub.CPUSeconds <= 0 || r.Hub.PeakRSSMiB <= 0:
		t.Errorf("hub usage: %+v", r.Hub)
	}
}

// The per-request cost table: every kind measured, none failed. The costs are the
// machine's; the test only reads that each is a number.
func TestWriteCostsRun(t *testing.T) {
	t.Parallel()
	cmd := exec.Command(filepath.Join(framework.BinDir(t), "bench"), "--write-costs", "--clusters", "50", "--bin", framework.BinDir(t))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bench --write-costs: %v\n%s", err, out)
	}
	t.Logf("bench --write-costs --clusters 50:\n%s", out)
	line := regexp.MustCompile(`(?m)^  (POST|PATCH|PUT|GET) \S+.* -?\d+\.\d\d ms$`)
	if got := len(line.FindAllString(string(out), -1)); got != 19 || strings.Contains(string(out), "failed") {
		t.Errorf("want 19 kinds measured, none failed; got %d lines:\n%s", got, out)
	}
}
