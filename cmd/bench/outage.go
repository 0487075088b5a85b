package main

import (
	"context"
	"fmt"
	"os"
	"sort"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/flotilla/flotilla/pkg/names"
)

// outage measures a hub coming back after an outage: once o.clusters simulated
// agents are registered and Ready, it kill -9s the hub and its control plane, keeps
// them down for d, starts both again (the control plane on its data directory and
// port, as an embedded hub restarts), and counts the API server's requests every
// second while the agents reconnect, until every agent has renewed its Lease (checked
// in) since the restart and 30 s more. It prints the rate at rest before the outage,
// the peaks after it, and the requests of the first minute by verb and resource.
func outage(o options, d time.Duration) error {
	if !o.agentLeases {
		return fmt.Errorf("--outage counts the agents back by their Leases: it needs --agent-leases")
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout+d)
	defer cancel()
	dir, cleanup, err := dataDir(o, "flotilla-outage-")
	if err != nil {
		return err
	}
	defer cleanup()
	f, err := startFixture(ctx, o, dir)
	if err != nil {
		return err
	}
	defer f.cp.stop()
	defer func() { f.hub.stop() }()
	clientsCtx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	readyAt := watchClusters(clientsCtx, f.client)
	agents := &fleetOfAgents{}
	for range o.clusters {
		agents.agents = append(agents.agents, newSimulatedAgent())
	}
	errs := make(chan error, 1)
	agents.start(clientsCtx, f.values, o.checkinInterval, o.agentLeases, errs)
	for readyAt.count() < o.clusters {
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out: %d of %d Ready", readyAt.count(), o.clusters)
		case err := <-errs:
			return err
		case <-time.After(time.Second):
		}
		fmt.Fprintf(os.Stderr, "\r%d of %d Clusters Ready   ", readyAt.count(), o.clusters)
	}
	fmt.Fprintln(os.Stderr)

	// At rest: the agents check in, nothing else happens.
	restFor := max(o.checkinInterval*2, time.Minute)
	fmt.Fprintf(os.Stderr, "at rest for %s\n", restFor)
	before, err := apiRequests(ctx, f.kube)
	if err != nil {
		return err
	}
	time.Sleep(restFor)
	after, err := apiRequests(ctx, f.kube)
	if err != nil {
		return err
	}
	restRate := (after.all() - before.all()) / restFor.Seconds()

	fmt.Fprintf(os.Stderr, "kill -9 of the hub and its control plane; down for %s\n", d)
	f.hub.kill()
	f.cp.kill()
	time.Sleep(d)
	restarted := time.Now()
	if err := f.cp.restart(); err != nil {
		return err
	}
	if err := waitAPI(ctx, f.kube, f.cp); err != nil {
		return err
	}
	apiBack := time.Since(restarted)
	if err := f.hub.restart(); err != nil {
		return err
	}
	// The restarted API server counts from zero; what it answered before this is
	// the hub's and the benchmark's own waiting for it.
	baseline, err := apiRequests(ctx, f.kube)
	if err != nil {
		return err
	}

	var perSecond []float64
	last, lastAt := baseline.all(), time.Now()
	var firstMinute requestCounts
	var backAt time.Duration
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out after the outage, before every agent checked in again")
		case <-tick.C:
		}
		counts, err := apiRequests(ctx, f.kube)
		if err != nil {
			continue
		}
		// A scrape that failed leaves a longer interval: the rate is per second of it.
		total, now := counts.all(), time.Now()
		perSecond = append(perSecond, (total-last)/now.Sub(lastAt).Seconds())
		last, lastAt = total, now
		if len(perSecond) == 60 {
			firstMinute = requestCounts{writes: diff(counts.writes, baseline.writes), reads: diff(counts.reads, baseline.reads)}
		}
		back, err := agentsBack(ctx, f.kube, restarted)
		if err != nil {
			continue
		}
		fmt.Fprintf(os.Stderr, "\r%5.0fs after the restart: %6.0f requests/s, %d of %d agents checked in   ", time.Since(restarted).Seconds(), perSecond[len(perSecond)-1], back, o.clusters)
		if back >= o.clusters && backAt == 0 {
			backAt = time.Since(restarted)
		}
		if backAt > 0 && time.Since(restarted) > backAt+30*time.Second && len(perSecond) >= 60 {
			break
		}
	}
	fmt.Fprintln(os.Stderr)

	peak1, peak10 := 0.0, 0.0
	for i, n := range perSecond {
		peak1 = max(peak1, n)
		if i >= 9 {
			var window float64
			for _, m := range perSecond[i-9 : i+1] {
				window += m
			}
			peak10 = max(peak10, window/10)
		}
	}
	fmt.Printf("\n%d clusters, the hub and its control plane down for %s\n", o.clusters, d)
	fmt.Printf("  requests/s at rest before the outage     %.1f\n", restRate)
	fmt.Printf("  API server answering after restart       %.1f s\n", apiBack.Seconds())
	fmt.Printf("  every agent checked in again             %.1f s after the restart\n", backAt.Seconds())
	fmt.Printf("  requests/s after the restart             peak %.0f over 1 s, %.0f over 10 s\n", peak1, peak10)
	fmt.Printf("  requests in the first minute             %.0f (%.1f per agent)\n", firstMinute.all(), firstMinute.all()/float64(o.clusters))
	type kv struct {
		k string
		v float64
	}
	var top []kv
	for k, v := range firstMinute.reads {
		top = append(top, kv{k, v})
	}
	for k, v := range firstMinute.writes {
		top = append(top, kv{k, v})
	}
	sort.Slice(top, func(i, j int) bool { return top[i].v > top[j].v })
	shown := 0
	for _, e := range top {
		if e.k == "total" {
			continue
		}
		if shown++; shown > 8 {
			break
		}
		fmt.Printf("    %-50s %.0f\n", e.k, e.v)
	}
	fmt.Printf("  requests per second after the restart, in 10 s buckets:\n   ")
	for i := 0; i < len(perSecond); i += 10 {
		var bucket float64
		for _, n := range perSecond[i:min(i+10, len(perSecond))] {
			bucket += n
		}
		fmt.Printf(" %.0f", bucket/float64(min(10, len(perSecond)-i)))
	}
	fmt.Println()
	return nil
}

// all is the number of requests, reads and writes.
func (c requestCounts) all() float64 { return c.writes["total"] + c.reads["total"] }

// agentsBack counts the agent Leases renewed since t.
func agentsBack(ctx context.Context, kube kubernetes.Interface, t time.Time) (int, error) {
	leases, err := kube.CoordinationV1().Leases("").List(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + names.AgentLease})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, l := range leases.Items {
		if l.Spec.RenewTime != nil && l.Spec.RenewTime.After(t) && names.IsClusterNamespace(l.Namespace) {
			n++
		}
	}
	return n, nil
}
