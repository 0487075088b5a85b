package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla/flotilla/internal/simagent"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// soakOptions tune a soak run (--soak).
type soakOptions struct {
	duration time.Duration
	warmUp   time.Duration
	every    time.Duration
	seed     uint64
	// growth is how much the hub's memory and goroutines and the control plane's
	// objects may grow from warm-up to the end, as a fraction.
	growth float64
}

// soakSample is the fleet at one moment of a soak.
type soakSample struct {
	Seconds       float64 `json:"seconds"`
	HubRSSMiB     float64 `json:"hubRSSMiB"`
	HubGoroutines float64 `json:"hubGoroutines"`
	HubHeapMiB    float64 `json:"hubHeapMiB"`
	APIWatches    float64 `json:"apiServerWatches"`
	// Objects counts the kinds of countedKinds but Events, which are Events.
	Objects            float64 `json:"controlPlaneObjects"`
	Events             float64 `json:"events"`
	ControlPlaneRSSMiB float64 `json:"controlPlaneRSSMiB"`
	ClustersReady      int     `json:"clustersReady"`
	AgentsOffline      int     `json:"agentsOffline"`
}

type soakReport struct {
	Clusters int          `json:"clusters"`
	Date     string       `json:"date"`
	Seed     uint64       `json:"seed"`
	Seconds  float64      `json:"seconds"`
	Offline  int          `json:"agentsTakenOffline"`
	Renewed  int          `json:"agentsReregistered"`
	Changes  int          `json:"bundleChanges"`
	Samples  []soakSample `json:"samples"`
	WarmUp   soakSample   `json:"warmUp"`
	End      soakSample   `json:"end"`
	Verdict  []string     `json:"verdict"`
	Passed   bool         `json:"passed"`
}

// soakAgent is a simulated agent that the soak takes offline and brings back.
type soakAgent struct {
	agent  *simagent.Agent
	cancel context.CancelFunc
	// back is when an offline agent returns; zero while it runs.
	back time.Time
}

func (a *soakAgent) start(values registration.Values, interval time.Duration, leases bool) {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.back = cancel, time.Time{}
	go func() {
		a.agent.Register(ctx, values)
		if ctx.Err() == nil && a.agent.Credential() != nil {
			_ = a.agent.Run(ctx, interval, leases, "soak")
		}
	}()
}

