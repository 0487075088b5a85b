package deployer

import (
	"fmt"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	kubefake "helm.sh/helm/v3/pkg/kube/fake"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	helmtime "helm.sh/helm/v3/pkg/time"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned/fake"
	"github.com/flotilla/flotilla/pkg/names"
)

// memoryConfig is a Helm configuration with releases in memory and a kube client
// that accepts everything.
func memoryConfig() *action.Configuration {
	return &action.Configuration{
		Releases:     storage.Init(driver.NewMemory()),
		KubeClient:   &kubefake.PrintingKubeClient{Out: io.Discard},
		Capabilities: chartutil.DefaultCapabilities,
		Log:          func(string, ...interface{}) {},
	}
}

func testDeployer(t *testing.T, resources []fleet.BundleResource) (*Deployer, *fleet.BundleDeployment) {
	t.Helper()
	enc, err := content.Encode(resources)
	if err != nil {
		t.Fatal(err)
	}
	data, err := enc.Gzip()
	if err != nil {
		t.Fatal(err)
	}
	hub := fake.NewSimpleClientset(&fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: enc.Name}, Content: data, SHA256Sum: enc.SHA256})
	log := logrus.New()
	log.SetOutput(io.Discard)
	d := &Deployer{Hub: hub, AgentNamespace: names.SystemNamespace, Log: log, configs: map[string]access{}}
	d.ledger = &ledger{kube: k8sfake.NewClientset(), namespace: names.SystemNamespace, legacy: func() ([]made, error) { return nil, nil }}
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "cluster-ns"},
		Spec:       fleet.BundleDeploymentSpec{DeploymentID: enc.Name + ":x", Options: fleet.BundleDeploymentOptions{DefaultNamespace: "app"}},
	}
	return d, bd
}

var configMap = []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"}}

// A release left pending by an agent killed mid-upgrade is marked failed and upgraded.
func TestPendingReleaseIsRecovered(t *testing.T) {
	d, bd := testDeployer(t, configMap)
	cfg := memoryConfig()
	stuck := &release.Release{
		Name: "app", Namespace: "app", Version: 3,
		Info:  &release.Info{Status: release.StatusPendingUpgrade, LastDeployed: helmtime.Now()},
		Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "app", Version: "0.0.0", APIVersion: "v2"}},
	}
	if err := cfg.Releases.Create(stuck); err != nil {
		t.Fatal(err)
	}
	if _, err := d.deploy(access{helm: cfg, kube: k8sfake.NewClientset()}, bd, "app", "app", false, d.Log); err != nil {
		t.Fatalf("deploy over a pending release: %v", err)
	}
	history, err := cfg.Releases.History("app")
	if err != nil {
		t.Fatal(err)
	}
	statuses := map[int]release.Status{}
	for _, r := range history {
		statuses[r.Version] = r.Info.Status
	}
	if statuses[3].IsPending() || statuses[4] != release.StatusDeployed {
		t.Errorf("release history %v: want revision 3 no longer pending and 4 deployed", statuses)
	}
	if history[len(history)-1].Labels[names.BundleDeploymentLabel] != "app" {
		t.Errorf("release labels %v", history[len(history)-1].Labels)
	}
}

