package registration

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/pkg/names"
)

// pendingCluster waits until `hub cluster pending` lists exactly one cluster in the
// workspace that is not in skip, and returns its name.
func pendingCluster(t *testing.T, hub *framework.Hub, skip ...string) string {
	t.Helper()
	var name string
	framework.Eventually(t, "hub cluster pending to list the new cluster", timeout, func(context.Context) error {
		out := hubCommand(t, hub, "cluster", "pending", "-n", workspace)
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if strings.Join(strings.Fields(lines[0]), " ") != "NAMESPACE CLUSTER TOKEN CLIENT-ID LABELS WAITING-SINCE REQUEST" {
			return fmt.Errorf("header of:\n%s", out)
		}
		for _, line := range lines[1:] {
			fields := strings.Fields(line)
			if len(fields) >= 2 && !slices.Contains(skip, fields[1]) {
				if !strings.Contains(line, "approve-token") || !strings.Contains(line, "env=dev") {
					return fmt.Errorf("the line lacks the token or the labels:\n%s", out)
				}
				name = fields[1]
				return nil
			}
		}
		return fmt.Errorf("no new cluster waiting:\n%s", out)
	})
	return name
}

// requestReasons are the reasons of the Ready conditions of the workspace's requests
// for the cluster named cluster.
func requestReasons(t *testing.T, hub *framework.Hub, cluster string) []string {
	t.Helper()
	list, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationRequests(workspace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var reasons []string
	for _, r := range list.Items {
		if r.Status.ClusterName != cluster && names.ClusterForClientID(r.Spec.ClientID) != cluster {
			continue
		}
		for _, c := range r.Status.Conditions {
			if c.Type == "Ready" {
				reasons = append(reasons, c.Reason)
			}
		}
	}
	return reasons
}

// assertNothingFor checks that the hub holds no Cluster, per-cluster namespace or
// place on the token for the cluster named cluster.
func assertNothingFor(t *testing.T, hub *framework.Hub, cluster string) {
	t.Helper()
	ctx := context.Background()
	if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(ctx, cluster, framework.Get); !apierrors.IsNotFound(err) {
		t.Errorf("Cluster %s: %v, want NotFound", cluster, err)
	}
	nss, err := hub.Client().CoreV1().Namespaces().List(ctx, metav1.ListOptions{LabelSelector: names.ClusterLabel + "=" + cluster})
	if err != nil || len(nss.Items) != 0 {
		t.Errorf("namespaces of Cluster %s: %v %v", cluster, nss, err)
	}
	token, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationTokens(workspace).Get(ctx, "approve-token", framework.Get)
	if err != nil || len(token.Status.RegisteredClients) != 0 {
		t.Errorf("token: %v, registeredClients %v", err, token.Status.RegisteredClients)
	}
}

// TestApprovalHoldsNewClustersForAnAdmin: with a token made by `hub token create
// --require-approval`, a new cluster's request waits (Ready Unknown,
// AwaitingApproval) with nothing created for it and no place taken on the token; the
// token holder cannot approve it; `hub cluster approve` lets it register; `hub
// cluster refuse` refuses another, which leaves nothing behind and stays refused
// when its agent asks again.
func TestApprovalHoldsNewClustersForAnAdmin(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	values := filepath.Join(t.TempDir(), "values.yaml")
	hubCommand(t, hub, "token", "create", "approve-token", "-n", workspace, "--require-approval", "--max-registrations", "5", "-o", values)
	if got := hub.MustKubectl("", "-n", workspace, "get", "clusterregistrationtokens.fleet.cattle.io", "approve-token", "-o", "jsonpath={.spec.requireApproval}"); got != "true" {
		t.Fatalf("spec.requireApproval = %q", got)
	}

	// A new cluster waits.
	approved := framework.StartControlPlane(t, "approved")
	framework.InstallAgent(t, approved, values, "--set-string", "labels.env=dev")
	agent := framework.StartAgent(t, approved)
	name := pendingCluster(t, hub)
	expectDoctor(t, hub, "approval", "the cluster waits for a hub admin's approval (token approve-token", name)
	if reasons := requestReasons(t, hub, name); strings.Join(reasons, ",") != "AwaitingApproval" {
		t.Fatalf("request reasons %v, want AwaitingApproval", reasons)
	}
	cols := hub.MustKubectl("", "-n", workspace, "get", "clusterregistrationrequests.fleet.cattle.io")
	if !strings.Contains(cols, "REASON") || !strings.Contains(cols, "AwaitingApproval") || !strings.Contains(cols, name) {
		t.Errorf("kubectl get clusterregistrationrequests:\n%s", cols)
	}
	assertNothingFor(t, hub, name)
	framework.Eventually(t, "the agent to say what the admin must do", timeout, func(context.Context) error {
		if log := agent.Log(); !strings.Contains(log, "hub cluster approve "+name+" -n "+workspace) {
			return fmt.Errorf("agent log:\n%s", agent.Log())
		}
		return nil
	})

	// The token holder may not approve its own request.
	v, err := framework.ReadValues(values)
	if err != nil {
		t.Fatal(err)
	}
	_, holder := hub.As(v.Token)
	requests, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationRequests(workspace).List(context.Background(), metav1.ListOptions{})
	if err != nil || len(requests.Items) != 1 {
		t.Fatalf("requests: %v %v", requests, err)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{names.ApprovalAnnotation: names.ApprovalApproved}}})
	_, err = holder.FleetV1alpha1().ClusterRegistrationRequests(workspace).Patch(context.Background(), requests.Items[0].Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if !apierrors.IsForbidden(err) {
		t.Fatalf("the token holder patching its request's approval: %v, want Forbidden", err)
	}
	if out, err := tryHub(t, hub, "cluster", "approve", "no-such-cluster"); err == nil || !strings.Contains(out, "no cluster named no-such-cluster is waiting for approval") {
		t.Errorf("hub cluster approve no-such-cluster: %v\n%s", err, out)
	}

	// Approved, it registers and turns Ready.
	if out := hubCommand(t, hub, "cluster", "approve", name); !strings.Contains(out, "Approved cluster "+workspace+"/"+name) {
		t.Errorf("hub cluster approve printed:\n%s", out)
	}
	if cred := waitRegistered(t, approved); cred.ClusterName != name {
		t.Fatalf("registered as %s, want %s", cred.ClusterName, name)
	}
	waitReady(t, hub, name)

	// Another is refused: nothing is left of it, and asking again is refused at once.
	refused := framework.StartControlPlane(t, "refused")
	framework.InstallAgent(t, refused, values, "--set-string", "labels.env=dev")
	refusedAgent := framework.StartAgent(t, refused)
	other := pendingCluster(t, hub, name)
	if out := hubCommand(t, hub, "cluster", "refuse", other, "-n", workspace); !strings.Contains(out, "Refused cluster "+workspace+"/"+other) {
		t.Errorf("hub cluster refuse printed:\n%s", out)
	}
	framework.Eventually(t, "the refused agent to log the refusal", timeout, func(context.Context) error {
		if log := refusedAgent.Log(); !strings.Contains(log, "RefusedByAdmin") {
			return fmt.Errorf("agent log:\n%s", refusedAgent.Log())
		}
		return nil
	})
	if _, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).Get(context.Background(), other, framework.Get); !apierrors.IsNotFound(err) {
		t.Errorf("Cluster %s of the refused cluster: %v, want NotFound", other, err)
	}
	refusedAgent.Kill()
	refusedAgent.Restart()
	framework.Eventually(t, "the agent's next request to be refused at once", timeout, func(context.Context) error {
		if reasons := requestReasons(t, hub, other); strings.Join(reasons, ",") != "RefusedByAdmin,RefusedByAdmin" {
			return fmt.Errorf("requests of %s: %v", other, reasons)
		}
		return nil
	})
	expectDoctor(t, hub, "registration", "was refused (RefusedByAdmin)", other)
	if lines, ok := preflight(t, refused, ""); ok || !strings.Contains(lines, "PREFLIGHT token: a hub admin refused this cluster's registration") {
		t.Errorf("preflight of the refused cluster: passed %v\n%s", ok, lines)
	}
	if out := hubCommand(t, hub, "cluster", "pending"); strings.Count(strings.TrimSpace(out), "\n") != 0 {
		t.Errorf("hub cluster pending after the answers:\n%s", out)
	}
	token, err := hub.Fleet().FleetV1alpha1().ClusterRegistrationTokens(workspace).Get(context.Background(), "approve-token", framework.Get)
	if err != nil || len(token.Status.RegisteredClients) != 1 || len(token.Status.RefusedClients) != 1 {
		t.Errorf("token: %v, registered %v, refused %v; want one each", err, token.Status.RegisteredClients, token.Status.RefusedClients)
	}
	nss, err := hub.Client().CoreV1().Namespaces().List(context.Background(), metav1.ListOptions{LabelSelector: names.ClusterLabel + "=" + other})
	if err != nil || len(nss.Items) != 0 {
		t.Errorf("namespaces of the refused cluster: %v %v", nss, err)
	}
}
