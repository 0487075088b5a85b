package framework

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/pkg/controlplane"
)

// StandInForAgentPod does for the downstream fleet-agent Deployment what the
// deployment controller and the kubelet would do once its Pod runs: test control
// planes have neither, and the agent runs as a process instead of a Pod. Until
// stopped is closed (nil: until the test ends), the Deployment's status reports its
// current generation rolled out and available, so readiness checks (and the agent
// bundle) see what they would see in a real cluster.
func StandInForAgentPod(t testing.TB, ds *Cluster, namespace string, stopped <-chan struct{}) {
	client := ds.Client()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		tick := time.NewTicker(500 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-stopped:
				return
			case <-tick.C:
			}
			d, err := client.AppsV1().Deployments(namespace).Get(ctx, "fleet-agent", metav1.GetOptions{})
			if err != nil || d.Status.ObservedGeneration == d.Generation {
				continue
			}
			d.Status = controlplane.RolledOutDeploymentStatus(d, time.Now())
			_, _ = client.AppsV1().Deployments(namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
	}()
}
