package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/flotilla/flotilla/internal/simagent"
	"github.com/flotilla/flotilla/pkg/registration"
)

// bench labels every simulated cluster, for the Bundle to target them all.
const benchLabel = "flotilla.dev/bench"

func newSimulatedAgent() *simagent.Agent {
	return simagent.New(map[string]string{benchLabel: "true"})
}

// fleetOfAgents registers n simulated agents at once and runs them.
type fleetOfAgents struct {
	agents []*simagent.Agent
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
			a.Register(ctx, values)
			if a.Credential() == nil {
				return
			}
			f.mu.Lock()
			f.done++
			f.mu.Unlock()
			if err := a.Run(ctx, interval, leases, "bench"); err != nil {
				select {
				case errs <- fmt.Errorf("agent of %s: %w", a.Credential().ClusterName, err):
				default:
				}
			}
		}()
	}
}
