// Command bench measures a hub at fleet scale: it starts a control plane ("hub
// controlplane") and a hub against it ("hub --kubeconfig", so that the hub's own CPU
// and memory are measured apart from the API server's), creates a registration token,
// registers N simulated agents at once (the real registration and check-in code, with
// in-memory downstream clusters), then deploys a Bundle to all N clusters. It prints a
// table and writes the numbers as JSON.
//
//	make bench CLUSTERS=1000
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/metadata"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"sigs.k8s.io/yaml"

	"github.com/flotilla/flotilla/internal/freeport"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlestate"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/hubctl"
	"github.com/flotilla/flotilla/pkg/kubeconfig"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

const workspace = "bench"

type options struct {
	clusters        int
	bin             string
	out             string
	timeout         time.Duration
	checkinInterval time.Duration
	agentLeases     bool
	idle            time.Duration
	keep            bool
	profileDir      string
	hubArgs         stringList
}

type stringList []string

func (s *stringList) String() string     { return fmt.Sprint(*s) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

func main() {
	var o options
	flag.IntVar(&o.clusters, "clusters", 100, "simulated clusters registering at once")
	flag.StringVar(&o.bin, "bin", "bin", "directory of the hub binary")
	flag.StringVar(&o.out, "out", "", "JSON report file (default bench-results/bench-<clusters>.json)")
	flag.DurationVar(&o.timeout, "timeout", 15*time.Minute, "give up after this long")
	flag.DurationVar(&o.checkinInterval, "checkin-interval", 30*time.Second, "how often each simulated agent checks in (the agent's default)")
	flag.BoolVar(&o.agentLeases, "agent-leases", true, "simulated agents renew a Lease between status reports, as the agent does; false makes each check-in a Cluster status patch, as agents before Leases did")
	flag.DurationVar(&o.idle, "idle", 0, "after the Bundle, measure the fleet at rest for this long: the hub's and the control plane's CPU and the API writes while the agents only check in")
	flag.BoolVar(&o.keep, "keep", false, "keep the data directory (logs, etcd) after the run")
	flag.StringVar(&o.profileDir, "profile", "", "write CPU profiles of the hub, the control plane and the simulated agents (this process), taken during the registrations, and the hub's heap profile once all are Ready, to this directory")
	flag.Var(&o.hubArgs, "hub-arg", "extra flag for the hub (repeat), e.g. --hub-arg=--workers=50")
	flood := flag.Bool("request-flood", false, "instead: one token holder sends --clusters requests to a token that allows one cluster; print the hub's memory before, at peak and after the refused requests are deleted")
	var so soakOptions
	flag.DurationVar(&so.duration, "soak", 0, "instead: a soak of this long (e.g. 30m): the agents churn (go offline for 30 s to 3 min, lose their token and register again) and the Bundle changes every minute; the hub's memory and goroutines and the control plane's objects are sampled, and must not grow from warm-up to the end by more than --soak-growth")
	flag.DurationVar(&so.warmUp, "soak-warm-up", 5*time.Minute, "the soak's warm-up: growth is measured from the first sample after it")
	flag.DurationVar(&so.every, "soak-sample", 30*time.Second, "how often the soak samples")
	flag.Float64Var(&so.growth, "soak-growth", 0.25, "how much (a fraction) the hub's memory and goroutines and the control plane's objects may grow from warm-up to the end of a soak")
	flag.Uint64Var(&so.seed, "soak-seed", uint64(time.Now().UnixNano()), "seed of the soak's churn")
	outageFor := flag.Duration("outage", 0, "instead: register the agents, then kill -9 the hub and its control plane, keep them down this long, start them again, and measure the API server's requests per second while the agents reconnect")
	costs := flag.Bool("write-costs", false, "instead: measure the API server CPU of one request of each kind a registration makes, --clusters of each, against a control plane alone")
	flag.Parse()
	if o.idle < 0 {
		fmt.Fprintln(os.Stderr, "bench: --idle must not be negative")
		os.Exit(2)
	}
	if o.clusters < 1 {
		fmt.Fprintln(os.Stderr, "bench: --clusters must be at least 1")
		os.Exit(2)
	}
	logrus.SetOutput(io.Discard) // the packages' logs; the report goes to stdout
	if *flood {
		if err := requestFlood(o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *outageFor > 0 {
		if err := outage(o, *outageFor); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if so.duration > 0 {
		if err := soak(o, so); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if *costs {
		if err := writeCosts(o); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(1)
		}
		return
	}
	if o.out == "" {
		o.out = filepath.Join("bench-results", fmt.Sprintf("bench-%d.json", o.clusters))
	}
	r, err := run(o)
	if r != nil {
		r.print(os.Stdout)
		if werr := r.write(o.out); werr != nil {
			fmt.Fprintln(os.Stderr, "bench:", werr)
		} else {
			fmt.Printf("\nJSON report: %s\n", o.out)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// dataDir makes the run's data directory; cleanup removes it unless --keep, which
// prints where it is.
func dataDir(o options, prefix string) (dir string, cleanup func(), err error) {
	dir, err = os.MkdirTemp("", prefix)
	if err != nil {
		return "", nil, err
	}
	if o.keep {
		fmt.Printf("data and logs in %s\n", dir)
		return dir, func() {}, nil
	}
	return dir, func() { os.RemoveAll(dir) }, nil
}

// startControlPlane runs `hub controlplane` like the hub's embedded control plane (it
// authorizes cluster identities itself, the default, and runs no Pods) with data under
// dir, and returns once its API answers, with its admin kubeconfig's path and
// configuration.
func startControlPlane(ctx context.Context, dir, hubBin string, extraArgs ...string) (*process, string, *rest.Config, error) {
	port, err := freeport.Pick()
	if err != nil {
		return nil, "", nil, err
	}
	args := append([]string{"controlplane", "--data-dir", filepath.Join(dir, "cp"), "--bind-address", "127.0.0.1", "--secure-port", strconv.Itoa(port), "--workloads=false"}, extraArgs...)
	cp, err := startProcess("control plane", filepath.Join(dir, "controlplane.log"), hubBin, args...)
	if err != nil {
		return nil, "", nil, err
	}
	adminPath := filepath.Join(dir, "cp", "admin.kubeconfig")
	admin, err := func() (*rest.Config, error) {
		if err := waitFile(ctx, adminPath, cp); err != nil {
			return nil, err
		}
		admin, err := kubeconfig.Load(adminPath)
		if err != nil {
			return nil, err
		}
		kube, err := kubernetes.NewForConfig(admin)
		if err != nil {
			return nil, err
		}
		return admin, waitAPI(ctx, kube, cp)
	}()
	if err != nil {
		cp.stop()
		return nil, "", nil, err
	}
	return cp, adminPath, admin, nil
}

func run(o options) (*report, error) {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	dir, cleanup, err := dataDir(o, "flotilla-bench-")
	if err != nil {
		return nil, err
	}
	defer cleanup()
	f, err := startFixture(ctx, o, dir)
	if err != nil {
		return nil, err
	}
	defer f.cp.stop()
	defer f.hub.stop()
	cp, hub, kube, client, meta, values, metricsPort := f.cp, f.hub, f.kube, f.client, f.meta, f.values, f.metricsPort

	r := &report{Clusters: o.clusters, Date: time.Now().UTC().Format(time.RFC3339)}
	defer func() {
		if u, err := hub.usage(); err == nil {
			r.Hub = u
		}
		if u, err := cp.usage(); err == nil {
			r.ControlPlane = u
		}
	}()

	// The simulated agents and the benchmark's own watches stop before the hub and
	// the control plane do (deferred calls run last first), so that no watch ends
	// with an error when the API server goes away.
	clientsCtx, stopClients := context.WithCancel(ctx)
	defer stopClients()

	// Registration.
	readyAt := watchClusters(clientsCtx, client)
	requestsBefore, err := apiRequests(ctx, kube)
	if err != nil {
		return r, err
	}
	objectsBefore, err := countObjects(ctx, meta)
	if err != nil {
		return r, err
	}
	cpuBefore, _ := hub.usage()
	cpCPUBefore, _ := cp.usage()
	agents := &fleetOfAgents{}
	for range o.clusters {
		agents.agents = append(agents.agents, newSimulatedAgent())
	}
	errs := make(chan error, 1)
	start := time.Now()
	agents.start(clientsCtx, values, o.checkinInterval, o.agentLeases, errs)
	if o.profileDir != "" {
		go profile(ctx, o.profileDir, "", kube, fmt.Sprintf("http://127.0.0.1:%d", metricsPort))
	}

	var credentialedAll, readyAll time.Duration
	var requestsCredentialed requestCounts
	// Checked every 100 ms, shown every second.
	progress := time.NewTicker(100 * time.Millisecond)
	defer progress.Stop()
	show := func(format string, args ...any) {
		if time.Now().UnixMilli()/100%10 == 0 {
			fmt.Fprintf(os.Stderr, format, args...)
		}
	}
	for credentialedAll == 0 || readyAll == 0 {
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("timed out: %d of %d credentialed, %d Ready (last agent error: %v)", agents.credentialedCount(), o.clusters, readyAt.count(), lastError(agents))
		case err := <-errs:
			return r, err
		case <-progress.C:
		}
		n, ready := agents.credentialedCount(), readyAt.count()
		show("\r%5.1fs  credentialed %d/%d  Ready %d/%d   ", time.Since(start).Seconds(), n, o.clusters, ready, o.clusters)
		if n == o.clusters && credentialedAll == 0 {
			credentialedAll = latest(agents, start)
			if requestsCredentialed, err = apiRequests(ctx, kube); err != nil {
				return r, err
			}
		}
		if ready >= o.clusters && readyAll == 0 {
			readyAll = readyAt.latest().Sub(start)
		}
	}
	fmt.Fprintln(os.Stderr)
	if o.profileDir != "" {
		heapProfile(o.profileDir, fmt.Sprintf("http://127.0.0.1:%d", metricsPort))
	}
	requestsReady, err := apiRequests(ctx, kube)
	if err != nil {
		return r, err
	}
	objectsAfter, err := countObjects(ctx, meta)
	if err != nil {
		return r, err
	}
	cpuAfter, _ := hub.usage()
	cpCPUAfter, _ := cp.usage()
	r.Registration = registrationReport{
		CredentialedAllSeconds: credentialedAll.Seconds(),
		ReadyAllSeconds:        readyAll.Seconds(),
		PerCluster:             percentiles(credentialedLatencies(agents, start)),
		PerClusterReady:        percentiles(readyAt.latencies(start)),
		WritesPerRegistration:  perCluster(diff(requestsCredentialed.writes, requestsBefore.writes), o.clusters),
		WritesUntilReady:       perCluster(diff(requestsReady.writes, requestsBefore.writes), o.clusters),
		ReadsPerRegistration:   perCluster(diff(requestsCredentialed.reads, requestsBefore.reads), o.clusters),
		ObjectsPerRegistration: perCluster(diff(objectsAfter, objectsBefore), o.clusters),
		HubCPUSeconds:          cpuAfter.CPUSeconds - cpuBefore.CPUSeconds,
		ControlPlaneCPUSeconds: cpCPUAfter.CPUSeconds - cpCPUBefore.CPUSeconds,
	}

	// A Bundle to every cluster.
	bundleStart := time.Now()
	bds := watchBundleDeployments(clientsCtx, client, "bench")
	if _, err := client.FleetV1alpha1().Bundles(workspace).Create(ctx, benchBundle(), metav1.CreateOptions{}); err != nil {
		return r, err
	}
	var written, ready time.Duration
	for written == 0 || ready == 0 {
		select {
		case <-ctx.Done():
			return r, fmt.Errorf("timed out: %d of %d BundleDeployments written, %d Ready", bds.written(), o.clusters, bds.ready())
		case <-progress.C:
		}
		w, rd := bds.written(), bds.ready()
		show("\r%5.1fs  BundleDeployments written %d/%d  Ready %d/%d   ", time.Since(bundleStart).Seconds(), w, o.clusters, rd, o.clusters)
		if w >= o.clusters && written == 0 {
			written = bds.lastWritten.Sub(bundleStart)
		}
		if rd >= o.clusters && ready == 0 {
			ready = bds.lastReady.Sub(bundleStart)
		}
	}
	fmt.Fprintln(os.Stderr)
	cpuBundle, _ := hub.usage()
	r.Bundle = bundleReport{WrittenAllSeconds: written.Seconds(), ReadyAllSeconds: ready.Seconds(), HubCPUSeconds: cpuBundle.CPUSeconds - cpuAfter.CPUSeconds}
	if o.idle > 0 {
		profiler := func() {}
		if o.profileDir != "" {
			// Near the end of the rest, when the fleet is steadiest.
			profiler = func() { profile(ctx, o.profileDir, "idle-", kube, fmt.Sprintf("http://127.0.0.1:%d", metricsPort)) }
		}
		r.Idle, err = measureIdle(ctx, o.idle, kube, hub, cp, profiler)
	}
	return r, err
}

// measureIdle measures the fleet at rest for d: every cluster Ready, the agents only
// checking in. Rates are per minute. It starts profiler 18 s before the end (a
// profile starts a second after it is asked for and takes 15 s).
func measureIdle(ctx context.Context, d time.Duration, kube kubernetes.Interface, hub, cp *process, profiler func()) (*idleReport, error) {
	before, err := apiRequests(ctx, kube)
	if err != nil {
		return nil, err
	}
	hubBefore, _ := hub.usage()
	cpBefore, _ := cp.usage()
	start := time.Now()
	profileAt := time.AfterFunc(max(d-18*time.Second, 0), profiler)
	defer profileAt.Stop()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for time.Since(start) < d {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("timed out at rest after %s", time.Since(start).Round(time.Second))
		case <-tick.C:
		}
		fmt.Fprintf(os.Stderr, "\r%5.0fs  at rest, of %s   ", time.Since(start).Seconds(), d)
	}
	fmt.Fprintln(os.Stderr)
	after, err := apiRequests(ctx, kube)
	if err != nil {
		return nil, err
	}
	hubAfter, _ := hub.usage()
	cpAfter, _ := cp.usage()
	minutes := time.Since(start).Minutes()
	writes := diff(after.writes, before.writes)
	for k, v := range writes {
		writes[k] = v / minutes
	}
	return &idleReport{
		Seconds:                         time.Since(start).Seconds(),
		WritesPerMinute:                 writes,
		HubCPUSecondsPerMinute:          (hubAfter.CPUSeconds - hubBefore.CPUSeconds) / minutes,
		ControlPlaneCPUSecondsPerMinute: (cpAfter.CPUSeconds - cpBefore.CPUSeconds) / minutes,
	}, nil
}

func lastError(f *fleetOfAgents) error {
	for _, a := range f.agents {
		if a.Credential() == nil && a.Err() != nil {
			return a.Err()
		}
	}
	return nil
}

func latest(f *fleetOfAgents, start time.Time) time.Duration {
	var last time.Time
	for _, a := range f.agents {
		if at := a.Credentialed(); at.After(last) {
			last = at
		}
	}
	return last.Sub(start)
}

func credentialedLatencies(f *fleetOfAgents, start time.Time) []time.Duration {
	var out []time.Duration
	for _, a := range f.agents {
		out = append(out, a.Credentialed().Sub(start))
	}
	return out
}

// clusterTimes records when each Cluster of the workspace was first Ready.
type clusterTimes struct {
	mu    sync.Mutex
	ready map[string]time.Time
}

func watchClusters(ctx context.Context, client versioned.Interface) *clusterTimes {
	t := &clusterTimes{ready: map[string]time.Time{}}
	clusters := client.FleetV1alpha1().Clusters(workspace)
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) { return clusters.List(ctx, o) },
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			return clusters.Watch(ctx, o)
		},
	}
	seen := func(obj any) {
		c, ok := obj.(*fleet.Cluster)
		if !ok {
			return
		}
		if cond := conditions.Get(c.Status.Conditions, fleet.ConditionReady); cond == nil || cond.Status != corev1.ConditionTrue {
			return
		}
		t.mu.Lock()
		if _, ok := t.ready[c.Name]; !ok {
			t.ready[c.Name] = time.Now()
		}
		t.mu.Unlock()
	}
	informer := cache.NewSharedIndexInformer(lw, &fleet.Cluster{}, 0, cache.Indexers{})
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }})
	go informer.RunWithContext(ctx)
	return t
}

