// Package leader runs the hub's controllers in exactly one of its replicas, elected
// through a coordination.k8s.io Lease, and hands over promptly on shutdown.
package leader

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Config says which Lease to compete for and how fast a lost leader is replaced.
type Config struct {
	Namespace string
	Name      string
	// LeaseDuration is how long followers wait after the leader's last renewal
	// before taking over.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it gives up.
	RenewDeadline time.Duration
	// RetryPeriod is how often candidates try to acquire or renew the Lease.
	RetryPeriod time.Duration
}

// DefaultConfig is a Lease in namespace that a killed leader loses within 15 seconds.
func DefaultConfig(namespace, name string) Config {
	return Config{
		Namespace:     namespace,
		Name:          name,
		LeaseDuration: 15 * time.Second,
		RenewDeadline: 10 * time.Second,
		RetryPeriod:   2 * time.Second,
	}
}

// Run blocks until ctx ends, running lead while this process holds the Lease. lead
// gets a context that ends when leadership is lost, and runs until then. Losing
// leadership for any reason other than ctx ending is returned as an error: the caller
// should exit, as controllers that were half-way through work must not keep running
// beside a new leader. So is lead returning an error (its controllers could not
// start): the Lease is released first, so that another replica leads rather than one
// that renews the Lease with nothing running.
func Run(ctx context.Context, client kubernetes.Interface, cfg Config, lead func(context.Context) error) error {
	host, err := os.Hostname()
	if err != nil {
		host = "hub"
	}
	// Several replicas may run on one host, so the identity is more than the host name.
	identity := host + "_" + string(uuid.NewUUID())
	lock, err := resourcelock.New(resourcelock.LeasesResourceLock, cfg.Namespace, cfg.Name,
		client.CoreV1(), client.CoordinationV1(), resourcelock.ResourceLockConfig{Identity: identity})
	if err != nil {
		return fmt.Errorf("creating the leader Lease lock %s/%s: %w", cfg.Namespace, cfg.Name, err)
	}
	log := logrus.WithFields(logrus.Fields{"lease": cfg.Namespace + "/" + cfg.Name, "identity": identity})

	leading := make(chan struct{})
	// electing ends the election (releasing the Lease) when lead fails.
	electing, stopElecting := context.WithCancel(ctx)
	defer stopElecting()
	var leadErr error
	elector, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		LeaseDuration:   cfg.LeaseDuration,
		RenewDeadline:   cfg.RenewDeadline,
		RetryPeriod:     cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Name:            cfg.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(leadCtx context.Context) {
				close(leading)
				log.Info("Became the leader; starting controllers")
				if err := lead(leadCtx); err != nil && leadCtx.Err() == nil {
					log.WithError(err).Error("Controllers failed; giving up the leader Lease")
					leadErr = err
					stopElecting()
				}
			},
			OnStoppedLeading: func() {},
			OnNewLeader: func(current string) {
				if current != identity {
					log.WithField("leader", current).Info("Waiting: another hub replica leads")
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("leader election %s/%s: %w", cfg.Namespace, cfg.Name, err)
	}
	elector.Run(electing)
	if leadErr != nil {
		return fmt.Errorf("the controllers of the leader failed, so it gave up the Lease %s/%s: %w", cfg.Namespace, cfg.Name, leadErr)
	}
	if ctx.Err() != nil {
		return nil
	}
	select {
	case <-leading:
		return fmt.Errorf("lost the leader Lease %s/%s", cfg.Namespace, cfg.Name)
	default:
		return fmt.Errorf("stopped competing for the leader Lease %s/%s", cfg.Namespace, cfg.Name)
	}
}
