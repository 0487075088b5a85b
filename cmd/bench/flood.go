package main

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/registration"
)

// floodRetention is how long the hub keeps refused requests in a flood run.
const floodRetention = 30 * time.Second

// requestFlood measures what a token holder's flood of requests costs the hub: the
// token allows one cluster (maxRegistrations: 1) and its holder sends o.clusters
// requests for as many new clusters, 16 at a time, as fast as the API server lets it.
// It prints the hub's resident memory before, at its peak while refusing them, and
// once the hub has deleted the refused requests (beyond the 100 per token it keeps,
// at once; those, after --request-retention 30s), and the most requests of
// the token it saw at once.
func requestFlood(o options) error {
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()
	dir, err := os.MkdirTemp("", "flotilla-flood-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	o.hubArgs = append(o.hubArgs, "--request-retention="+floodRetention.String())
	f, err := startFixture(ctx, o, dir)
	if err != nil {
		return err
	}
	defer f.cp.stop()
	defer f.hub.stop()
	if _, err := f.client.FleetV1alpha1().ClusterRegistrationTokens(workspace).Patch(ctx, "bench", types.MergePatchType,
		[]byte(`{"spec":{"maxRegistrations":1}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	cfg, err := registration.HubConfig(f.values.APIServerURL, f.values.APIServerCA, f.values.Token)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 1000, 1000
	holder, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	before, err := f.hub.usage()
	if err != nil {
		return err
	}

	// Signed as an agent signs, so that each request is refused for the token's
	// limit, as a real holder's would be, not for a missing signature.
	key, err := registration.NewAgentKey()
	if err != nil {
		return err
	}
	start := time.Now()
	var created, throttled, failed atomic.Int64
	workqueue.ParallelizeUntil(ctx, 16, o.clusters, func(i int) {
		req, _, err := registration.NewRequest(workspace, "bench", fmt.Sprintf("flood-%06d", i), nil, key)
		if err == nil {
			_, err = holder.FleetV1alpha1().ClusterRegistrationRequests(workspace).Create(ctx, req, metav1.CreateOptions{})
		}
		switch {
		case err == nil:
			created.Add(1)
		case apierrors.IsTooManyRequests(err):
			throttled.Add(1)
		default:
			failed.Add(1)
		}
	})
	sent := time.Since(start)

	// Every request answered: one granted, the others refused (and those beyond what
	// the hub keeps per token deleted already).
	var granted, unanswered, most int
	for {
		list, err := f.client.FleetV1alpha1().ClusterRegistrationRequests(workspace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		granted, unanswered, most = 0, 0, max(most, len(list.Items))
		for _, r := range list.Items {
			switch c := conditions.Get(r.Status.Conditions, fleet.ConditionReady); {
			case c == nil:
				unanswered++
			case c.Status == corev1.ConditionTrue:
				granted++
			}
		}
		if unanswered == 0 {
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("%d requests not answered: %w", unanswered, err)
		}
	}
	refused := int(created.Load()) - granted
	answered := time.Since(start)
	peak, err := f.hub.usage()
	if err != nil {
		return err
	}

	// The refused requests go after the retention.
	var left int
	for {
		list, err := f.client.FleetV1alpha1().ClusterRegistrationRequests(workspace).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		if left = len(list.Items); left <= granted {
			break
		}
		if err := sleep(ctx, time.Second); err != nil {
			return fmt.Errorf("%d requests left: %w", left, err)
		}
	}
	cleaned := time.Since(start)
	after, err := f.hub.usage()
	if err != nil {
		return err
	}

	fmt.Printf("%d requests from one token allowing one cluster\n", o.clusters)
	fmt.Printf("  created / throttled (429) / failed   %d / %d / %d in %.1f s\n", created.Load(), throttled.Load(), failed.Load(), sent.Seconds())
	fmt.Printf("  granted / refused                    %d / %d, all answered after %.1f s\n", granted, refused, answered.Seconds())
	fmt.Printf("  most requests kept at once           %d (seen once a second)\n", most)
	fmt.Printf("  refused requests deleted after        %.1f s (retention %s)\n", cleaned.Seconds(), floodRetention)
	fmt.Printf("  hub resident memory                  %.0f MiB before, %.0f MiB peak, %.0f MiB after the deletions\n", before.RSSMiB, peak.PeakRSSMiB, after.RSSMiB)
	return nil
}

func sleep(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}
