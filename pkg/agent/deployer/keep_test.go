package deployer

import (
	"testing"

	k8sfake "k8s.io/client-go/kubernetes/fake"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// What removing a release takes (keepResources, deleteNamespace, the account) is
// recorded in the agent's ledger when the release is deployed, not on the release.
func TestRemovalIsRecordedInTheLedger(t *testing.T) {
	for _, keep := range []bool{true, false} {
		d := &Deployer{AgentNamespace: "agent-ns"}
		d.ledger = &ledger{kube: k8sfake.NewClientset(), namespace: "agent-ns", legacy: func() ([]made, error) { return nil, nil }}
		bd := &fleet.BundleDeployment{}
		bd.Name = "app"
		bd.Spec.Options.KeepResources = keep
		bd.Spec.Options.DeleteNamespace = !keep
		bd.Spec.Options.ServiceAccount = "deployer"
		if err := d.remember(bd, "app-ns", "app", true); err != nil {
			t.Fatal(err)
		}
		got, err := d.ledger.find(func(m made) bool { return m.BundleDeployment == "app" })
		if err != nil || len(got) != 1 {
			t.Fatalf("entries %+v, %v", got, err)
		}
		want := made{Namespace: "app-ns", Release: "app", BundleDeployment: "app", ServiceAccount: "deployer", KeepResources: keep, DeleteNamespace: !keep, CreatedNamespace: true}
		if got[0] != want {
			t.Errorf("keepResources %v: recorded %+v, want %+v", keep, got[0], want)
		}
	}
}
