package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/flotilla/flotilla/pkg/agentchart"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/controllers/agentbundle"
	"github.com/flotilla/flotilla/pkg/crds"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
)

// writeCostConcurrency is how many requests of a kind are in flight at once, as the
// hub's workers send them.
const writeCostConcurrency = 20

// writeCosts measures what one request of each kind a registration makes costs the
// API server: it runs a control plane alone (no hub), sends n requests of one kind at
// a time and divides the control plane's CPU seconds by n. It prints a table.
func writeCosts(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "flotilla-writecosts-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	hubBin, err := filepath.Abs(filepath.Join(o.bin, "hub"))
	if err != nil {
		return err
	}
	cp, _, admin, err := startControlPlane(ctx, dir, hubBin)
	if err != nil {
		return err
	}
	defer cp.stop()
	if err := crds.Apply(ctx, admin); err != nil {
		return err
	}
	admin.QPS, admin.Burst = 5000, 5000
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return err
	}
	fl, err := versioned.NewForConfig(admin)
	if err != nil {
		return err
	}
	protobuf := rest.CopyConfig(admin)
	protobuf.ContentType = runtime.ContentTypeProtobuf
	kubeProtobuf, err := kubernetes.NewForConfig(protobuf)
	if err != nil {
		return err
	}
	// The Leases as last written, for renewals by update.
	leases := make([]*coordinationv1.Lease, o.clusters)
	lease := func(i int) *coordinationv1.Lease {
		now := metav1.NewMicroTime(time.Now())
		return &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: names.AgentLease},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: ptr.To(fmt.Sprint("client-", i)), LeaseDurationSeconds: ptr.To(int32(120)), RenewTime: &now}}
	}
	chart, err := agentbundle.ChartResources()
	if err != nil {
		return err
	}
	const ws = "bench"
	agentBundle := func(i int) (*fleet.Bundle, error) {
		return agentbundle.Desired(&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cluster-", i), Namespace: ws, UID: types.UID(fmt.Sprint("uid-", i))},
			Spec: fleet.ClusterSpec{ClientID: fmt.Sprint("client-", i)}}, "s-0", agentchart.Hub{MaxBundleSize: content.DefaultMaxSize})
	}
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ws}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	ns := func(i int) string { return fmt.Sprint("cluster-ns-", i) }
	opts := metav1.CreateOptions{}
	checkin := func() []byte {
		return fmt.Appendf(nil, `{"status":{"agent":{"lastSeen":%q,"namespace":"cattle-fleet-system","readyNodes":1}}}`, time.Now().UTC().Format(time.RFC3339))
	}
	summary := []byte(`{"status":{"summary":{"desiredReady":1,"ready":1}}}`)
	kinds := []struct {
		what string
		op   func(i int) error
	}{
		{"POST configmaps (for comparison)", func(i int) error {
			_, err := kube.CoreV1().ConfigMaps(ws).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)}, Data: map[string]string{"a": "b"}}, opts)
			return err
		}},
		{"POST namespaces", func(i int) error {
			_, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns(i)}}, opts)
			return err
		}},
		{"POST serviceaccounts", func(i int) error {
			_, err := kube.CoreV1().ServiceAccounts(ns(i)).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "fleet-agent"}}, opts)
			return err
		}},
		{"POST serviceaccounts/token", func(i int) error {
			seconds := int64(24 * 3600)
			_, err := kube.CoreV1().ServiceAccounts(ns(i)).CreateToken(ctx, "fleet-agent", &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}, opts)
			return err
		}},
		{"POST secrets (a credential, 2 KB)", func(i int) error {
			_, err := kube.CoreV1().Secrets(ws).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("c-", i)}, Data: map[string][]byte{"token": []byte(strings.Repeat("t", 2000))}}, opts)
			return err
		}},
		{"GET secrets (404, from the watch cache)", func(i int) error {
			_, err := kube.CoreV1().Secrets(ws).Get(ctx, fmt.Sprint("missing-", i), metav1.GetOptions{ResourceVersion: "0"})
			if apierrors.IsNotFound(err) {
				return nil
			}
			return err
		}},
		{"POST clusterregistrationrequests", func(i int) error {
			_, err := fl.FleetV1alpha1().ClusterRegistrationRequests(ws).Create(ctx, &fleet.ClusterRegistrationRequest{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("request-", i)},
				Spec: fleet.ClusterRegistrationRequestSpec{ClientID: fmt.Sprint("client-", i), ClientRandom: strings.Repeat("r", 64)}}, opts)
			return err
		}},
		{"POST clusters", func(i int) error {
			_, err := fl.FleetV1alpha1().Clusters(ws).Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cluster-", i)}, Spec: fleet.ClusterSpec{ClientID: fmt.Sprint("client-", i)}}, opts)
			return err
		}},
		{"PATCH clusters/status (a check-in)", func(i int) error {
			_, err := fl.FleetV1alpha1().Clusters(ws).Patch(ctx, fmt.Sprint("cluster-", i), types.MergePatchType, checkin(), metav1.PatchOptions{}, "status")
			return err
		}},
		{"POST leases (an agent's first Lease renewal)", func(i int) error {
			var err error
			leases[i], err = kube.CoordinationV1().Leases(ns(i)).Create(ctx, lease(i), opts)
			return err
		}},
		{"PUT leases (a renewal, protobuf)", func(i int) error {
			renewed := leases[i].DeepCopy()
			renewed.Spec.RenewTime = ptr.To(metav1.NewMicroTime(time.Now()))
			_, err := kubeProtobuf.CoordinationV1().Leases(ns(i)).Update(ctx, renewed, metav1.UpdateOptions{})
			return err
		}},
		{"PATCH leases (a renewal, JSON merge patch)", func(i int) error {
			patch := fmt.Appendf(nil, `{"spec":{"renewTime":%q}}`, time.Now().UTC().Format(metav1.RFC3339Micro))
			_, err := kube.CoordinationV1().Leases(ns(i)).Patch(ctx, names.AgentLease, types.MergePatchType, patch, metav1.PatchOptions{})
			return err
		}},
		{"POST bundles (an agent bundle)", func(i int) error {
			b, err := agentBundle(i)
			if err == nil {
				_, err = fl.FleetV1alpha1().Bundles(ws).Create(ctx, b, opts)
			}
			return err
		}},
		{"PATCH bundles/status (an agent bundle)", func(i int) error {
			_, err := fl.FleetV1alpha1().Bundles(ws).Patch(ctx, names.AgentBundle(fmt.Sprint("cluster-", i)), types.MergePatchType, summary, metav1.PatchOptions{}, "status")
			return err
		}},
		{"POST bundles (the agent chart inline, as before)", func(i int) error {
			_, err := fl.FleetV1alpha1().Bundles(ws).Create(ctx, &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("inline-agent-", i)}, Spec: fleet.BundleSpec{Resources: chart}}, opts)
			return err
		}},
		{"PATCH bundles/status (the agent chart inline)", func(i int) error {
			_, err := fl.FleetV1alpha1().Bundles(ws).Patch(ctx, fmt.Sprint("inline-agent-", i), types.MergePatchType, summary, metav1.PatchOptions{}, "status")
			return err
		}},
		{"POST bundles (one small resource)", func(i int) error {
			_, err := fl.FleetV1alpha1().Bundles(ws).Create(ctx, &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("small-", i)}, Spec: fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "a: b\n"}}}}, opts)
			return err
		}},
		{"PATCH bundles/status (small)", func(i int) error {
			_, err := fl.FleetV1alpha1().Bundles(ws).Patch(ctx, fmt.Sprint("small-", i), types.MergePatchType, summary, metav1.PatchOptions{}, "status")
			return err
		}},
		{"POST bundledeployments", func(i int) error {
			_, err := fl.FleetV1alpha1().BundleDeployments(ns(i)).Create(ctx, &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "fleet-agent"}, Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-0:0"}}, opts)
			return err
		}},
	}

	idle, err := cpuRate(cp, 3*time.Second)
	if err != nil {
		return err
	}
	fmt.Printf("API server CPU per request, %d requests of each kind, %d at a time (idle: %.3f cores)\n", o.clusters, writeCostConcurrency, idle)
	for _, k := range kinds {
		perRequest, failed, err := measure(cp, o.clusters, idle, k.op)
		if err != nil {
			return err
		}
		fmt.Printf("  %-48s %5.2f ms", k.what, perRequest.Seconds()*1000)
		if failed > 0 {
			fmt.Printf("  (%d failed)", failed)
		}
		fmt.Println()
	}
	return nil
}