// Once the agent is stopping, no Helm operation starts, and Wait returns only after
// the running ones end.
func TestStoppingWaitsForOperations(t *testing.T) {
	d, bd := testDeployer(t, configMap)
	if !d.ops.begin() {
		t.Fatal("could not begin an operation")
	}
	stopped := make(chan struct{})
	go func() { d.Wait(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Wait returned while an operation was running")
	case <-time.After(100 * time.Millisecond):
	}
	d.ops.end()
	<-stopped
	if _, err := d.deploy(access{helm: memoryConfig()}, bd, "app", "app", false, d.Log); err != errStopping {
		t.Errorf("deploy after Wait: %v, want errStopping", err)
	}
}

// The agent bundle keeps what the agent was installed with, but not the registration
// values: an upgrade renders no bootstrap Secret.
func TestAgentValuesDropRegistration(t *testing.T) {
	got := agentValues(
		map[string]interface{}{"token": "t", "apiServerURL": "u", "checkinInterval": "5s", "labels": map[string]interface{}{"env": "dev"}, "env": []interface{}{"old"}},
		map[string]interface{}{"env": []interface{}{"new"}, "clientID": "id"}, false,
	)
	if _, ok := got["token"]; ok {
		t.Errorf("token kept: %v", got)
	}
	if _, ok := got["apiServerURL"]; ok {
		t.Errorf("apiServerURL kept: %v", got)
	}
	if got["checkinInterval"] != "5s" || got["clientID"] != "id" || got["env"].([]interface{})[0] != "new" {
		t.Errorf("values %v", got)
	}
}

// The trusted keys are the cluster owner's: the agent bundle, from the hub, can
// neither drop nor replace them.
func TestAgentValuesKeepTrustedKeys(t *testing.T) {
	for _, bundle := range []map[string]interface{}{
		{"trustedKeys": ""},
		{"trustedKeys": "the hub's key"},
		{},
	} {
		for _, trusting := range []bool{false, true} {
			got := agentValues(map[string]interface{}{"trustedKeys": "owner's key"}, bundle, trusting)
			if got["trustedKeys"] != "owner's key" {
				t.Errorf("with bundle values %v: trustedKeys %q", bundle, got["trustedKeys"])
			}
		}
	}
}

// With trusted keys, what chooses the agent's code is the owner's too: the Cluster's
// agent settings on the hub cannot point the agent at another image.
func TestAgentValuesOfATrustingAgentKeepItsCode(t *testing.T) {
	owner := map[string]interface{}{"image": map[string]interface{}{"repository": "flotilla/agent"}, "env": []interface{}{"A=1"}}
	bundle := map[string]interface{}{"privateRepoURL": "evil.example", "image": map[string]interface{}{"repository": "evil"},
		"env": []interface{}{"LD_PRELOAD=/x"}, "hostNetwork": true, "resources": map[string]interface{}{"limits": "1"}}
	got := agentValues(owner, bundle, true)
	for _, k := range codeKeys {
		if fmt.Sprint(got[k]) != fmt.Sprint(owner[k]) {
			t.Errorf("%s = %v, want the owner's %v", k, got[k], owner[k])
		}
	}
	if got["resources"] == nil {
		t.Errorf("resources, not code, were dropped: %v", got)
	}
	if got := agentValues(owner, bundle, false); got["privateRepoURL"] != "evil.example" {
		t.Errorf("without trusted keys the hub's settings apply: %v", got)
	}
}

// A failed drift correction leaves no revision behind, unless keepFailHistory.
func TestDropFailedAttempt(t *testing.T) {
	revision := func(v int, status release.Status) *release.Release {
		return &release.Release{Name: "app", Namespace: "app", Version: v, Info: &release.Info{Status: status, LastDeployed: helmtime.Now()},
			Chart: &chart.Chart{Metadata: &chart.Metadata{Name: "app", Version: "0.0.0", APIVersion: "v2"}}}
	}
	for _, tc := range []struct {
		name    string
		history []*release.Release
		before  int
		want    []int
	}{
		{"the failed attempt goes", []*release.Release{revision(1, release.StatusDeployed), revision(2, release.StatusFailed)}, 1, []int{1}},
		{"an older failure stays", []*release.Release{revision(1, release.StatusFailed), revision(2, release.StatusDeployed)}, 2, []int{1, 2}},
		{"a failure that was there before stays", []*release.Release{revision(1, release.StatusDeployed), revision(2, release.StatusFailed)}, 2, []int{1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := memoryConfig()
			var before *release.Release
			for _, r := range tc.history {
				if err := cfg.Releases.Create(r); err != nil {
					t.Fatal(err)
				}
				if r.Version == tc.before {
					before = r
				}
			}
			if err := dropFailedAttempt(cfg, "app", before); err != nil {
				t.Fatal(err)
			}
			history, _ := cfg.Releases.History("app")
			var got []int
			for _, r := range history {
				got = append(got, r.Version)
			}
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("history %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNextRecheck(t *testing.T) {
	const monitor = 30 * time.Second
	for _, tc := range []struct {
		name      string
		prev      recheck
		id        string
		ready     bool
		wantAfter time.Duration
	}{
		{"ready: the monitor interval", recheck{deploymentID: "a", notReadyFor: 4 * time.Second}, "a", true, monitor},
		{"not ready for the first time", recheck{deploymentID: "a"}, "a", false, time.Second},
		{"still not ready: twice as long", recheck{deploymentID: "a", notReadyFor: 4 * time.Second}, "a", false, 8 * time.Second},
		{"never longer than the monitor interval", recheck{deploymentID: "a", notReadyFor: 20 * time.Second}, "a", false, monitor},
		{"a new deployment starts again", recheck{deploymentID: "a", notReadyFor: 16 * time.Second}, "b", false, time.Second},
		{"nothing known yet", recheck{}, "a", false, time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			next, after := nextRecheck(tc.prev, tc.id, tc.ready, monitor)
			if after != tc.wantAfter {
				t.Errorf("after = %s, want %s", after, tc.wantAfter)
			}
			if next.deploymentID != tc.id || (tc.ready && next.notReadyFor != 0) || (!tc.ready && next.notReadyFor != after) {
				t.Errorf("next = %+v", next)
			}
		})
	}
}
