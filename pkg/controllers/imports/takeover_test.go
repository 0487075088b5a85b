package imports

import (
	"slices"
	"testing"
)

func TestDecideTakeover(t *testing.T) {
	const ns = "cattle-fleet-system"
	fleetRelease := func(kind, name, release string) existingObject {
		return existingObject{kind: kind, namespace: ns, name: name, annotations: map[string]string{
			releaseNameAnnotation: release, releaseSpaceAnnotation: ns, objectSetAnnotation: "fleet-agent-bootstrap"}}
	}
	applied := func(kind, name string) existingObject {
		return existingObject{kind: kind, namespace: ns, name: name, annotations: map[string]string{objectSetAnnotation: "fleet-agent-bootstrap"}}
	}
	ours := existingObject{kind: "ServiceAccount", namespace: ns, name: "fleet-agent", annotations: map[string]string{
		releaseNameAnnotation: "fleet-agent", releaseSpaceAnnotation: ns}}
	users := existingObject{kind: "ClusterRoleBinding", name: "fleet-agent-" + ns}

	for _, tc := range []struct {
		name     string
		existing []existingObject
		adopt    bool
		releases []string
		fleets   int
	}{
		{name: "a clean cluster", adopt: false},
		{name: "left by the hub's own release", existing: []existingObject{ours}, adopt: false},
		{name: "Fleet's imported agent", existing: []existingObject{
			fleetRelease("Deployment", "fleet-agent", "fleet-agent-c1"), fleetRelease("ConfigMap", "fleet-agent", "fleet-agent-c1")},
			adopt: true, releases: []string{"fleet-agent-c1"}, fleets: 2},
		{name: "Fleet's release gone halfway, its applied objects left", existing: []existingObject{applied("ConfigMap", "fleet-agent")},
			adopt: true, fleets: 1},
		{name: "Fleet's objects beside the hub's own", existing: []existingObject{applied("ConfigMap", "fleet-agent"), ours},
			adopt: true, fleets: 1},
		{name: "a user's object is never adopted", existing: []existingObject{fleetRelease("Deployment", "fleet-agent", "fleet-agent-c1"), users},
			adopt: false},
		{name: "a fleet-agent- release of another namespace is not Fleet's agent", existing: []existingObject{{kind: "ConfigMap", namespace: ns, name: "fleet-agent",
			annotations: map[string]string{releaseNameAnnotation: "fleet-agent-app", releaseSpaceAnnotation: "apps"}}},
			adopt: false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := decideTakeover(tc.existing, ns)
			if got.adopt != tc.adopt || !slices.Equal(got.fleetReleases, tc.releases) || len(got.fleets) != tc.fleets {
				t.Errorf("decideTakeover = %+v, want adopt %v, releases %v, %d of Fleet's objects", got, tc.adopt, tc.releases, tc.fleets)
			}
		})
	}
}
