package agent

import (
	"context"
	"io"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	kubefake "k8s.io/client-go/kubernetes/fake"
	clienttesting "k8s.io/client-go/testing"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	fleetfake "github.com/flotilla/flotilla/pkg/generated/clientset/versioned/fake"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// writes counts the check-in's writes: Cluster status patches and Lease writes.
func writes(fleetClient *fleetfake.Clientset, kube *kubefake.Clientset) (status, lease int) {
	for _, a := range fleetClient.Actions() {
		if a.GetVerb() == "patch" && a.GetResource().Resource == "clusters" && a.GetSubresource() == "status" {
			status++
		}
	}
	for _, a := range kube.Actions() {
		if a.GetResource().Resource == "leases" && (a.GetVerb() == "patch" || a.GetVerb() == "create") {
			lease++
		}
	}
	return status, lease
}

func newCheckin(t *testing.T) (*Checkin, *fleetfake.Clientset, *kubefake.Clientset) {
	t.Helper()
	cluster := &fleet.Cluster{}
	cluster.Name, cluster.Namespace = "c1", "clusters"
	fleetClient := fleetfake.NewSimpleClientset(cluster)
	kube := kubefake.NewSimpleClientset()
	log := logrus.New()
	log.SetOutput(io.Discard)
	return &Checkin{
		Hub: fleetClient, Leases: kube.CoordinationV1(), Namespace: "cattle-fleet-system", Version: "v1", Log: log,
		Credential: registration.Credential{ClusterName: "c1", ClusterNamespace: "clusters", DeploymentNamespace: "cluster-ns", ClientID: "id"},
		interval:   time.Second,
	}, fleetClient, kube
}

func TestCheckinReportsThenRenewsItsLease(t *testing.T) {
	c, fleetClient, kube := newCheckin(t)
	ctx := context.Background()
	steps := []struct {
		what           string
		change         func()
		status, leases int
	}{
		{"the first check-in reports", nil, 1, 0},
		{"an unchanged report renews the Lease, creating it", nil, 1, 1},
		{"and then patches it", nil, 1, 2},
		{"a changed report is patched", func() { c.Version = "v2" }, 2, 2},
		{"a report older than ReportEvery is patched again", func() { c.reportedAt = time.Now().Add(-DefaultReportEvery) }, 3, 2},
		{"the Lease again", nil, 3, 3},
		// A restarted agent finds the Lease its predecessor made.
		{"a new agent's first renewal", func() { c.leaseMade = false }, 3, 5},
	}
	for _, step := range steps {
		if step.change != nil {
			step.change()
		}
		if err := c.once(ctx); err != nil {
			t.Fatalf("%s: %v", step.what, err)
		}
		if status, leases := writes(fleetClient, kube); status != step.status || leases != step.leases {
			t.Fatalf("%s: %d status patches and %d Lease writes so far, want %d and %d", step.what, status, leases, step.status, step.leases)
		}
	}
	lease, err := kube.CoordinationV1().Leases("cluster-ns").Get(ctx, names.AgentLease, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if lease.Spec.RenewTime == nil || lease.Spec.HolderIdentity == nil || *lease.Spec.HolderIdentity != "id" {
		t.Fatalf("the Lease's spec: %+v", lease.Spec)
	}
}

func TestCheckinWithoutLeasesPatchesTheStatusEveryTime(t *testing.T) {
	c, fleetClient, kube := newCheckin(t)
	kube.PrependReactor("*", "leases", func(a clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, names.AgentLease, nil)
	})
	for range 3 {
		if err := c.once(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	if status, _ := writes(fleetClient, kube); status != 3 {
		t.Fatalf("%d status patches in 3 check-ins to a hub that refuses the Lease, want 3", status)
	}
	if refused := len(kube.Actions()); refused != 1 {
		t.Fatalf("the agent tried the Lease %d times, want once", refused)
	}
}
