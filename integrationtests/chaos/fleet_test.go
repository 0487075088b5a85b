package chaos

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/internal/simagent"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// chaosLabel labels every cluster of the campaign; its Bundles target it.
const chaosLabel = "chaos"

// process is a process of the campaign, restarted after a kill as a kubelet or a
// service manager would restart it.
type process struct {
	name string
	p    *framework.Process
	// down, after a kill, is when it starts again; zero while it should run, so
	// that one found exited then exited by itself.
	down time.Time
	// logFrom is the length of its log when it last started.
	logFrom int
	// started is called after each restart.
	started func()
}

func (p *process) exited() bool {
	select {
	case <-p.p.Exited():
		return true
	default:
		return false
	}
}

// leads says whether this hub replica became the leader since it last started.
func (p *process) leads() bool {
	return !p.exited() && strings.Contains(p.p.Log()[p.logFrom:], "Became the leader")
}

func (p *process) kill(rng *rand.Rand) {
	p.p.Kill()
	p.down = time.Now().Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
}

type realAgent struct {
	process
	ds *framework.Cluster
}

type chaosFleet struct {
	t      *testing.T
	host   *framework.Cluster
	cp     *process
	hubs   []*process
	reals  []*realAgent
	sims   []*simulated
	values registration.Values
	client versioned.Interface
	// revs is each Bundle's last written revision.
	revs      []int
	selfExits int
}

// newFleet starts the hub's control plane, two hub replicas, the real agents'
// control planes and agents, and creates the token and the Bundles. Simulated agents
// are made but not started.
func newFleet(t *testing.T, s settings) *chaosFleet {
	f := &chaosFleet{t: t, revs: make([]int, s.bundles)}
	// Retention short enough for answered requests to go within the campaign's
	// convergence.
	retention := "--request-retention=20s"
	var hub *framework.Hub
	if s.embedded {
		hub = framework.StartHub(t, retention)
		f.host = &hub.Cluster
		f.cp = &process{name: "embedded hub", p: hub.Process}
	} else {
		f.host = framework.StartControlPlane(t, "hub-host")
		f.cp = &process{name: "control plane", p: f.host.Process}
		// A short Lease for quick takeovers.
		args := []string{"--leader-elect-lease-duration=10s", "--leader-elect-renew-deadline=8s", "--leader-elect-retry-period=1s", retention}
		for i := range 2 {
			h := framework.StartHubOn(t, f.host, args...)
			f.hubs = append(f.hubs, &process{name: fmt.Sprintf("hub replica %d", i), p: h.Process})
		}
		framework.Eventually(t, "one replica to lead", 2*time.Minute, func(context.Context) error {
			if f.leader() == nil {
				return fmt.Errorf("no leader yet")
			}
			return nil
		})
		hub = &framework.Hub{Cluster: *f.host}
	}
	f.client = f.host.Fleet()
	valuesPath := hub.CreateToken(workspace, "chaos", "")
	values, err := framework.ReadValues(valuesPath)
	if err != nil {
		t.Fatal(err)
	}
	f.values = values
	for b := range s.bundles {
		if _, err := f.client.FleetV1alpha1().Bundles(workspace).Create(context.Background(), bundle(b, 0), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range s.real {
		ds := framework.StartControlPlane(t, fmt.Sprintf("real-%d", i), "--simulate-workloads")
		framework.InstallAgent(t, ds, valuesPath, "--set-string", "labels."+chaosLabel+"=true", "--set", "monitorInterval=2s")
		a := &realAgent{ds: ds}
		a.process = process{name: "agent of " + ds.Name, p: framework.StartAgent(t, ds)}
		a.started = func() { framework.StandInForAgentPod(t, ds, "cattle-fleet-system", a.p.Exited()) }
		f.reals = append(f.reals, a)
	}
	for range s.simulated {
		f.sims = append(f.sims, &simulated{agent: simagent.New(map[string]string{chaosLabel: "true"})})
	}
	t.Cleanup(func() {
		for _, a := range f.sims {
			if a.cancel != nil {
				a.cancel()
			}
		}
	})
	return f
}

// bundle is the campaign's Bundle b at revision rev: a ConfigMap on every cluster.
func bundle(b, rev int) *fleet.Bundle {
	name := fmt.Sprintf("chaos-%d", b)
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: workspace},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "chaos"},
			Resources: []fleet.BundleResource{{Name: "cm.yaml",
				Content: fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  revision: %q\n", name, fmt.Sprint(rev))}},
			Targets: []fleet.BundleTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{chaosLabel: "true"}}}},
		},
	}
}

// changeBundle writes Bundle b's next revision.
func (f *chaosFleet) changeBundle(b int) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	bundles := f.client.FleetV1alpha1().Bundles(workspace)
	current, err := bundles.Get(ctx, fmt.Sprintf("chaos-%d", b), metav1.GetOptions{})
	if err != nil {
		return err
	}
	current.Spec.Resources = bundle(b, f.revs[b]+1).Spec.Resources
	if _, err := bundles.Update(ctx, current, metav1.UpdateOptions{}); err != nil {
		return err
	}
	f.revs[b]++
	return nil
}

