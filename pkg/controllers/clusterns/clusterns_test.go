package clusterns

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

func TestOwns(t *testing.T) {
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "prod", UID: "uid-1"}}
	legacyCluster := cluster.DeepCopy()
	legacyCluster.Status.Namespace = names.LegacyClusterNamespace("clusters", "prod")
	namespace := func(name string, labels map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	ours := map[string]string{names.ClusterLabel: "prod", names.ClusterNamespaceLabel: "clusters"}
	withUID := func(uid string) map[string]string {
		l := map[string]string{names.ClusterUIDLabel: uid}
		for k, v := range ours {
			l[k] = v
		}
		return l
	}
	for _, tc := range []struct {
		name    string
		ns      *corev1.Namespace
		cluster *fleet.Cluster
		want    bool
	}{
		{"made by the hub for it", namespace(names.ClusterNamespace("clusters", "prod"), withUID("uid-1")), cluster, true},
		{"made for an earlier Cluster of the name", namespace(names.ClusterNamespace("clusters", "prod"), withUID("uid-0")), cluster, false},
		{"made by someone who copied the name labels", namespace(names.ClusterNamespace("clusters", "prod"), ours), cluster, false},
		{"made by someone, unlabelled", namespace(names.ClusterNamespace("clusters", "prod"), nil), cluster, false},
		{"another Cluster's", namespace(names.ClusterNamespace("clusters", "dev"), withUID("uid-1")), cluster, false},
		{"legacy, made by an earlier hub", namespace(names.LegacyClusterNamespace("clusters", "prod"), ours), legacyCluster, true},
		{"legacy, of an earlier Cluster", namespace(names.LegacyClusterNamespace("clusters", "prod"), withUID("uid-0")), legacyCluster, false},
		{"legacy name, Cluster not recorded in it", namespace(names.LegacyClusterNamespace("clusters", "prod"), ours), cluster, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Owns(tc.ns, tc.cluster); got != tc.want {
				t.Fatalf("Owns = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestNameKeepsALegacyNamespace(t *testing.T) {
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "clusters", Name: "prod"}}
	if got := Name(cluster); got != names.ClusterNamespace("clusters", "prod") {
		t.Errorf("a new Cluster's namespace is %s", got)
	}
	cluster.Status.Namespace = names.LegacyClusterNamespace("clusters", "prod")
	if got := Name(cluster); got != cluster.Status.Namespace {
		t.Errorf("a Cluster with a legacy namespace moves to %s", got)
	}
	cluster.Status.Namespace = "kube-system"
	if got := Name(cluster); got != names.ClusterNamespace("clusters", "prod") {
		t.Errorf("a Cluster whose status names another namespace gets %s", got)
	}
}
