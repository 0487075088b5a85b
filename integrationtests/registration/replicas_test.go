package registration

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/pkg/names"
)

// TestKillingTheLeaderDuringRegistrations runs two hub replicas against one API
// server and kill -9s the leader while twenty agents register: the other replica
// takes over and every cluster ends Ready, registered once.
func TestKillingTheLeaderDuringRegistrations(t *testing.T) {
	t.Parallel()
	const n = 20
	host := framework.StartControlPlane(t, "hub-host")
	// A shorter Lease than the 15 s default, as a user who wants a quicker takeover sets
	// it; the renew deadline leaves the survivor room for an API server slowed by the
	// other tests running beside this one (with 4 s it once lost its Lease, and so its
	// controllers, while twenty registrations and another package's tests ran).
	election := []string{"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=8s", "--leader-elect-retry-period=1s",
		// A request the killed leader answered and its agent picked up may be
		// answered again by the next leader, with nobody left to read it: such an
		// answer goes with its request after the retention.
		"--request-retention=20s"}
	first := framework.StartHubOn(t, host, election...)
	second := framework.StartHubOn(t, host, election...)
	replicas := []*framework.Hub{first, second}
	leader := func() int {
		for i, h := range replicas {
			if strings.Contains(h.Process.Log(), "Became the leader") {
				return i
			}
		}
		return -1
	}
	framework.Eventually(t, "one replica to lead", time.Minute, func(context.Context) error {
		if leader() < 0 {
			return fmt.Errorf("no leader yet")
		}
		return nil
	})
	lead := leader()
	values, err := framework.ReadValues(first.CreateToken(workspace, "new-token", ""))
	if err != nil {
		t.Fatal(err)
	}
	ds := framework.StartControlPlane(t, "downstream")
	framework.StartAgentsSharingACluster(t, ds, values, n, nil)
	// Kill the leader once the first clusters exist, with registrations under way.
	framework.Eventually(t, "the first Clusters", time.Minute, func(ctx context.Context) error {
		list, err := host.Fleet().FleetV1alpha1().Clusters(workspace).List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) == 0 {
			return fmt.Errorf("none yet (%v)", err)
		}
		return nil
	})
	killed := time.Now()
	replicas[lead].Process.Kill()
	other := replicas[1-lead]
	framework.Eventually(t, "the other replica to take over", time.Minute, func(context.Context) error {
		if !strings.Contains(other.Process.Log(), "Became the leader") {
			return fmt.Errorf("not leading yet")
		}
		return nil
	})
	t.Logf("the other replica led %s after kill -9 (Lease duration 10 s)", time.Since(killed).Round(100*time.Millisecond))

	framework.Eventually(t, "twenty Ready Clusters", 3*time.Minute, func(ctx context.Context) error {
		list, err := host.Fleet().FleetV1alpha1().Clusters(workspace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		ready := 0
		for i := range list.Items {
			for _, c := range list.Items[i].Status.Conditions {
				if c.Type == "Ready" && c.Status == "True" {
					ready++
				}
			}
		}
		if len(list.Items) != n || ready != n {
			return fmt.Errorf("%d Clusters, %d Ready", len(list.Items), ready)
		}
		return nil
	})
	// Nothing twice: one Cluster per clientID, one identity namespace per Cluster;
	// and no credential Secret left once each agent has read its own (or the
	// retention has passed for one answered twice).
	list, err := host.Fleet().FleetV1alpha1().Clusters(workspace).List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clientIDs := map[string]int{}
	for _, c := range list.Items {
		clientIDs[c.Spec.ClientID]++
	}
	for id, count := range clientIDs {
		if count != 1 {
			t.Errorf("clientID %s has %d Clusters", id, count)
		}
	}
	framework.Eventually(t, "every credential Secret deleted, by its agent or after the retention", timeout, func(ctx context.Context) error {
		secrets, err := host.Client().CoreV1().Secrets(names.RegistrationNamespace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		var left []string
		for _, s := range secrets.Items {
			left = append(left, s.Name+" of request "+s.Labels[names.RequestLabel])
		}
		if len(left) > 0 {
			return fmt.Errorf("%d credential Secrets left: %v", len(left), left)
		}
		return nil
	})
}
