package framework

import (
	"os"
	"path/filepath"
	"testing"
)

// Fleet's programs are not part of this repository and are not built by it: tests
// that run them take Fleet's binaries from the directory $FLEET_BIN and Fleet's
// charts from a checkout of rancher/fleet at $FLEET_SRC, and skip, saying so,
// without them (docs/migrate-from-fleet.md says which versions were tested).

// FleetBinary is the path of Fleet's program name (fleetagent, fleet) in $FLEET_BIN;
// the test is skipped without it.
func FleetBinary(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("FLEET_BIN")
	if dir == "" {
		t.Skip("FLEET_BIN is not set: it names a directory with Fleet's binaries built from rancher/fleet (see docs/migrate-from-fleet.md)")
	}
	path := filepath.Join(dir, name)
	if _, err := os.Stat(path); err != nil {
		t.Skipf("no %s in FLEET_BIN: %v", name, err)
	}
	return path
}

// FleetChart is the path of Fleet's chart name in the rancher/fleet checkout at
// $FLEET_SRC; the test is skipped without it.
func FleetChart(t testing.TB, name string) string {
	t.Helper()
	src := os.Getenv("FLEET_SRC")
	if src == "" {
		t.Skip("FLEET_SRC is not set: it names a checkout of rancher/fleet, whose charts the test installs")
	}
	path := filepath.Join(src, "charts", name)
	if _, err := os.Stat(filepath.Join(path, "Chart.yaml")); err != nil {
		t.Skipf("no chart %s in FLEET_SRC: %v", name, err)
	}
	return path
}