func (t *clusterTimes) count() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.ready)
}

func (t *clusterTimes) latest() time.Time {
	t.mu.Lock()
	defer t.mu.Unlock()
	var last time.Time
	for _, at := range t.ready {
		if at.After(last) {
			last = at
		}
	}
	return last
}

func (t *clusterTimes) latencies(start time.Time) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []time.Duration
	for _, at := range t.ready {
		out = append(out, at.Sub(start))
	}
	return out
}

// bundleTimes follows the BundleDeployments of one Bundle.
type bundleTimes struct {
	mu                     sync.Mutex
	seen, readySet         map[string]bool
	lastWritten, lastReady time.Time
}

func watchBundleDeployments(ctx context.Context, client versioned.Interface, bundle string) *bundleTimes {
	b := &bundleTimes{seen: map[string]bool{}, readySet: map[string]bool{}}
	bds := client.FleetV1alpha1().BundleDeployments(metav1.NamespaceAll)
	selector := names.BundleNameLabel + "=" + bundle
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.LabelSelector = selector
			return bds.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.LabelSelector = selector
			return bds.Watch(ctx, o)
		},
	}
	seen := func(obj any) {
		bd, ok := obj.(*fleet.BundleDeployment)
		if !ok {
			return
		}
		key := bd.Namespace + "/" + bd.Name
		now := time.Now()
		b.mu.Lock()
		defer b.mu.Unlock()
		if !b.seen[key] {
			b.seen[key], b.lastWritten = true, now
		}
		if !b.readySet[key] && bundlestate.Of(bd) == fleet.Ready {
			b.readySet[key], b.lastReady = true, now
		}
	}
	informer := cache.NewSharedIndexInformer(lw, &fleet.BundleDeployment{}, 0, cache.Indexers{})
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{AddFunc: seen, UpdateFunc: func(_, obj any) { seen(obj) }})
	go informer.RunWithContext(ctx)
	return b
}

