package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sirupsen/logrus"
	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	coordinationclient "k8s.io/client-go/kubernetes/typed/coordination/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/metrics"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// DefaultReportEvery is how often an agent that renews its Lease patches its
// Cluster's status.agent when nothing in it changed, so that the Last-Seen column
// stays roughly current.
const DefaultReportEvery = 5 * time.Minute

// Checkin reports to the hub that the agent is alive, with its cluster's node counts
// and versions. Each check-in is one write: a patch of its own Cluster's status.agent
// when the report changed, on the first check-in and at least every ReportEvery;
// otherwise a renewal of its Lease (names.AgentLease) in its per-cluster namespace,
// which costs the hub's API server a fraction of a Cluster status patch and wakes no
// Cluster watcher. A hub that does not let it write the Lease gets a status patch
// every time, as before Leases.
type Checkin struct {
	Hub versioned.Interface
	// Leases, when set, is the hub's Lease API; without it every check-in patches
	// the Cluster's status.
	Leases     coordinationclient.LeasesGetter
	Credential registration.Credential
	Namespace  string
	Version    string
	Log        logrus.FieldLogger
	// Nodes, when set, supplies the node counts; its Changed channel makes the agent
	// check in early.
	Nodes *Nodes
	// KubernetesVersion is the downstream cluster's version.
	KubernetesVersion string
	// ReportEvery is DefaultReportEvery when zero.
	ReportEvery time.Duration

	// reported is the status.agent last patched (LastSeen zero), and reportedAt when.
	reported   *fleet.AgentStatus
	reportedAt time.Time
	// noLease is set once the hub refused the Lease; leaseMade once it was written.
	noLease, leaseMade bool
	// interval is the check-in interval, for the Lease's duration.
	interval time.Duration
}

// Run checks in at once, then every interval and whenever the nodes change, until
// ctx ends. A failed check-in is logged and retried with backoff, never faster than
// once a second.
func (c *Checkin) Run(ctx context.Context, interval time.Duration) {
	c.interval = interval
	var changed <-chan struct{}
	if c.Nodes != nil {
		changed = c.Nodes.Changed()
	}
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: interval}
	failing := false
	for {
		next := interval
		if err := c.once(ctx); err != nil {
			if ctx.Err() != nil {
				return
			}
			metrics.CheckIns.WithLabelValues("failed").Inc()
			if apierrors.IsUnauthorized(err) && !c.Credential.Expires.IsZero() && time.Now().After(c.Credential.Expires) {
				c.Log.Error(c.Credential.ExpiredAdvice())
			} else {
				c.Log.WithError(registration.Explain("checking in", c.Credential.APIServerURL, err)).Warn("Check-in failed; will retry")
			}
			failing = true
			next = backoff.Step()
		} else {
			metrics.CheckIns.WithLabelValues("ok").Inc()
			if failing {
				c.Log.Info("Checked in again")
			}
			failing = false
			backoff.Duration = time.Second
		}
		select {
		case <-ctx.Done():
			return
		case <-changed:
			if !failing {
				// Coalesce a burst of node changes into one check-in.
				select {
				case <-ctx.Done():
					return
				case <-time.After(time.Second):
				}
			}
		case <-time.After(next):
		}
	}
}

func (c *Checkin) once(ctx context.Context) error {
	now := time.Now()
	report := fleet.AgentStatus{
		Namespace:         c.Namespace,
		AgentVersion:      c.Version,
		KubernetesVersion: c.KubernetesVersion,
	}
	if c.Nodes != nil {
		report.ReadyNodes, report.NonReadyNodes, report.SampleNode = c.Nodes.Count()
	}
	every := c.ReportEvery
	if every <= 0 {
		every = DefaultReportEvery
	}
	if c.Leases != nil && !c.noLease && c.reported != nil && *c.reported == report && now.Sub(c.reportedAt) < every {
		err := c.renewLease(ctx, now)
		if err == nil || !(apierrors.IsForbidden(err) || apierrors.IsNotFound(err)) {
			return err
		}
		// A hub that predates agent Leases: the status patch is the heartbeat.
		c.noLease = true
		c.Log.WithError(err).Info("The hub does not take the agent's Lease; every check-in patches the Cluster's status")
	}
	if err := c.patchStatus(ctx, report, now); err != nil {
		return err
	}
	c.reported, c.reportedAt = &report, now
	return nil
}

// patchStatus writes report, seen at now, to the Cluster's status.agent.
func (c *Checkin) patchStatus(ctx context.Context, report fleet.AgentStatus, now time.Time) error {
	// Every field explicitly, zeros included: a merge patch leaves omitted fields as
	// they were, and a count that dropped to zero must read zero.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"agent": map[string]any{
		"lastSeen":          metav1.NewTime(now),
		"namespace":         report.Namespace,
		"agentVersion":      report.AgentVersion,
		"kubernetesVersion": report.KubernetesVersion,
		"readyNodes":        report.ReadyNodes,
		"nonReadyNodes":     report.NonReadyNodes,
		"sampleNode":        report.SampleNode,
	}}})
	if err != nil {
		return err
	}
	_, err = c.Hub.FleetV1alpha1().Clusters(c.Credential.ClusterNamespace).Patch(ctx, c.Credential.ClusterName,
		types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}

// renewLease sets the Lease's renewTime to now, creating the Lease if it is missing.
func (c *Checkin) renewLease(ctx context.Context, now time.Time) error {
	renew := metav1.NewMicroTime(now)
	// The hub gives a cluster up as offline after its own --cluster-offline-after; the
	// duration only tells a reader when the next renewal is overdue.
	seconds := int32(max(4*c.interval, 4*time.Second) / time.Second)
	spec := coordinationv1.LeaseSpec{HolderIdentity: &c.Credential.ClientID, LeaseDurationSeconds: &seconds, RenewTime: &renew}
	leases := c.Leases.Leases(c.Credential.DeploymentNamespace)
	patch, err := json.Marshal(map[string]any{"spec": spec})
	if err != nil {
		return err
	}
	renewal := func() error {
		_, err := leases.Patch(ctx, names.AgentLease, types.MergePatchType, patch, metav1.PatchOptions{})
		return err
	}
	// An agent's first renewal creates the Lease (a new cluster has none); after
	// that, or if one is there already, a patch renews it.
	if c.leaseMade {
		if err = renewal(); !apierrors.IsNotFound(err) {
			return err
		}
	}
	_, err = leases.Create(ctx, &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: names.AgentLease, Namespace: c.Credential.DeploymentNamespace},
		Spec:       spec,
	}, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		err = renewal()
	}
	c.leaseMade = err == nil
	return err
}
