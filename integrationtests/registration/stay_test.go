package registration

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/pkg/registration"
)

// TestAnAgentThatCannotRegisterAgainStaysWithItsHub: a registered agent given a
// bootstrap Secret it cannot register with (a hub nothing answers at, as a move to
// an unreachable hub would be) carries on with the identity it has: it says so, and
// keeps checking in with its hub, instead of leaving the cluster stranded.
func TestAnAgentThatCannotRegisterAgainStaysWithItsHub(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "staying")
	framework.InstallAgent(t, ds, hub.CreateToken(workspace, "first", ""), "--set", "checkinInterval=1s")
	agent := framework.StartAgent(t, ds)
	name := waitRegistered(t, ds).ClusterName
	cluster := waitReady(t, hub, name)

	values, err := framework.ReadValues(hub.CreateToken(workspace, "elsewhere", ""))
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	values.APIServerURL = "https://" + l.Addr().String()
	l.Close()
	bootstrap := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "fleet-agent-bootstrap"}, StringData: map[string]string{
		registration.KeyToken: values.Token, registration.KeyTokenName: values.TokenName, registration.KeyAPIServerURL: values.APIServerURL,
		registration.KeyAPIServerCA: values.APIServerCA, registration.KeyClusterNamespace: values.ClusterNamespace,
		registration.KeySystemRegistrationNamespace: values.SystemRegistrationNamespace,
	}}
	if _, err := ds.Client().CoreV1().Secrets("cattle-fleet-system").Create(ctx, bootstrap, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	framework.Eventually(t, "the agent to say it carries on with its identity", timeout, func(context.Context) error {
		if !strings.Contains(agent.Log(), "carrying on with the identity the agent has") {
			return fmt.Errorf("agent log:\n%s", agent.Log())
		}
		return nil
	})
	since := time.Now()
	framework.Eventually(t, "the agent to keep renewing its heartbeat with its hub", timeout, func(ctx context.Context) error {
		lease, err := hub.Client().CoordinationV1().Leases(cluster.Status.Namespace).Get(ctx, "fleet-agent", framework.Get)
		if err != nil {
			return err
		}
		if lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(since.Add(time.Second)) {
			return fmt.Errorf("lease renewed at %v, want after %v", lease.Spec.RenewTime, since)
		}
		return nil
	})
	waitReady(t, hub, name)
	if cred := framework.Identity(t, ds); cred.ClusterName != name {
		t.Errorf("identity of %s, want %s", cred.ClusterName, name)
	}
}
