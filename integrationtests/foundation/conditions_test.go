package foundation

import (
	"context"
	"encoding/json"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/controllers/statuspatch"
	"github.com/flotilla/flotilla/pkg/crds"
	fleetclient "github.com/flotilla/flotilla/pkg/generated/clientset/versioned/typed/fleet.cattle.io/v1alpha1"
)

// TestClusterStatusWritersCannotClobberEachOther plays the race of the hub's two
// writers of a Cluster's status on a real API server with Flotilla's CRDs: each
// computes from a copy that predates the other's write, as a controller whose cache
// is a moment behind does. Each one's condition and fields must survive the other's
// write, and the agent's report must survive both.
func TestClusterStatusWritersCannotClobberEachOther(t *testing.T) {
	t.Parallel()
	client := clustersAPI(t, "conditions")
	ctx := context.Background()
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

	// The import controller deploys the agent and says so, over the version it read.
	read := get()
	imported := read.Status.DeepCopy()
	gen := int64(0)
	imported.AgentDeployedGeneration = &gen
	imported.AgentConfigHash = "hash-1"
	conditions.Set(&imported.Conditions, fleet.ConditionImported, corev1.ConditionTrue, "", "")
	if _, err := statuspatch.ImportsOwner.ApplyCluster(ctx, client, read, *imported); err != nil {
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

	// The import controller, from its old copy, would send back the generation that
	// copy had: it writes a failure only over the version it read, so it is told to
	// look again.
	optimistic := statuspatch.ImportsOwner
	optimistic.Optimistic = true
	failed := stale.Status.DeepCopy()
	conditions.Set(&failed.Conditions, fleet.ConditionImported, corev1.ConditionFalse, "Unreachable", "no route")
	if _, err := optimistic.ApplyCluster(ctx, client, stale, *failed); !apierrors.IsConflict(err) {
		t.Errorf("the import controller's write from a stale copy: %v, want a conflict", err)
	}
	// Looking again, it reports a failure: the Cluster controller's condition stays.
	read = get()
	failed = read.Status.DeepCopy()
	conditions.Set(&failed.Conditions, fleet.ConditionImported, corev1.ConditionFalse, "Unreachable", "no route")
	if _, err := optimistic.ApplyCluster(ctx, client, read, *failed); err != nil {
		t.Fatal(err)
	}
	c = get()
	expect(c, fleet.ConditionImported, corev1.ConditionFalse, "Unreachable")
	expect(c, fleet.ConditionReady, corev1.ConditionFalse, "WaitCheckIn")
	if c.Status.Namespace != "cluster-clusters-c1" || c.Status.Display.State != "WaitCheckIn" || c.Status.AgentConfigHash != "hash-1" {
		t.Errorf("fields were lost: namespace %q, display %+v, hash %q", c.Status.Namespace, c.Status.Display, c.Status.AgentConfigHash)
	}

	// A copy that already holds another writer's condition does not make it the
	// writer's own: the Cluster controller, computing from the current object, sends
	// Ready only, and a field it empties is emptied.
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
	managers := map[string]bool{}
	for _, m := range c.ManagedFields {
		managers[m.Manager] = true
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
	if !managers[statuspatch.ClusterOwner.Manager] || !managers[statuspatch.ImportsOwner.Manager] {
		t.Errorf("managers %v, want both writers", managers)
	}
}

// TestClusterStatusFromBeforeApplyIsReplaced starts from a Cluster whose status a
// hub before server-side apply wrote with a merge patch (its own field manager, the
// conditions then an atomic list): the Cluster controller's first apply must replace
// those values, empty ones included, not keep them beside its own.
func TestClusterStatusFromBeforeApplyIsReplaced(t *testing.T) {
	t.Parallel()
	client := clustersAPI(t, "upgrade")
	ctx := context.Background()
	if _, err := client.Clusters("clusters").Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c2"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old := `{"status":{"namespace":"cluster-clusters-c2","summary":{"ready":0,"desiredReady":1,"notReady":1},` +
		`"display":{"readyBundles":"0/1","state":"Offline"},` +
		`"conditions":[{"type":"Ready","status":"Unknown","reason":"Offline","message":"the agent has not checked in","lastUpdateTime":"2026-01-01T00:00:00Z"}]}}`
	if _, err := client.Clusters("clusters").Patch(ctx, "c2", types.MergePatchType, []byte(old), metav1.PatchOptions{FieldManager: "hub"}, "status"); err != nil {
		t.Fatal(err)
	}
	before, err := client.Clusters("clusters").Get(ctx, "c2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	status := before.Status.DeepCopy()
	status.Summary = fleet.BundleSummary{Ready: 1, DesiredReady: 1}
	status.Display = fleet.ClusterDisplay{ReadyBundles: "1/1"}
	conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
	if _, err := statuspatch.ClusterOwner.ApplyCluster(ctx, client, before, *status); err != nil {
		t.Fatal(err)
	}
	after, err := client.Clusters("clusters").Get(ctx, "c2", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ready := conditions.Get(after.Status.Conditions, fleet.ConditionReady)
	if ready == nil || ready.Status != corev1.ConditionTrue || ready.Reason != "" || ready.Message != "" {
		t.Errorf("Ready is %+v, want True with no reason or message", ready)
	}
	if after.Status.Summary.NotReady != 0 || after.Status.Display.State != "" || after.Status.Display.ReadyBundles != "1/1" {
		t.Errorf("summary %+v, display %+v: values from before the apply were kept", after.Status.Summary, after.Status.Display)
	}
}

// clustersAPI starts a control plane with Flotilla's CRDs and no hub, and a
// namespace "clusters" for Clusters, and returns its fleet.cattle.io client.
func clustersAPI(t *testing.T, name string) fleetclient.FleetV1alpha1Interface {
	t.Helper()
	cp := framework.StartControlPlane(t, name)
	ctx := context.Background()
	if err := crds.Apply(ctx, cp.RESTConfig()); err != nil {
		t.Fatal(err)
	}
	if _, err := cp.Client().CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "clusters"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return cp.Fleet().FleetV1alpha1()
}
