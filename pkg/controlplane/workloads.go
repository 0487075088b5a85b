package controlplane

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
)

// SimulateWorkloads stands in for the deployment controller, the kubelets and the
// load balancer that a bare control plane does not have: every Deployment and
// StatefulSet reports its current generation rolled out, with all its replicas ready
// and available, as soon as its spec changes, and every Service of type LoadBalancer
// gets the address SimulatedLoadBalancerIP. Nothing runs. It is what "hub controlplane --simulate-workloads"
// turns on, so that Flotilla can be tried on one machine: the agent runs as a process
// and the Bundles' workloads count as Ready. It returns when ctx ends.
func SimulateWorkloads(ctx context.Context, client kubernetes.Interface) {
	factory := informers.NewSharedInformerFactory(client, 0)
	queue := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[workload]())
	defer queue.ShutDown()

	deployments := factory.Apps().V1().Deployments()
	statefulSets := factory.Apps().V1().StatefulSets()
	services := factory.Core().V1().Services()
	enqueue := func(kind string) cache.ResourceEventHandlerFuncs {
		add := func(obj any) {
			o, ok := obj.(metav1.Object)
			if ok && stale(obj) {
				queue.Add(workload{kind: kind, namespace: o.GetNamespace(), name: o.GetName()})
			}
		}
		return cache.ResourceEventHandlerFuncs{AddFunc: add, UpdateFunc: func(_, obj any) { add(obj) }}
	}
	if _, err := deployments.Informer().AddEventHandler(enqueue("Deployment")); err != nil {
		logrus.WithError(err).Error("Simulating workloads")
		return
	}
	if _, err := statefulSets.Informer().AddEventHandler(enqueue("StatefulSet")); err != nil {
		logrus.WithError(err).Error("Simulating workloads")
		return
	}
	if _, err := services.Informer().AddEventHandler(enqueue("Service")); err != nil {
		logrus.WithError(err).Error("Simulating workloads")
		return
	}
	factory.Start(ctx.Done())
	defer factory.Shutdown()

	go func() {
		<-ctx.Done()
		queue.ShutDown()
	}()
	for {
		w, shutdown := queue.Get()
		if shutdown {
			return
		}
		err := w.roll(ctx, client)
		switch {
		case err == nil || apierrors.IsNotFound(err):
			queue.Forget(w)
		default:
			logrus.WithError(err).WithField("workload", w.String()).Debug("Simulating workload status; retrying")
			queue.AddRateLimited(w)
		}
		queue.Done(w)
	}
}

type workload struct{ kind, namespace, name string }

func (w workload) String() string { return fmt.Sprintf("%s %s/%s", w.kind, w.namespace, w.name) }

// roll writes the rolled-out status of the workload's current generation.
func (w workload) roll(ctx context.Context, client kubernetes.Interface) error {
	switch w.kind {
	case "Deployment":
		d, err := client.AppsV1().Deployments(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil || !stale(d) {
			return err
		}
		d.Status = RolledOutDeploymentStatus(d, time.Now())
		_, err = client.AppsV1().Deployments(w.namespace).UpdateStatus(ctx, d, metav1.UpdateOptions{})
		return err
	case "Service":
		svc, err := client.CoreV1().Services(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil || !stale(svc) {
			return err
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: SimulatedLoadBalancerIP}}
		_, err = client.CoreV1().Services(w.namespace).UpdateStatus(ctx, svc, metav1.UpdateOptions{})
		return err
	default:
		s, err := client.AppsV1().StatefulSets(w.namespace).Get(ctx, w.name, metav1.GetOptions{})
		if err != nil || !stale(s) {
			return err
		}
		replicas := replicasOf(s.Spec.Replicas)
		s.Status = appsv1.StatefulSetStatus{
			ObservedGeneration: s.Generation, Replicas: replicas, ReadyReplicas: replicas, CurrentReplicas: replicas,
			UpdatedReplicas: replicas, AvailableReplicas: replicas,
			CurrentRevision: s.Status.UpdateRevision, UpdateRevision: s.Status.UpdateRevision,
		}
		_, err = client.AppsV1().StatefulSets(w.namespace).UpdateStatus(ctx, s, metav1.UpdateOptions{})
		return err
	}
}

// SimulatedLoadBalancerIP is the address simulated load balancers give Services (from
// TEST-NET-1, which is never routed).
const SimulatedLoadBalancerIP = "192.0.2.1"

// stale tells whether a workload's status is not yet about its current generation, or
// a load balancer Service has no address yet.
func stale(obj any) bool {
	switch o := obj.(type) {
	case *corev1.Service:
		return o.Spec.Type == corev1.ServiceTypeLoadBalancer && len(o.Status.LoadBalancer.Ingress) == 0
	case *appsv1.Deployment:
		return o.Status.ObservedGeneration != o.Generation
	case *appsv1.StatefulSet:
		return o.Status.ObservedGeneration != o.Generation
	}
	return false
}

// RolledOutDeploymentStatus is the status the deployment controller writes once every
// replica of d's current generation is available.
func RolledOutDeploymentStatus(d *appsv1.Deployment, now time.Time) appsv1.DeploymentStatus {
	replicas := replicasOf(d.Spec.Replicas)
	at := metav1.NewTime(now)
	return appsv1.DeploymentStatus{
		ObservedGeneration: d.Generation, Replicas: replicas, UpdatedReplicas: replicas, ReadyReplicas: replicas, AvailableReplicas: replicas,
		Conditions: []appsv1.DeploymentCondition{
			{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable", LastUpdateTime: at, LastTransitionTime: at},
			{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionTrue, Reason: "NewReplicaSetAvailable", LastUpdateTime: at, LastTransitionTime: at},
		},
	}
}

func replicasOf(spec *int32) int32 {
	if spec == nil {
		return 1
	}
	return *spec
}
