// Package simagent is a simulated downstream cluster's agent, for the benchmark and
// the chaos run: the real registration and check-in code of pkg/registration and
// pkg/agent against a real hub, with the downstream cluster (its kube-system
// namespace, fleet-agent ConfigMap and identity Secret) in memory. Instead of Helm it
// reports every BundleDeployment applied and Ready.
package simagent

import (
	"context"
	"encoding/json"
	"io"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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

// Agent is one simulated cluster's agent.
type Agent struct {
	// Downstream is the simulated cluster: it keeps the agent's identity across
	// restarts, as a real cluster's Secret does.
	Downstream registration.Downstream

	mu sync.Mutex
	// credentialed is when the agent last came to hold an identity.
	credentialed time.Time
	cred         *registration.Credential
	err          error
}

// New is the agent of a new simulated cluster whose agent ConfigMap gives it labels.
func New(labels map[string]string) *Agent {
	ns := names.SystemNamespace
	raw, _ := json.Marshal(labels)
	// The simple clientset: NewClientset's field management builds a REST mapper
	// on every create, which with a thousand agents in one process took a sixth of
	// its CPU from the machine under measurement.
	client := fake.NewSimpleClientset( //nolint:staticcheck // deliberately without field management
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kube-system", UID: uuid.NewUUID()}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names.AgentConfigMap, Namespace: ns},
			Data: map[string]string{"labels": string(raw)}},
	)
	return &Agent{Downstream: registration.Downstream{Client: client, Namespace: ns}}
}

// Credential is the identity the agent holds, nil before it registered.
func (a *Agent) Credential() *registration.Credential {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.cred
}

// Credentialed is when the agent last came to hold an identity, zero before.
func (a *Agent) Credentialed() time.Time {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.credentialed
}

// Err is the last registration error.
func (a *Agent) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.err
}

// Register runs the agent's registration with retries, as the agent does on every
// start (keeping the identity its cluster holds, if any), until it holds an identity
// or ctx ends.
func (a *Agent) Register(ctx context.Context, values registration.Values) {
	log := logrus.New()
	log.SetOutput(io.Discard)
	for delay := time.Second; ; delay = min(2*delay, 10*time.Second) {
		cred, err := registration.Register(ctx, a.Downstream, values, log)
		a.mu.Lock()
		if err == nil {
			a.cred, a.credentialed = cred, time.Now()
		} else {
			a.err = err
		}
		a.mu.Unlock()
		if err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// Run checks in (at once, then every interval) and reports the cluster's
// BundleDeployments Ready, until ctx ends. The agent must hold an identity.
func (a *Agent) Run(ctx context.Context, interval time.Duration, leases bool, version string) error {
	cred := a.Credential()
	cfg, _, err := a.Downstream.HubClient(ctx, *cred)
	if err != nil {
		return err
	}
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
	checkin := &agent.Checkin{Hub: hub, Credential: *cred, Namespace: a.Downstream.Namespace, Version: version, Log: log, KubernetesVersion: "v1.37.2"}
	if leases {
		checkin.Leases = hubKube.CoordinationV1()
	}
	go checkin.Run(ctx, interval)

	bds := hub.FleetV1alpha1().BundleDeployments(cred.DeploymentNamespace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return bds.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return bds.Watch(ctx, o)
		},
	}
	informer := cache.NewSharedIndexInformer(lw, &fleet.BundleDeployment{}, 0, cache.Indexers{})
	var report func(obj any)
	report = func(obj any) {
		bd, ok := obj.(*fleet.BundleDeployment)
		if !ok || bundlestate.Of(bd) == fleet.Ready {
			return
		}
		updated := bd.DeepCopy()
		updated.Status.AppliedDeploymentID = bd.Spec.DeploymentID
		updated.Status.Ready, updated.Status.NonModified = true, true
		conditions.Set(&updated.Status.Conditions, bundlestate.ConditionDeployed, corev1.ConditionTrue, "", "")
		conditions.Set(&updated.Status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
		_, err := bds.UpdateStatus(ctx, updated, metav1.UpdateOptions{})
		if err == nil || apierrors.IsConflict(err) || apierrors.IsNotFound(err) || ctx.Err() != nil {
			// A conflict means a newer version is on its way to this handler.
			return
		}
		// The hub did not take it (it is down, or busy): report again in a while,
		// the deployment as the cache then has it.
		time.AfterFunc(2*time.Second, func() {
			if latest, ok, _ := informer.GetStore().Get(bd); ok && ctx.Err() == nil {
				report(latest)
			}
		})
	}
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: report, UpdateFunc: func(_, obj any) { report(obj) }}); err != nil {
		return err
	}
	go informer.RunWithContext(ctx)
	return nil
}
