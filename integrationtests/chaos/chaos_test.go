// Package chaos kills the parts of a fleet at random moments while clusters register
// and Bundles change, then checks that the fleet converges to a state with nothing
// lost, duplicated or left behind. CI runs a short campaign; `make chaos` a long one
// (docs/scale.md).
package chaos

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"testing"
	"time"

	"k8s.io/klog/v2"

	"github.com/flotilla/flotilla/internal/simagent"
	"github.com/flotilla/flotilla/pkg/registration"
)

// settings of a campaign, from the environment (make chaos sets them).
type settings struct {
	seed      uint64
	simulated int           // FLOTILLA_CHAOS_CLUSTERS: simulated agents
	real      int           // FLOTILLA_CHAOS_REAL_AGENTS: real agents, each on its own control plane
	kills     int           // FLOTILLA_CHAOS_KILLS: kills of each kind
	bundles   int           // FLOTILLA_CHAOS_BUNDLES: Bundles that change during the campaign
	gap       time.Duration // FLOTILLA_CHAOS_GAP: the longest pause between two kills
	converge  time.Duration // FLOTILLA_CHAOS_CONVERGE: how long the fleet may take to converge after the last kill
	embedded  bool          // one hub with its embedded control plane instead of two replicas against one
}

func load(t *testing.T) settings {
	t.Helper()
	s := settings{seed: uint64(time.Now().UnixNano()), simulated: 12, real: 1, kills: 2, bundles: 3, gap: 6 * time.Second, converge: 5 * time.Minute}
	number := func(name string, into *int) {
		if v := os.Getenv(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a number of at least 0", name, v)
			}
			*into = n
		}
	}
	duration := func(name string, into *time.Duration) {
		if v := os.Getenv(name); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				t.Fatalf("%s=%q: want a positive duration such as 6s", name, v)
			}
			*into = d
		}
	}
	if v := os.Getenv("FLOTILLA_CHAOS_SEED"); v != "" {
		seed, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("FLOTILLA_CHAOS_SEED=%q: want a number", v)
		}
		s.seed = seed
	}
	number("FLOTILLA_CHAOS_CLUSTERS", &s.simulated)
	number("FLOTILLA_CHAOS_REAL_AGENTS", &s.real)
	number("FLOTILLA_CHAOS_KILLS", &s.kills)
	number("FLOTILLA_CHAOS_BUNDLES", &s.bundles)
	duration("FLOTILLA_CHAOS_GAP", &s.gap)
	duration("FLOTILLA_CHAOS_CONVERGE", &s.converge)
	if s.simulated+s.real == 0 {
		t.Fatal("a campaign needs at least one agent")
	}
	return s
}

const workspace = "chaos"

// Kinds of kill.
const (
	killLeader       = "hub leader"
	killStandby      = "hub standby"
	killControlPlane = "control plane"
	killEmbeddedHub  = "embedded hub"
	killRealAgent    = "real agent"
	killSimAgent     = "simulated agent"
)

// TestChaos is one campaign: two hub replicas against one control plane, agents
// registering (simulated ones in this process, real ones on their own control
// planes, installing with Helm), Bundles changing, and kill -9 at random moments of
// the leading replica, the standby, the control plane (restarted on its data
// directory) and agents. After the last kill it waits for convergence and checks the
// invariants (invariants_test.go), printing each with its count.
func TestChaos(t *testing.T) {
	t.Parallel()
	campaign(t, load(t))
}

// TestChaosEmbeddedHub is the campaign against the hub's default mode: one process
// with its embedded control plane, killed and restarted on its data directory.
func TestChaosEmbeddedHub(t *testing.T) {
	t.Parallel()
	s := load(t)
	s.embedded = true
	campaign(t, s)
}

