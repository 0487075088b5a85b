package bundle

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

func TestViolatesPolicy(t *testing.T) {
	policy := func(name, ns string, require bool, allowed ...string) *fleet.Policy {
		return &fleet.Policy{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, RequireServiceAccount: require, AllowedServiceAccounts: allowed}
	}
	withSA := func(sa string, targets ...fleet.BundleTarget) *fleet.Bundle {
		b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ws"}}
		b.Spec.ServiceAccount = sa
		b.Spec.Targets = targets
		return b
	}
	target := func(name, sa string) fleet.BundleTarget {
		t := fleet.BundleTarget{Name: name, ClusterSelector: &metav1.LabelSelector{}}
		t.ServiceAccount = sa
		return t
	}
	require := []*fleet.Policy{policy("tenants", "ws", true)}
	allow := []*fleet.Policy{policy("a", "ws", false, "deployer"), policy("b", "ws", false, "reader")}
	agent := withSA("", fleet.BundleTarget{ClusterName: "c1"})
	agent.Name = names.AgentBundle("c1")
	agent.Labels = map[string]string{names.AgentBundleLabel: "c1"}
	agent.OwnerReferences = []metav1.OwnerReference{{Kind: "Cluster", Name: "c1"}}
	labelledOnly := withSA("", target("all", ""))
	labelledOnly.Labels = map[string]string{names.AgentBundleLabel: "c1"}
	for _, tc := range []struct {
		name     string
		bundle   *fleet.Bundle
		policies []*fleet.Policy
		want     string
	}{
		{"no Policy", withSA("", target("all", "")), nil, ""},
		{"another namespace's Policy", withSA("", target("all", "")), []*fleet.Policy{policy("p", "other", true)}, ""},
		{"required and given", withSA("deployer", target("all", "")), require, ""},
		{"required and given per target", withSA("", target("dev", "dev-sa"), target("prod", "prod-sa")), require, ""},
		{"required, missing", withSA("", target("all", "")), require, "Policy tenants: spec.targets[all] has no serviceAccount, and one is required"},
		{"required, missing in one target", withSA("", target("dev", "dev-sa"), target("prod", "")), require, "spec.targets[prod] has no serviceAccount"},
		{"a target that deploys nothing needs none", withSA("", target("dev", "dev-sa"), fleet.BundleTarget{Name: "skip", DoNotDeploy: true}), require, ""},
		{"allowed by either Policy", withSA("reader", target("all", "")), allow, ""},
		{"not allowed", withSA("admin", target("all", "")), allow, `Policy a, b: spec: serviceAccount "admin" is not among the allowed deployer, reader`},
		{"not allowed in a target", withSA("reader", target("prod", "admin")), allow, `spec.targets[prod]: serviceAccount "admin"`},
		{"allowed lists alone do not require one", withSA("", target("all", "")), allow, ""},
		{"agent bundles are the hub's", agent, require, ""},
		{"the agent bundle label alone is not enough", labelledOnly, require, "has no serviceAccount"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := violatesPolicy(tc.bundle, tc.policies)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %q", err, tc.want)
			}
		})
	}
}
