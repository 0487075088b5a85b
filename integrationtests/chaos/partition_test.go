package chaos

import (
	"context"
	"fmt"
	"io"
	"net"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
)

// link is the network between agents and the hub: a TCP relay that can be cut, as a
// partition cuts it. Cut, it closes what is open and holds what connects unanswered,
// so the agent meets timeouts rather than refusals.
type link struct {
	listener net.Listener
	mu       sync.Mutex
	target   string
	cut      bool
	conns    []net.Conn
}

func newLink(t *testing.T, target string) *link {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	k := &link{listener: l, target: target}
	t.Cleanup(func() { _ = l.Close(); k.drop() })
	go k.serve()
	return k
}

func (k *link) port() int { return k.listener.Addr().(*net.TCPAddr).Port }

func (k *link) setTarget(target string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.target = target
}

func (k *link) serve() {
	for {
		in, err := k.listener.Accept()
		if err != nil {
			return
		}
		k.mu.Lock()
		k.conns = append(k.conns, in)
		cut := k.cut
		k.mu.Unlock()
		if cut {
			continue // held open, never answered
		}
		k.mu.Lock()
		target := k.target
		k.mu.Unlock()
		go func() {
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				return
			}
			k.mu.Lock()
			k.conns = append(k.conns, out)
			k.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); _ = out.Close() }()
			_, _ = io.Copy(in, out)
			_ = in.Close()
		}()
	}
}

// partition cuts the link.
func (k *link) partition() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.cut = true
	k.closeAll()
}

// heal carries new connections again; the held ones are dropped, as the agent's
// timeouts would drop them.
func (k *link) heal() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closeAll()
	k.cut = false
}

func (k *link) drop() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.closeAll()
}

// closeAll closes every connection; k.mu must be held.
func (k *link) closeAll() {
	for _, c := range k.conns {
		_ = c.Close()
	}
	k.conns = nil
}

// TestAnAgentCutOffFromTheHub partitions a real agent from its hub for three times
// the hub's offline threshold: the Cluster shows Offline while the cluster keeps its
// workloads, and once the network returns the agent comes back with its identity,
// the Cluster is Ready again and a Bundle change made during the partition arrives.
func TestAnAgentCutOffFromTheHub(t *testing.T) {
	t.Parallel()
	// Scaled down from the defaults (5 minutes offline threshold, 30 s check-ins) so
	// that the partition lasts a minute.
	const offlineAfter = 20 * time.Second
	k := newLink(t, "")
	hub := framework.StartHub(t, "--api-server-url=https://127.0.0.1:"+strconv.Itoa(k.port()), "--cluster-offline-after="+offlineAfter.String())
	k.setTarget("127.0.0.1:" + strconv.Itoa(hub.Port))
	ctx := context.Background()

	values := hub.CreateToken("partition", "token", "")
	ds := framework.StartControlPlane(t, "cut-off", "--simulate-workloads")
	framework.InstallAgent(t, ds, values, "--set-string", "labels.site=remote", "--set", "checkinInterval=3s", "--set", "monitorInterval=2s")
	framework.StartAgent(t, ds)
	framework.Eventually(t, "the agent to register", 2*time.Minute, func(ctx context.Context) error { return framework.Registered(ctx, ds) })
	id := framework.Identity(t, ds)
	clusters := hub.Fleet().FleetV1alpha1().Clusters("partition")
	readyIs := func(status, reason string) func(context.Context) error {
		return func(ctx context.Context) error {
			c, err := clusters.Get(ctx, id.ClusterName, metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cond := conditions.Get(c.Status.Conditions, fleet.ConditionReady); cond == nil || string(cond.Status) != status || cond.Reason != reason {
				return fmt.Errorf("Ready is %+v", cond)
			}
			return nil
		}
	}
	framework.Eventually(t, "the Cluster to be Ready", 2*time.Minute, readyIs("True", ""))
	hub.MustKubectl(partitionBundle("1"), "apply", "-f", "-")
	configMapIs := func(revision string) func(context.Context) error {
		return func(ctx context.Context) error {
			cm, err := ds.Client().CoreV1().ConfigMaps("partition").Get(ctx, "kept", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if cm.Data["revision"] != revision {
				return fmt.Errorf("revision %q, want %q", cm.Data["revision"], revision)
			}
			return nil
		}
	}
	framework.Eventually(t, "the Bundle's ConfigMap downstream", 2*time.Minute, configMapIs("1"))

	cut := time.Now()
	k.partition()
	framework.Eventually(t, "the Cluster to show Offline", 2*time.Minute, readyIs("Unknown", "Offline"))
	t.Logf("Offline %s after the partition (threshold %s)", time.Since(cut).Round(time.Second), offlineAfter)
	hub.MustKubectl(partitionBundle("2"), "apply", "-f", "-")
	for time.Since(cut) < 3*offlineAfter {
		if err := configMapIs("1")(ctx); err != nil {
			t.Fatalf("during the partition, the cluster's workload changed or went: %v", err)
		}
		time.Sleep(2 * time.Second)
	}
	out := hub.MustKubectl("", "-n", "partition", "get", "clusters.fleet.cattle.io")
	t.Logf("during the partition:\n%s", out)

	healed := time.Now()
	k.heal()
	framework.Eventually(t, "the Cluster to be Ready again", 3*time.Minute, readyIs("True", ""))
	framework.Eventually(t, "the change made during the partition to arrive", 3*time.Minute, configMapIs("2"))
	t.Logf("Ready again %s after the network returned", time.Since(healed).Round(time.Second))
	if after := framework.Identity(t, ds); after.ClusterName != id.ClusterName || after.ClientID != id.ClientID {
		t.Errorf("the agent came back as %s/%s, not %s/%s", after.ClusterName, after.ClientID, id.ClusterName, id.ClientID)
	}
	list, err := clusters.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 1 {
		t.Errorf("Clusters after the partition: %d (%v), want the one", len(list.Items), err)
	}
}

func partitionBundle(revision string) string {
	return `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: kept
  namespace: partition
spec:
  defaultNamespace: partition
  resources:
  - name: cm.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: kept
      data:
        revision: "` + revision + `"
  targets:
  - clusterSelector:
      matchLabels:
        site: remote
`
}