// soak runs o.clusters simulated agents against a hub for s.duration while they
// churn (every 10 s about 1% go offline for 30 s to 3 minutes, or lose their token
// and register again with their key) and the Bundle changes every minute, sampling
// the hub and the control plane every s.every. It fails when the hub's memory or
// goroutines, or the control plane's objects, grew from warm-up to the end by more
// than s.growth.
func soak(o options, s soakOptions) error {
	if s.duration <= s.warmUp {
		return fmt.Errorf("--soak %s must be longer than --soak-warm-up %s: growth is measured after the warm-up", s.duration, s.warmUp)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.duration+o.timeout)
	defer cancel()
	dir, cleanup, err := dataDir(o, "flotilla-soak-")
	if err != nil {
		return err
	}
	defer cleanup()
	// Answered requests go after a minute, so re-registrations do not pile them up
	// for the default retention.
	o.hubArgs = append(o.hubArgs, "--request-retention=1m")
	f, err := startFixture(ctx, o, dir)
	if err != nil {
		return err
	}
	defer f.cp.stop()
	defer f.hub.stop()
	rng := rand.New(rand.NewPCG(s.seed, s.seed>>1|1))
	r := &soakReport{Clusters: o.clusters, Date: time.Now().UTC().Format(time.RFC3339), Seed: s.seed}

	agents := make([]*soakAgent, o.clusters)
	for i := range agents {
		agents[i] = &soakAgent{agent: newSimulatedAgent()}
		agents[i].start(f.values, o.checkinInterval, o.agentLeases)
	}
	defer func() {
		for _, a := range agents {
			if a.cancel != nil {
				a.cancel()
			}
		}
	}()
	if _, err := f.client.FleetV1alpha1().Bundles(workspace).Create(ctx, benchBundle(), metav1.CreateOptions{}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "soak: %d clusters, %s, seed %d (--soak-seed repeats the churn)\n", o.clusters, s.duration, s.seed)

	start := time.Now()
	churn := time.NewTicker(10 * time.Second)
	defer churn.Stop()
	change := time.NewTicker(time.Minute)
	defer change.Stop()
	sample := time.NewTicker(s.every)
	defer sample.Stop()
	take := func() error {
		smp, err := f.sample(ctx, time.Since(start), agents)
		if err != nil {
			return err
		}
		r.Samples = append(r.Samples, smp)
		fmt.Fprintf(os.Stderr, "%6.0fs  hub %6.1f MiB, %5.0f goroutines, heap %6.1f MiB; API watches %5.0f, objects %6.0f (and %5.0f events), control plane %6.1f MiB; Ready %d, offline %d\n",
			smp.Seconds, smp.HubRSSMiB, smp.HubGoroutines, smp.HubHeapMiB, smp.APIWatches, smp.Objects, smp.Events, smp.ControlPlaneRSSMiB, smp.ClustersReady, smp.AgentsOffline)
		return nil
	}
	if err := take(); err != nil {
		return err
	}
	for time.Since(start) < s.duration {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-churn.C:
			now := time.Now()
			for _, a := range agents {
				if !a.back.IsZero() && now.After(a.back) {
					a.start(f.values, o.checkinInterval, o.agentLeases)
				}
			}
			for range max(1, o.clusters/100) {
				a := agents[rng.IntN(len(agents))]
				if !a.back.IsZero() || a.agent.Credential() == nil {
					continue
				}
				a.cancel()
				if rng.IntN(10) < 6 {
					a.back = now.Add(30*time.Second + time.Duration(rng.Int64N(int64(150*time.Second))))
					r.Offline++
					continue
				}
				if err := dropToken(ctx, a.agent); err != nil {
					return err
				}
				r.Renewed++
				a.start(f.values, o.checkinInterval, o.agentLeases)
			}
		case <-change.C:
			r.Changes++
			b, err := f.client.FleetV1alpha1().Bundles(workspace).Get(ctx, "bench", metav1.GetOptions{})
			if err != nil {
				return err
			}
			b.Spec.Resources[0].Content = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bench\ndata:\n  revision: %q\n", fmt.Sprint(r.Changes))
			if _, err := f.client.FleetV1alpha1().Bundles(workspace).Update(ctx, b, metav1.UpdateOptions{}); err != nil {
				return err
			}
		case <-sample.C:
			if err := take(); err != nil {
				return err
			}
		}
	}
	if err := take(); err != nil {
		return err
	}
	r.Seconds = time.Since(start).Seconds()
	r.judge(s)
	r.print(os.Stdout, s)
	out := o.out
	if out == "" {
		out = filepath.Join("bench-results", fmt.Sprintf("soak-%d.json", o.clusters))
	}
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err == nil {
		data, _ := json.MarshalIndent(r, "", "  ")
		if err := os.WriteFile(out, data, 0o644); err == nil {
			fmt.Printf("\nJSON report: %s\n", out)
		}
	}
	if !r.Passed {
		return fmt.Errorf("something grew by more than %.0f%% from warm-up to the end", 100*s.growth)
	}
	return nil
}

// dropToken removes the token from the agent's identity Secret, keeping its key: the
// agent, started again, registers anew and proves the key its Cluster recorded.
func dropToken(ctx context.Context, a *simagent.Agent) error {
	secrets := a.Downstream.Client.CoreV1().Secrets(a.Downstream.Namespace)
	secret, err := secrets.Get(ctx, names.AgentIdentitySecret, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading a simulated agent's identity: %w", err)
	}
	delete(secret.Data, "token")
	_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
	return err
}

// sample reads the hub's and the control plane's numbers now.
func (f *fixture) sample(ctx context.Context, at time.Duration, agents []*soakAgent) (soakSample, error) {
	s := soakSample{Seconds: at.Seconds()}
	if u, err := f.hub.usage(); err == nil {
		s.HubRSSMiB = u.RSSMiB
	}
	if u, err := f.cp.usage(); err == nil {
		s.ControlPlaneRSSMiB = u.RSSMiB
	}
	hub, err := hubMetrics(ctx, fmt.Sprintf("http://127.0.0.1:%d/metrics", f.metricsPort))
	if err != nil {
		return s, err
	}
	s.HubGoroutines = sumMetric(hub, "go_goroutines", nil)
	s.HubHeapMiB = sumMetric(hub, "go_memstats_heap_inuse_bytes", nil) / (1 << 20)
	api, err := apiMetrics(ctx, f.kube)
	if err != nil {
		return s, err
	}
	s.APIWatches = sumMetric(api, "apiserver_longrunning_requests", map[string]string{"verb": "WATCH"})
	counts, err := countObjects(ctx, f.meta)
	if err != nil {
		return s, err
	}
	for kind, n := range counts {
		if kind == "Event" {
			// Events live for the API server's event TTL (an hour), by design.
			s.Events = n
			continue
		}
		s.Objects += n
	}
	clusters, err := f.client.FleetV1alpha1().Clusters(workspace).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return s, err
	}
	for _, c := range clusters.Items {
		if cond := conditions.Get(c.Status.Conditions, fleet.ConditionReady); cond != nil && cond.Status == corev1.ConditionTrue {
			s.ClustersReady++
		}
	}
	for _, a := range agents {
		if !a.back.IsZero() {
			s.AgentsOffline++
		}
	}
	return s, nil
}

