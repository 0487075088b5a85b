package bundle

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/intstr"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestUnsupportedFieldsAreNamed(t *testing.T) {
	one := intstr.FromInt32(1)
	cases := []struct {
		name string
		spec fleet.BundleSpec
		want string
	}{
		{"nothing unsupported", fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "x", CorrectDrift: &fleet.CorrectDrift{Enabled: true}}}, ""},
		{"rolloutStrategy", fleet.BundleSpec{RolloutStrategy: &fleet.RolloutStrategy{MaxUnavailable: &one}}, "spec.rolloutStrategy"},
		{"dependsOn", fleet.BundleSpec{DependsOn: []fleet.BundleRef{{Name: "crds"}}}, "spec.dependsOn"},
		{"serviceAccount", fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{ServiceAccount: "deployer"}}, "spec.serviceAccount"},
		{"serviceAccount in a target", fleet.BundleSpec{Targets: []fleet.BundleTarget{{}, {Name: "prod", BundleDeploymentOptions: fleet.BundleDeploymentOptions{ServiceAccount: "x"}}}}, "spec.targets[prod].serviceAccount"},
		{"keepResources is done", fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{KeepResources: true}}, ""},
		{"ignore.conditions in an unnamed target", fleet.BundleSpec{Targets: []fleet.BundleTarget{{BundleDeploymentOptions: fleet.BundleDeploymentOptions{IgnoreOptions: fleet.IgnoreOptions{Conditions: []map[string]string{{"type": "Progressing"}}}}}}}, "spec.targets[target000].ignore.conditions"},
		{"keepFailHistory", fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{CorrectDrift: &fleet.CorrectDrift{Enabled: true, KeepFailHistory: true}}}, "spec.correctDrift.keepFailHistory"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := unsupported(&tc.spec)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one naming %s", err, tc.want)
			}
		})
	}
}