func (b *bundleTimes) written() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.seen)
}

func (b *bundleTimes) ready() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.readySet)
}

func benchBundle() *fleet.Bundle {
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "bench", Namespace: workspace},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "bench"},
			Resources:               []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bench\ndata:\n  hello: world\n"}},
			Targets:                 []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{benchLabel: "true"}}}},
		},
	}
}

// percentiles of the latencies, in seconds.
func percentiles(ds []time.Duration) map[string]float64 {
	if len(ds) == 0 {
		return nil
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	at := func(p float64) float64 {
		i := int(p*float64(len(ds))+0.5) - 1
		i = max(0, min(i, len(ds)-1))
		return ds[i].Seconds()
	}
	return map[string]float64{"p50": at(0.50), "p95": at(0.95), "p99": at(0.99), "max": ds[len(ds)-1].Seconds()}
}

func diff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		if d := v - before[k]; d != 0 {
			out[k] = d
		}
	}
	return out
}

func perCluster(counts map[string]float64, n int) map[string]float64 {
	out := map[string]float64{}
	for k, v := range counts {
		out[k] = v / float64(n)
	}
	return out
}

func writeJSON(path string, v any) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}

var errNoMetrics = errors.New("the API server's /metrics has no apiserver_request_total")

// fixture is a control plane, a hub run against it with --kubeconfig, and a
// registration token "bench" in the workspace, with clients and the token's values.
type fixture struct {
	cp, hub     *process
	admin       *rest.Config
	kube        kubernetes.Interface
	client      versioned.Interface
	meta        metadata.Interface
	values      registration.Values
	metricsPort int
}

