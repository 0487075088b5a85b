package leader

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func fastConfig() Config {
	return Config{Namespace: "flotilla-system", Name: "hub", LeaseDuration: 2 * time.Second, RenewDeadline: time.Second, RetryPeriod: 200 * time.Millisecond}
}

// A leader whose controllers cannot start gives up the Lease and says why, instead
// of renewing it with nothing running.
func TestALeaderWhoseControllersFailGivesUpTheLease(t *testing.T) {
	client := fake.NewClientset()
	// A guard against hanging, not a measure: Run returns long before.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	err := Run(ctx, client, fastConfig(), func(context.Context) error {
		return errors.New("cannot create the admission policies")
	})
	if ctx.Err() != nil {
		t.Fatal("Run kept the Lease until its context ended")
	}
	if err == nil || !strings.Contains(err.Error(), "cannot create the admission policies") || !strings.Contains(err.Error(), "gave up the Lease") {
		t.Fatalf("Run returned %v", err)
	}
	lease, err := client.CoordinationV1().Leases("flotilla-system").Get(context.Background(), "hub", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.HolderIdentity != nil && *lease.Spec.HolderIdentity != "" {
		t.Errorf("the Lease is still held by %s", *lease.Spec.HolderIdentity)
	}
}

// A leader runs its controllers until its context ends, and then returns no error.
func TestALeaderRunsUntilItsContextEnds(t *testing.T) {
	client := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	started := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- Run(ctx, client, fastConfig(), func(leadCtx context.Context) error {
			close(started)
			<-leadCtx.Done()
			return nil
		})
	}()
	select {
	case <-started:
	case <-time.After(time.Minute):
		t.Fatal("never led")
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run returned %v after its context ended", err)
	}
}
