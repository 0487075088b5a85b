package framework

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// RunJourney runs a journey script (a path under the repository) in a fresh
// directory that holds the repository's charts/, with env added and bin/ (helm, hub,
// agent) first on PATH. AGENT is the agent binary unless env sets it (to empty where
// the agent runs as a Pod).
func RunJourney(t testing.TB, script string, env ...string) string {
	t.Helper()
	dir := t.TempDir()
	root := RepoRoot(t)
	if err := os.Symlink(filepath.Join(root, "charts"), filepath.Join(dir, "charts")); err != nil {
		t.Fatal(err)
	}
	bin := BinDir(t)
	cmd := exec.Command("bash", filepath.Join(root, script))
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), append([]string{"PATH=" + bin + ":" + os.Getenv("PATH"), "AGENT=" + filepath.Join(bin, "agent")}, env...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		agentLog, _ := os.ReadFile(filepath.Join(dir, "agent.log"))
		t.Fatalf("%s failed: %v\n%s\nagent log:\n%s", script, err, out, agentLog)
	}
	return string(out)
}
