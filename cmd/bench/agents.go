package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla/flotilla/pkg/agent"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlestate"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// simulatedAgent is one downstream cluster's agent: the real registration and
// check-in code of pkg/registration and pkg/agent against the real hub, with the
// downstream cluster (its kube-system namespace, fleet-agent ConfigMap and identity
// Secret) in memory. Instead of Helm it reports every BundleDeployment applied and Ready.
type simulatedAgent struct {
	downstream registration.Downstream
	// credentialed is when the agent held its identity, zero until then.
	credentialed time.Time
	cred         *registration.Credential
	err          error
}

// bench labels every simulated cluster, for the Bundle to target them all.
const benchLabel = "flotilla.dev/bench"

func newSimulatedAgent() *simulatedAgent {
	ns := names.SystemNamespace
	// The simple clientset: NewClientset's field management builds a REST mapper
	// on every create, which with a thousand agents in this process took a sixth of
	// its CPU from the machine under measurement.
	client := fake.NewSimpleClientset( //nolint:staticcheck // deliberately without field management
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: uuid.NewUUID()}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.AgentConfigMap, Namespace: ns},
			Data: map[string]string{"labels": `{"` + benchLabel + `":"true"}`}},
	)
	return &simulatedAgent{downstream: registration.Downstream{Client: client, Namespace: ns}}
}

// register runs the agent's registration with retries, as the agent does, until it
// holds an identity or ctx ends.
func (a *simulatedAgent) register(ctx context.Context, values registration.Values) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
		cred, err := registration.Register(ctx, a.downstream, values, log)
		if err == nil {
			a.cred, a.credentialed = cred, time.Now()
			return
		}
		a.err = err
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// run checks in (at once, then every interval) and reports the cluster's
// BundleDeployments Ready, until ctx ends.
func (a *simulatedAgent) run(ctx context.Context, interval time.Duration, leases bool, version string) error {
	cfg := a.cred.ClientConfig(registration.NewTokenSource(a.cred.Token))
	cfg.QPS, cfg.Burst = 5, 10
	hub, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hubKube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	checkin := &agent.Checkin{Hub: hub, Credential: *a.cred, Namespace: a.downstream.Namespace, Version: version, Log: log, KubernetesVersion: "v1.37.2"}
	if leases {
		checkin.Leases = hubKube.CoordinationV1()
	}
	go checkin.Run(ctx, interval)

	bds := hub.FleetV1alpha1().BundleDeployments(a.cred.DeploymentNamespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return bds.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return bds.Watch(ctx, o)
		},
	}
	report := func(obj any) {
		bd, ok := obj.(*fleet.BundleDeployment)
		if !ok || bundlestate.Of(bd) == fleet.Ready {
			return
		}
		updated := bd.DeepCopy()
		updated.Status.AppliedDeploymentID = bd.Spec.DeploymentID
		updated.Status.Ready, updated.Status.NonModified = true, true
		conditions.Set(&updated.Status.Conditions, bundlestate.ConditionDeployed, corev1.ConditionTrue, "", "")
		conditions.Set(&updated.Status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
		// A conflict means a newer version is on its way to this handler.
		_, _ = bds.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
	}
	informer := cache.NewSharedIndexInformer(lw, &fleet.BundleDeployment{}, 0, cache.Indexers{})
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: report, UpdateFunc: func(_, obj any) { report(obj) }}); err != nil {
		return err
	}
	go informer.RunWithContext(ctx)
	return nil
}

// fleetOfAgents registers n simulated agents at once and runs them.
type fleetOfAgents struct {
	agents []*simulatedAgent
	mu     sync.Mutex
	done   int
}

func (f *fleetOfAgents) credentialedCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.done
}

// start registers every agent concurrently; each one that is credentialed starts
// checking in and reporting. It returns at once.
func (f *fleetOfAgents) start(ctx context.Context, values registration.Values, interval time.Duration, leases bool, errs chan<- error) {
	for _, a := range f.agents {
		go func() {
			a.register(ctx, values)
			if a.cred == nil {
				return
			}
			f.mu.Lock()
			f.done++
			f.mu.Unlock()
			if err := a.run(ctx, interval, leases, "bench"); err != nil {
				select {
				case errs <- fmt.Errorf("agent of %s: %w", a.cred.ClusterName, err):
				default:
				}
			}
		}()
	}
}
