package foundation

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/controllers/statuspatch"
	"github.com/flotilla/flotilla/pkg/crds"
)

// TestClusterStatusWritersCannotClobberEachOther plays the race of the hub's two
// writers of a Cluster's status on a real API server with Flotilla's CRDs: each
// computes from a copy that predates the other's write, as a controller whose cache
// is a moment behind does. Each one's condition and fields must survive the other's
// write, and the agent's report must survive both.
func TestClusterStatusWritersCannotClobberEachOther(t *testing.T) {
	t.Parallel()
	cp := framework.StartControlPlane(t, "conditions")
	ctx := context.Background()
	if err := crds.Apply(ctx, cp.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	client := cp.Fleet().FleetV1alpha1()
	stale, err := client.Clusters("clusters").Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	get := func() *fleet.Cluster {
		t.Helper()
		c, err := client.Clusters("clusters").Get(ctx, "c1", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	expect := func(c *fleet.Cluster, condition string, status corev1.ConditionStatus, reason string) {
		t.Helper()
		got := conditions.Get(c.Status.Conditions, condition)
		if got == nil || got.Status != status || got.Reason != reason {
			t.Errorf("%s condition is %+v, want status %s reason %q; conditions: %+v", condition, got, status, reason, c.Status.Conditions)
		}
	}

	// The agent reports (a merge patch of status.agent, as pkg/agent sends it).
	report := `{"status":{"agent":{"lastSeen":"2026-01-02T03:04:05Z","readyNodes":1}}}`
	if _, err := client.Clusters("clusters").Patch(ctx, "c1", types.MergePatchType, []byte(report), metav1.PatchOptions{FieldManager: "agent"}, "status"); err != nil {
		t.Fatal(err)
	}

	// The import controller deploys the agent and says so.
	imported := stale.Status.DeepCopy()
	gen := int64(0)
	imported.AgentDeployedGeneration = &gen
	imported.AgentConfigHash = "hash-1"
	conditions.Set(&imported.Conditions, fleet.ConditionImported, corev1.ConditionTrue, "", "")
	if _, err := statuspatch.ImportsOwner.ApplyCluster(ctx, client, stale, *imported); err != nil {
		t.Fatal(err)
	}

	// The Cluster controller, from the copy that predates the import, writes Ready.
	summarized := stale.Status.DeepCopy()
	summarized.Namespace = "cluster-clusters-c1"
	summarized.Display.State = "WaitCheckIn"
	summarized.Display.ReadyBundles = "0/0"
	conditions.Set(&summarized.Conditions, fleet.ConditionReady, corev1.ConditionFalse, "WaitCheckIn", "waiting")
	if _, err := statuspatch.ClusterOwner.ApplyCluster(ctx, client, stale, *summarized); err != nil {
		t.Fatal(err)
	}
	c := get()
	expect(c, fleet.ConditionImported, corev1.ConditionTrue, "")
	expect(c, fleet.ConditionReady, corev1.ConditionFalse, "WaitCheckIn")
	if c.Status.AgentDeployedGeneration == nil || c.Status.AgentConfigHash != "hash-1" {
		t.Errorf("the import's fields were lost: generation %v, hash %q", c.Status.AgentDeployedGeneration, c.Status.AgentConfigHash)
	}
	if c.Status.Agent.ReadyNodes != 1 || c.Status.Agent.LastSeen.IsZero() {
		t.Errorf("the agent's report was lost: %+v", c.Status.Agent)
	}

	// The import controller, from its own old copy (no Ready yet), reports a failure.
	failed := imported.DeepCopy()
	conditions.Set(&failed.Conditions, fleet.ConditionImported, corev1.ConditionFalse, "Unreachable", "no route")
	if _, err := statuspatch.ImportsOwner.ApplyCluster(ctx, client, stale, *failed); err != nil {
		t.Fatal(err)
	}
	c = get()
	expect(c, fleet.ConditionImported, corev1.ConditionFalse, "Unreachable")
	expect(c, fleet.ConditionReady, corev1.ConditionFalse, "WaitCheckIn")
	if c.Status.Namespace != "cluster-clusters-c1" || c.Status.Display.State != "WaitCheckIn" {
		t.Errorf("the Cluster controller's fields were lost: namespace %q, display %+v", c.Status.Namespace, c.Status.Display)
	}

	// A copy that already holds another writer's condition does not make it the
	// writer's own: the Cluster controller, computing from the current object, sends
	// Ready only, and a field it stops sending goes.
	current := c.Status.DeepCopy()
	conditions.Set(&current.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
	current.Display.State = ""
	if _, err := statuspatch.ClusterOwner.ApplyCluster(ctx, client, c, *current); err != nil {
		t.Fatal(err)
	}
	c = get()
	expect(c, fleet.ConditionReady, corev1.ConditionTrue, "")
	expect(c, fleet.ConditionImported, corev1.ConditionFalse, "Unreachable")
	if c.Status.Display.State != "" || c.Status.Display.ReadyBundles != "0/0" {
		t.Errorf("display is %+v, want the state gone and the bundles kept", c.Status.Display)
	}
	for _, m := range c.ManagedFields {
		fields, _ := json.Marshal(m.FieldsV1)
		owns := func(s string) bool { return strings.Contains(string(fields), s) }
		switch m.Manager {
		case statuspatch.ClusterOwner.Manager:
			if owns(`"k:{\"type\":\"Imported\"}"`) || !owns(`"k:{\"type\":\"Ready\"}"`) {
				t.Errorf("%s owns %s", m.Manager, fields)
			}
		case statuspatch.ImportsOwner.Manager:
			if owns(`"k:{\"type\":\"Ready\"}"`) || !owns(`"k:{\"type\":\"Imported\"}"`) {
				t.Errorf("%s owns %s", m.Manager, fields)
			}
		}
	}
}
