package deployer

import (
	"testing"

	"helm.sh/helm/v3/pkg/release"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

func TestKeepResourcesIsRecordedOnTheRelease(t *testing.T) {
	for _, keep := range []bool{true, false} {
		bd := &fleet.BundleDeployment{}
		bd.Name = "app"
		bd.Spec.DeploymentID = "s-1:2"
		bd.Spec.Options.KeepResources = keep
		rel := &release.Release{Labels: releaseLabels(bd)}
		if got := keepsResources(rel); got != keep {
			t.Errorf("keepResources %v: the release says %v (labels %v)", keep, got, rel.Labels)
		}
	}
}
