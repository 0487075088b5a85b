package deployer

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/names"
)

// deployment is the BundleDeployment of Bundle name of workspace ws, in a state.
func deployment(name, ws string, state fleet.BundleState, labels map[string]string, refs ...fleet.BundleRef) *fleet.BundleDeployment {
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "cluster-ns", Labels: map[string]string{
		names.BundleNameLabel: name, names.BundleNamespaceLabel: ws,
	}}}
	for k, v := range labels {
		bd.Labels[k] = v
	}
	bd.Spec.DependsOn = refs
	bd.Spec.DeploymentID = "id"
	switch state {
	case fleet.Ready:
		bd.Status = fleet.BundleDeploymentStatus{AppliedDeploymentID: "id", Ready: true, NonModified: true}
	case fleet.NotReady:
		bd.Status = fleet.BundleDeploymentStatus{AppliedDeploymentID: "id", NonModified: true}
	case fleet.Modified:
		bd.Status = fleet.BundleDeploymentStatus{AppliedDeploymentID: "id", Ready: true}
	case fleet.ErrApplied:
		conditions.Set(&bd.Status.Conditions, ConditionDeployed, "False", "Error", "boom")
	}
	return bd
}

func TestUnmetDependencies(t *testing.T) {
	tier := func(v string) map[string]string { return map[string]string{"tier": v} }
	byLabel := fleet.BundleRef{Selector: &metav1.LabelSelector{MatchLabels: tier("db")}}
	cluster := []*fleet.BundleDeployment{
		deployment("crds", "ws", fleet.Ready, nil),
		deployment("db", "ws", fleet.ErrApplied, tier("db")),
		deployment("cache", "ws", fleet.NotReady, tier("db")),
		deployment("drifted", "ws", fleet.Modified, nil),
	}
	for _, tc := range []struct {
		name string
		refs []fleet.BundleRef
		want string
	}{
		{"a ready dependency", []fleet.BundleRef{{Name: "crds"}}, ""},
		{"a failing dependency", []fleet.BundleRef{{Name: "db"}}, "Bundle db is ErrApplied"},
		{"by selector, each named", []fleet.BundleRef{byLabel}, "Bundle cache is NotReady; Bundle db is ErrApplied"},
		{"accepted states", []fleet.BundleRef{{Name: "drifted", AcceptedStates: []fleet.BundleState{fleet.Ready, fleet.Modified}}}, ""},
		{"Modified is not Ready by default", []fleet.BundleRef{{Name: "drifted"}}, "Bundle drifted is Modified"},
		{"not on this cluster", []fleet.BundleRef{{Name: "missing"}}, "Bundle missing has no BundleDeployment on this cluster"},
		{"a selector matching nothing", []fleet.BundleRef{{Selector: &metav1.LabelSelector{MatchLabels: tier("none")}}}, "a Bundle matching {tier=none} has no BundleDeployment on this cluster"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			app := deployment("app", "ws", fleet.WaitApplied, tier("db"), tc.refs...)
			unmet, err := unmetDependencies(app, append(cluster, app))
			if err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(unmet, "; "); got != tc.want {
				t.Errorf("unmet %q, want %q", got, tc.want)
			}
		})
	}
	t.Run("another workspace's Bundle of the same name does not count", func(t *testing.T) {
		app := deployment("app", "ws", fleet.WaitApplied, nil, fleet.BundleRef{Name: "shared"})
		unmet, _ := unmetDependencies(app, []*fleet.BundleDeployment{deployment("shared", "other", fleet.Ready, nil)})
		if len(unmet) != 1 {
			t.Errorf("unmet %q", unmet)
		}
	})
	t.Run("an empty reference is an error", func(t *testing.T) {
		app := deployment("app", "ws", fleet.WaitApplied, nil, fleet.BundleRef{})
		if _, err := unmetDependencies(app, nil); err == nil || !strings.Contains(err.Error(), "dependsOn[0]") {
			t.Errorf("error %v", err)
		}
	})
}