// startFixture starts a fixture with data under dir. On error, what it started is
// stopped; otherwise the caller stops the hub and the control plane.
func startFixture(ctx context.Context, o options, dir string) (f *fixture, err error) {
	f = &fixture{}
	defer func() {
		if err != nil {
			f.hub.stop()
			f.cp.stop()
		}
	}()
	hubBin, err := filepath.Abs(filepath.Join(o.bin, "hub"))
	if err != nil {
		return nil, err
	}

	// The control plane, then the hub against it.
	var cpArgs []string
	if o.profileDir != "" {
		cpArgs = append(cpArgs, "--profiling")
		o.hubArgs = append(o.hubArgs, "--profiling")
	}
	cp, adminPath, admin, err := startControlPlane(ctx, dir, hubBin, cpArgs...)
	if err != nil {
		return nil, err
	}
	f.cp, f.admin = cp, admin
	admin.QPS, admin.Burst = 200, 400
	kube, err := kubernetes.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	healthPort, err := freeport.Pick()
	if err != nil {
		return nil, err
	}
	metricsPort, err := freeport.Pick()
	if err != nil {
		return nil, err
	}
	pkiDir := filepath.Join(dir, "cp", "pki")
	args := append([]string{"--kubeconfig", adminPath,
		// The hub signs cluster identities with the control plane's identity CA, as
		// the embedded hub does.
		"--identity-ca-cert-file", filepath.Join(pkiDir, "identity-ca.crt"), "--identity-ca-key-file", filepath.Join(pkiDir, "identity-ca.key"),
		"--health-probe-bind-address", "127.0.0.1:" + strconv.Itoa(healthPort),
		"--metrics-bind-address", "127.0.0.1:" + strconv.Itoa(metricsPort)}, o.hubArgs...)
	hub, err := startProcess("hub", filepath.Join(dir, "hub.log"), hubBin, args...)
	if err != nil {
		return nil, err
	}
	f.hub = hub
	if err := waitHTTP(ctx, fmt.Sprintf("http://127.0.0.1:%d/readyz", healthPort), hub); err != nil {
		return nil, err
	}

	client, err := versioned.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	meta, err := metadata.NewForConfig(admin)
	if err != nil {
		return nil, err
	}
	valuesPath := filepath.Join(dir, "values.yaml")
	if err := hubctl.CreateToken(ctx, kube, client, hubctl.TokenOptions{Namespace: workspace, Name: "bench", Output: valuesPath, Wait: 2 * time.Minute}, io.Discard); err != nil {
		return nil, err
	}
	data, err := os.ReadFile(valuesPath)
	if err != nil {
		return nil, err
	}
	var values registration.Values
	if err := yaml.Unmarshal(data, &values); err != nil {
		return nil, fmt.Errorf("the token's values: %w", err)
	}
	f.kube, f.client, f.meta, f.values, f.metricsPort = kube, client, meta, values, metricsPort
	return f, nil
}
