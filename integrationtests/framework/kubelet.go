package framework

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
			replicas := int32(1)
			if d.Spec.Replicas != nil {
				replicas = *d.Spec.Replicas
			}
			now := metav1.Now()
			d.Status = appsv1.DeploymentStatus{
				ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
				Conditions: []appsv1.DeploymentCondition{
					{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: now, LastTransitionTime: now},
					{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: now, LastTransitionTime: now},
				},
			}
			_, _ = client.AppsV1().Deployments(namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		}
	}()
}
