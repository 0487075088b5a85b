package agent

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/metrics"
	"github.com/flotilla/flotilla/pkg/registration"
)

// Checkin reports to the hub that the agent is alive, with its cluster's node counts
// and versions, by patching its own Cluster's status.agent: the one thing in the
// workspace its identity may change.
type Checkin struct {
	Hub        versioned.Interface
	Credential registration.Credential
	Namespace  string
	Version    string
	Log        logrus.FieldLogger
	// Nodes, when set, supplies the node counts; its Changed channel makes the agent
	// check in early.
	Nodes *Nodes
	// KubernetesVersion is the downstream cluster's version.
	KubernetesVersion string
}

// Run checks in at once, then every interval and whenever the nodes change, until
// ctx ends. A failed check-in is logged and retried with backoff, never faster than
// once a second.
func (c *Checkin) Run(ctx context.Context, interval time.Duration) {
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
	status := fleet.AgentStatus{
		LastSeen:          metav1.Now(),
		Namespace:         c.Namespace,
		AgentVersion:      c.Version,
		KubernetesVersion: c.KubernetesVersion,
	}
	if c.Nodes != nil {
		status.ReadyNodes, status.NonReadyNodes, status.SampleNode = c.Nodes.Count()
	}
	// Every field explicitly, zeros included: a merge patch leaves omitted fields as
	// they were, and a count that dropped to zero must read zero.
	patch, err := json.Marshal(map[string]any{"status": map[string]any{"agent": map[string]any{
		"lastSeen":          status.LastSeen,
		"namespace":         status.Namespace,
		"agentVersion":      status.AgentVersion,
		"kubernetesVersion": status.KubernetesVersion,
		"readyNodes":        status.ReadyNodes,
		"nonReadyNodes":     status.NonReadyNodes,
		"sampleNode":        status.SampleNode,
	}}})
	if err != nil {
		return err
	}
	_, err = c.Hub.FleetV1alpha1().Clusters(c.Credential.ClusterNamespace).Patch(ctx, c.Credential.ClusterName,
		types.MergePatchType, patch, metav1.PatchOptions{}, "status")
	return err
}