// cpuRate is the CPU cores p uses over d.
func cpuRate(p *process, d time.Duration) (float64, error) {
	before, err := p.usage()
	if err != nil {
		return 0, err
	}
	time.Sleep(d)
	after, err := p.usage()
	if err != nil {
		return 0, err
	}
	return (after.CPUSeconds - before.CPUSeconds) / d.Seconds(), nil
}

// settle is how long after the last request the control plane's CPU is still counted:
// the watch fan-out and etcd's work finish after the response.
const settle = 2 * time.Second

// measure runs op n times, writeCostConcurrency at once, and returns the control
// plane's CPU per call, less its idle use.
func measure(cp *process, n int, idle float64, op func(i int) error) (time.Duration, int64, error) {
	before, err := cp.usage()
	if err != nil {
		return 0, 0, err
	}
	start := time.Now()
	var failed atomic.Int64
	workqueue.ParallelizeUntil(context.Background(), writeCostConcurrency, n, func(i int) {
		if err := op(i); err != nil && failed.Add(1) == 1 {
			fmt.Fprintln(os.Stderr, "bench:", err)
		}
	})
	time.Sleep(settle)
	after, err := cp.usage()
	if err != nil {
		return 0, 0, err
	}
	used := after.CPUSeconds - before.CPUSeconds - idle*time.Since(start).Seconds()
	return time.Duration(used / float64(n) * float64(time.Second)), failed.Load(), nil
}
