package controlplane

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/fake"
)

func TestSimulateWorkloadsRollsOutEachGeneration(t *testing.T) {
	three := int32(3)
	client := fake.NewClientset(
		&appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", Generation: 2}, Spec: appsv1.DeploymentSpec{Replicas: &three}},
		&appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "db", Generation: 1}},
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { SimulateWorkloads(ctx, client); close(done) }()
	defer func() { cancel(); <-done }()

	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("ns").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		s, err := client.AppsV1().StatefulSets("ns").Get(ctx, "db", metav1.GetOptions{})
		if err != nil {
			return false, err
		}
		return d.Status.ObservedGeneration == 2 && d.Status.AvailableReplicas == 3 &&
			s.Status.ObservedGeneration == 1 && s.Status.ReadyReplicas == 1, nil
	})
	if err != nil {
		t.Fatalf("the workloads were not reported rolled out: %v", err)
	}

	// A new generation is rolled out too.
	d, _ := client.AppsV1().Deployments("ns").Get(ctx, "web", metav1.GetOptions{})
	d.Generation = 3
	if _, err := client.AppsV1().Deployments("ns").Update(ctx, d, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		d, err := client.AppsV1().Deployments("ns").Get(ctx, "web", metav1.GetOptions{})
		return err == nil && d.Status.ObservedGeneration == 3, err
	})
	if err != nil {
		t.Fatalf("generation 3 was not reported rolled out: %v", err)
	}
}

func TestSimulateWorkloadsGivesLoadBalancersAnAddress(t *testing.T) {
	client := fake.NewClientset(
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "lb"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "internal"}, Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}},
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { SimulateWorkloads(ctx, client); close(done) }()
	defer func() { cancel(); <-done }()

	err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		s, err := client.CoreV1().Services("ns").Get(ctx, "lb", metav1.GetOptions{})
		return err == nil && len(s.Status.LoadBalancer.Ingress) == 1 && s.Status.LoadBalancer.Ingress[0].IP == SimulatedLoadBalancerIP, err
	})
	if err != nil {
		t.Fatalf("the LoadBalancer Service got no address: %v", err)
	}
	if s, _ := client.CoreV1().Services("ns").Get(ctx, "internal", metav1.GetOptions{}); len(s.Status.LoadBalancer.Ingress) != 0 {
		t.Errorf("a ClusterIP Service got %v", s.Status.LoadBalancer.Ingress)
	}
}