func (f *chaosFleet) leader() *process {
	for _, h := range f.hubs {
		if h.leads() {
			return h
		}
	}
	return nil
}

// kill kill -9s a process of kind and says which; false if none runs.
func (f *chaosFleet) kill(kind string, rng *rand.Rand) (string, bool) {
	running := func(ps []*process) []*process {
		var out []*process
		for _, p := range ps {
			if !p.exited() {
				out = append(out, p)
			}
		}
		return out
	}
	switch kind {
	case killLeader, killStandby:
		leader := f.leader()
		var pick *process
		for _, h := range running(f.hubs) {
			if (kind == killLeader) == (h == leader) {
				pick = h
			}
		}
		if pick == nil {
			return "", false
		}
		pick.kill(rng)
		return pick.name, true
	case killControlPlane, killEmbeddedHub:
		if f.cp.exited() {
			return "", false
		}
		f.cp.kill(rng)
		if kind == killEmbeddedHub {
			return "the hub, its API server and etcd in one process", true
		}
		return "the hub's API server and etcd", true
	case killRealAgent:
		var ps []*process
		for _, a := range f.reals {
			ps = append(ps, &a.process)
		}
		ps = running(ps)
		if len(ps) == 0 {
			return "", false
		}
		p := ps[rng.IntN(len(ps))]
		p.kill(rng)
		return p.name, true
	case killSimAgent:
		var up []int
		for i, a := range f.sims {
			if a.started && a.down.IsZero() {
				up = append(up, i)
			}
		}
		if len(up) == 0 {
			return "", false
		}
		i := up[rng.IntN(len(up))]
		f.sims[i].cancel()
		f.sims[i].down = time.Now().Add(time.Duration(rng.Int64N(int64(3 * time.Second))))
		return fmt.Sprintf("simulated agent %d", i), true
	}
	panic("unknown kind " + kind)
}

// processes is every process of the campaign.
func (f *chaosFleet) processes() []*process {
	ps := append([]*process{f.cp}, f.hubs...)
	for _, a := range f.reals {
		ps = append(ps, &a.process)
	}
	return ps
}

// supervise restarts what is due to run again: killed processes and agents whose
// downtime is over, and processes that exited by themselves (a hub that lost its
// Lease while the control plane was down exits, as it should), two seconds after.
func (f *chaosFleet) supervise(logf func(format string, args ...any)) {
	now := time.Now()
	for _, p := range f.processes() {
		if !p.exited() {
			continue
		}
		if p.down.IsZero() {
			f.selfExits++
			logf("%s exited by itself; restarting it in 2s", p.name)
			p.down = now.Add(2 * time.Second)
			continue
		}
		if now.Before(p.down) {
			continue
		}
		p.logFrom = len(p.p.Log())
		p.p.Restart()
		p.down = time.Time{}
		if p.started != nil {
			p.started()
		}
	}
	for _, a := range f.sims {
		if !a.down.IsZero() && !now.Before(a.down) {
			a.start(f.values)
		}
	}
}

// allUp says whether every process and agent runs.
func (f *chaosFleet) allUp() bool {
	for _, p := range f.processes() {
		if p.exited() {
			return false
		}
	}
	for _, a := range f.sims {
		if !a.started || !a.down.IsZero() {
			return false
		}
	}
	return true
}

// plantOrphans shows that the invariants can fail: it adds a Cluster no agent
// registered and a registration answer whose request never existed, and expects the
// check to name both, then removes them.
func (f *chaosFleet) plantOrphans(t *testing.T) {
	ctx := context.Background()
	cluster, err := f.client.FleetV1alpha1().Clusters(workspace).Create(ctx,
		&fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "planted"}, Spec: fleet.ClusterSpec{ClientID: "planted-client"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secrets := f.host.Client().CoreV1().Secrets(names.RegistrationNamespace)
	secret, err := secrets.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "planted-answer", Labels: map[string]string{names.RequestLabel: "no-such-request"}},
		Type:       corev1.SecretType(names.CredentialSecretType),
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, inv := range f.check(ctx) {
		for _, v := range inv.violations {
			found[inv.name] = found[inv.name] || strings.Contains(v, "planted")
		}
	}
	for _, name := range []string{"exactly one Cluster per agent's clientID", "no orphaned Secrets (identities, answers)"} {
		if !found[name] {
			t.Errorf("the check %q did not see what was planted for it", name)
		}
	}
	_ = secrets.Delete(ctx, secret.Name, metav1.DeleteOptions{})
	_ = f.client.FleetV1alpha1().Clusters(workspace).Delete(ctx, cluster.Name, metav1.DeleteOptions{})
}