func campaign(t *testing.T, s settings) {
	// The simulated agents' watches end with every kill of the control plane, and
	// client-go says so on stderr for each; the campaign reports what matters.
	klog.SetOutput(io.Discard)
	klog.LogToStderr(false)
	rng := rand.New(rand.NewPCG(s.seed, s.seed>>1|1))
	mode := "two hub replicas against one control plane"
	if s.embedded {
		mode = "one hub with its embedded control plane"
	}
	t.Logf("chaos: seed %d (FLOTILLA_CHAOS_SEED=%d repeats the schedule), %s, %d simulated and %d real agents, %d Bundles, %d kills of each kind",
		s.seed, s.seed, mode, s.simulated, s.real, s.bundles, s.kills)

	f := newFleet(t, s)
	start := time.Now()
	at := func() string { return fmt.Sprintf("%6.1fs", time.Since(start).Seconds()) }

	// The schedule: every kill at a random gap from the one before; simulated agents
	// join at random moments of the first half, so that kills land mid-registration;
	// a Bundle changes at every other kill, so that they land mid-Helm operation.
	type event struct {
		at   time.Duration
		kind string
		// due is when it was first due; a kill that finds nothing to kill waits.
		due time.Duration
	}
	var kinds []string
	for range s.kills {
		if s.embedded {
			kinds = append(kinds, killEmbeddedHub)
		} else {
			kinds = append(kinds, killLeader, killStandby, killControlPlane)
		}
		if s.real > 0 {
			kinds = append(kinds, killRealAgent)
		}
		if s.simulated > 0 {
			kinds = append(kinds, killSimAgent)
		}
	}
	rng.Shuffle(len(kinds), func(i, j int) { kinds[i], kinds[j] = kinds[j], kinds[i] })
	var kills []event
	var when time.Duration
	for _, k := range kinds {
		when += time.Duration(rng.Int64N(int64(s.gap))) + time.Second
		kills = append(kills, event{at: when, kind: k, due: when})
	}
	joins := make([]time.Duration, s.simulated)
	for i := range joins {
		joins[i] = time.Duration(rng.Int64N(int64(when/2 + 1)))
	}
	sort.Slice(joins, func(i, j int) bool { return joins[i] < joins[j] })

	counts := map[string]int{}
	next, joined := 0, 0
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for next < len(kills) || joined < len(joins) {
		<-tick.C
		now := time.Since(start)
		for joined < len(joins) && joins[joined] <= now {
			f.sims[joined].start(f.values)
			joined++
		}
		if next < len(kills) && kills[next].at <= now {
			k := kills[next].kind
			what, done := f.kill(k, rng)
			if !done {
				// Nothing of that kind runs now (an election is under way, or the
				// other kills left none): the same kill again in two seconds.
				if now-kills[next].due > 3*time.Minute {
					t.Fatalf("%s no %s to kill for 3 minutes", at(), k)
				}
				kills[next].at = now + 2*time.Second
				continue
			}
			counts[k]++
			t.Logf("%s kill -9 %s: %s", at(), k, what)
			if next%2 == 0 && s.bundles > 0 {
				b := rng.IntN(s.bundles)
				if err := f.changeBundle(b); err != nil {
					t.Logf("%s changing Bundle %d: %v (the next change or the end tries again)", at(), b, err)
				}
			}
			next++
		}
		f.supervise(func(format string, args ...any) { t.Logf(at()+" "+format, args...) })
	}
	t.Logf("%s last kill; kills by kind: %v; processes that exited by themselves and were restarted: %d", at(), counts, f.selfExits)

	// Every process runs again, and every Bundle's last change is in.
	deadline := time.Now().Add(s.converge)
	for !f.allUp() && time.Now().Before(deadline) {
		f.supervise(func(format string, args ...any) { t.Logf(at()+" "+format, args...) })
		time.Sleep(200 * time.Millisecond)
	}
	converged := time.Now()
	var report []invariant
	for {
		f.supervise(func(format string, args ...any) { t.Logf(at()+" "+format, args...) })
		report = f.check(context.Background())
		if holds(report) || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("%s after the last kill, %s to converge:", at(), time.Since(converged).Round(100*time.Millisecond))
	for _, inv := range report {
		status := "ok  "
		if len(inv.violations) > 0 {
			status = "FAIL"
		}
		t.Logf("  %s %-62s %d", status, inv.name, inv.count)
		for i, v := range inv.violations {
			if i == 10 {
				t.Logf("         ... and %d more", len(inv.violations)-10)
				break
			}
			t.Logf("         %s", v)
		}
	}
	if !holds(report) {
		t.Fatalf("the fleet did not converge within %s of the last kill (seed %d)", s.converge, s.seed)
	}
	f.plantOrphans(t)
}

// simulated is a simulated agent the campaign can kill and restart.
type simulated struct {
	agent  *simagent.Agent
	cancel context.CancelFunc
	// down is when a killed agent starts again; zero while it runs or before it joined.
	down    time.Time
	started bool
}

func (a *simulated) start(values registration.Values) {
	ctx, cancel := context.WithCancel(context.Background())
	a.cancel, a.started, a.down = cancel, true, time.Time{}
	go func() {
		a.agent.Register(ctx, values)
		if ctx.Err() == nil && a.agent.Credential() != nil {
			_ = a.agent.Run(ctx, 5*time.Second, true, "chaos")
		}
	}()
}

func holds(report []invariant) bool {
	for _, inv := range report {
		if len(inv.violations) > 0 {
			return false
		}
	}
	return len(report) > 0
}