func hubMetrics(ctx context.Context, url string) (map[string]*dto.MetricFamily, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("reading the hub's /metrics: %w", err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseMetrics(raw)
}

func apiMetrics(ctx context.Context, kube kubernetes.Interface) (map[string]*dto.MetricFamily, error) {
	raw, err := kube.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's /metrics: %w", err)
	}
	return parseMetrics(raw)
}

func parseMetrics(raw []byte) (map[string]*dto.MetricFamily, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	families, err := parser.TextToMetricFamilies(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("parsing /metrics: %w", err)
	}
	return families, nil
}

// sumMetric adds up the values of the family's metrics whose labels include match.
func sumMetric(fams map[string]*dto.MetricFamily, name string, match map[string]string) float64 {
	var total float64
	fam, ok := fams[name]
	if !ok {
		return 0
	}
next:
	for _, m := range fam.GetMetric() {
		for k, v := range match {
			found := false
			for _, l := range m.GetLabel() {
				found = found || (l.GetName() == k && l.GetValue() == v)
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Gauge != nil:
			total += m.GetGauge().GetValue()
		case m.Counter != nil:
			total += m.GetCounter().GetValue()
		case m.Untyped != nil:
			total += m.GetUntyped().GetValue()
		}
	}
	return total
}

// judge compares the end with the first sample at or after warm-up.
func (r *soakReport) judge(s soakOptions) {
	r.Passed = true
	if len(r.Samples) == 0 {
		r.Passed = false
		r.Verdict = append(r.Verdict, "no samples")
		return
	}
	r.WarmUp = r.Samples[len(r.Samples)-1]
	for _, smp := range r.Samples {
		if smp.Seconds >= s.warmUp.Seconds() {
			r.WarmUp = smp
			break
		}
	}
	r.End = r.Samples[len(r.Samples)-1]
	for _, c := range []struct {
		what        string
		warmUp, end float64
	}{
		{"hub resident memory (MiB)", r.WarmUp.HubRSSMiB, r.End.HubRSSMiB},
		{"hub goroutines", r.WarmUp.HubGoroutines, r.End.HubGoroutines},
		{"hub heap in use (MiB)", r.WarmUp.HubHeapMiB, r.End.HubHeapMiB},
		{"control plane objects", r.WarmUp.Objects, r.End.Objects},
		{"API server watches", r.WarmUp.APIWatches, r.End.APIWatches},
	} {
		ok := c.end <= c.warmUp*(1+s.growth)
		verdict := "ok"
		if !ok {
			verdict = "GREW"
			r.Passed = false
		}
		r.Verdict = append(r.Verdict, fmt.Sprintf("%-28s warm-up %9.1f  end %9.1f  (%+.1f%%, at most %+.0f%%)  %s",
			c.what, c.warmUp, c.end, 100*(c.end/c.warmUp-1), 100*s.growth, verdict))
	}
}

func (r *soakReport) print(w io.Writer, s soakOptions) {
	fmt.Fprintf(w, "\nsoak: %d clusters for %.0f s (seed %d): %d agents taken offline, %d registered again, %d Bundle changes\n",
		r.Clusters, r.Seconds, r.Seed, r.Offline, r.Renewed, r.Changes)
	fmt.Fprintf(w, "%8s %9s %10s %9s %9s %9s %9s %9s %7s %8s\n", "seconds", "hub MiB", "goroutines", "heap MiB", "watches", "objects", "events", "cp MiB", "Ready", "offline")
	for _, smp := range r.Samples {
		fmt.Fprintf(w, "%8.0f %9.1f %10.0f %9.1f %9.0f %9.0f %9.0f %9.1f %7d %8d\n", smp.Seconds, smp.HubRSSMiB, smp.HubGoroutines, smp.HubHeapMiB,
			smp.APIWatches, smp.Objects, smp.Events, smp.ControlPlaneRSSMiB, smp.ClustersReady, smp.AgentsOffline)
	}
	fmt.Fprintf(w, "\nfrom warm-up (%.0f s) to the end:\n", r.WarmUp.Seconds)
	for _, v := range r.Verdict {
		fmt.Fprintln(w, "  "+v)
	}
}
