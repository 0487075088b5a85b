// Package charts checks the Helm charts with the real helm CLI: lint, and the
// refusals users get for an install that would not work.
package charts

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(filepath.Join(framework.BinDir(t), "helm"), args...)
	cmd.Env = append(cmd.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestAgentChartLintsClean(t *testing.T) {
	out, err := helm(t, "lint", "--strict", framework.AgentChart(t))
	if err != nil || !strings.Contains(out, "0 chart(s) failed") {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	if strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
		t.Fatalf("helm lint is not clean:\n%s", out)
	}
}

var registrationValues = []string{"--set", "token=abc,tokenName=new-token,apiServerURL=https://hub:6443,clusterNamespace=clusters"}

func TestAgentChartRefusesInstallsThatCannotWork(t *testing.T) {
	chart := framework.AgentChart(t)
	cases := map[string]struct {
		args []string
		want string
	}{
		"another release name": {append([]string{"template", "my-agent", chart, "-n", "cattle-fleet-system"}, registrationValues...),
			`the release must be named fleet-agent, not "my-agent"`},
		"another namespace": {append([]string{"template", "fleet-agent", chart, "-n", "default"}, registrationValues...),
			`install into namespace cattle-fleet-system, not "default"`},
		"no values.yaml": {[]string{"template", "fleet-agent", chart, "-n", "cattle-fleet-system"},
			"apiServerURL is missing: pass the values.yaml of a ClusterRegistrationToken"},
		"no token": {[]string{"template", "fleet-agent", chart, "-n", "cattle-fleet-system", "--set", "apiServerURL=https://hub:6443,clusterNamespace=clusters"},
			"token is missing"},
		"a proxy without a scheme": {append([]string{"template", "fleet-agent", chart, "-n", "cattle-fleet-system", "--set", "proxy=proxy.example.com:3128"}, registrationValues...),
			"/proxy"},
		"a value the chart does not know": {append([]string{"template", "fleet-agent", chart, "-n", "cattle-fleet-system", "--set", "tokn=x"}, registrationValues...),
			"tokn"},
	}
	for name, c := range cases {
		out, err := helm(t, c.args...)
		if err == nil {
			t.Errorf("%s: helm accepted it:\n%s", name, out)
			continue
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: the message does not say %q:\n%s", name, c.want, out)
		}
	}
}

func TestAgentChartRendersTheAgent(t *testing.T) {
	out, err := helm(t, append([]string{"template", "fleet-agent", framework.AgentChart(t), "-n", "cattle-fleet-system",
		"--set", "clientID=really-random", "--set-string", "labels.env=dev", "--set", "privateRepoURL=registry.example.com"}, registrationValues...)...)
	if err != nil {
		t.Fatalf("helm template: %v\n%s", err, out)
	}
	for _, want := range []string{
		"kind: Secret\nmetadata:\n  name: fleet-agent-bootstrap",
		"kind: ConfigMap\nmetadata:\n  name: fleet-agent",
		`clientID: "really-random"`,
		`labels: "{\"env\":\"dev\"}"`,
		"kind: Deployment\nmetadata:\n  name: fleet-agent",
		`image: "registry.example.com/flotilla/agent:0.1.0"`,
		"app: fleet-agent",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered chart lacks %q", want)
		}
	}
	// The proxy values become the agent's flags for its hub connection, not
	// environment variables every connection would use.
	out, err = helm(t, append([]string{"template", "fleet-agent", framework.AgentChart(t), "-n", "cattle-fleet-system",
		"--set", "proxy=http://proxy.example.com:3128,noProxy=.internal"}, registrationValues...)...)
	if err != nil {
		t.Fatalf("helm template with a proxy: %v\n%s", err, out)
	}
	for _, want := range []string{`- "--hub-proxy=http://proxy.example.com:3128"`, `- "--hub-no-proxy=.internal"`} {
		if !strings.Contains(out, want) {
			t.Errorf("rendered chart with a proxy lacks %q", want)
		}
	}
	if strings.Contains(out, "HTTPS_PROXY") {
		t.Errorf("the proxy is in the environment of every connection:\n%s", out)
	}
	// An upgrade without registration values (the hub's agent bundle) renders no
	// bootstrap Secret and is not refused.
	out, err = helm(t, "template", "fleet-agent", framework.AgentChart(t), "-n", "cattle-fleet-system", "--is-upgrade")
	if err != nil || strings.Contains(out, "fleet-agent-bootstrap") {
		t.Fatalf("an upgrade without values: %v\n%s", err, out)
	}
}
