package agentbundle

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/pkg/agentchart"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

func TestAMovingClusterCarriesTheNewHubsValues(t *testing.T) {
	valid := `{"token":"t","tokenName":"move-c","apiServerURL":"https://new-hub:6443","clusterNamespace":"clusters","systemRegistrationNamespace":"cattle-fleet-clusters-system"}`
	for _, tc := range []struct {
		name, annotation, err string
		token                 bool
	}{
		{name: "not moving"},
		{name: "moving", annotation: valid, token: true},
		{name: "not JSON", annotation: "token: t", err: "annotation fleet.cattle.io/move-to"},
		{name: "incomplete", annotation: `{"token":"t"}`, err: "registration values lack"},
		{name: "too large", annotation: strings.Repeat(" ", maxMoveValues+1) + valid, err: "more than the"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "clusters"}}
			if tc.annotation != "" {
				cluster.Annotations = map[string]string{names.MoveToAnnotation: tc.annotation}
			}
			b, err := Desired(cluster, "s-chart", agentchart.Hub{})
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err %v, want one saying %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			values := b.Spec.Helm.Values.Data
			if _, ok := values["token"]; ok != tc.token {
				t.Fatalf("values %v: token there %v, want %v", values, ok, tc.token)
			}
			if tc.token && values["apiServerURL"] != "https://new-hub:6443" {
				t.Fatalf("apiServerURL %v", values["apiServerURL"])
			}
		})
	}
}
