package names

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
)

func TestDerivedNamesAreValidAndStable(t *testing.T) {
	long := strings.Repeat("w", 63)
	cases := map[string]string{
		"cluster":           ClusterForClientID("d2a4c9ee-0d0b-4a61-9a1c-55b0a7a1c2f3"),
		"namespace":         ClusterNamespace("clusters", "my-cluster"),
		"long namespace":    ClusterNamespace(long, long),
		"credential":        CredentialSecret("id", "random"),
		"status role":       ClusterStatusRole(long),
		"contents binding":  ContentsBinding(ClusterNamespace(long, long)),
		"limited":           Limit(strings.Repeat("a-", 40), 63),
		"client id hash":    ClientIDHash("x"),
		"cluster from long": ClusterForClientID(long + long),
	}
	for what, name := range cases {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			t.Errorf("%s %q: %v", what, name, errs)
		}
	}
	// A token's ServiceAccount is a DNS subdomain named "<token>-registration" where
	// that fits, as the registration requests' admission policy expects.
	if got := TokenServiceAccount(long); got != long+"-registration" {
		t.Errorf("TokenServiceAccount(%q) = %q", long, got)
	}
	for _, token := range []string{long, strings.Repeat("t", 253)} {
		if errs := validation.IsDNS1123Subdomain(TokenServiceAccount(token)); len(errs) > 0 {
			t.Errorf("token SA of a %d-character token: %v", len(token), errs)
		}
	}
	if got := ClusterForClientID("really-random"); got != ClusterForClientID("really-random") || len(got) != len("cluster-")+12 {
		t.Errorf("ClusterForClientID is not a stable cluster-<12 hex>: %q", got)
	}
	if ClusterNamespace("a-b", "c") == ClusterNamespace("a", "b-c") {
		t.Error("different workspace/cluster pairs share a namespace")
	}
	if !strings.HasPrefix(ClusterNamespace("clusters", "my-cluster"), "cluster-clusters-my-cluster-") {
		t.Errorf("namespace %q does not read cluster-<workspace>-<cluster>-<hash>", ClusterNamespace("clusters", "my-cluster"))
	}
	for _, ns := range []string{ClusterNamespace("clusters", "my-cluster"), ClusterNamespace(long, long),
		LegacyClusterNamespace("clusters", "my-cluster"), LegacyClusterNamespace(long, long)} {
		if !IsClusterNamespace(ns) {
			t.Errorf("IsClusterNamespace(%q) is false", ns)
		}
		if !IsClusterNamespaceOf(ns, "clusters", "my-cluster") && !IsClusterNamespaceOf(ns, long, long) {
			t.Errorf("IsClusterNamespaceOf(%q) is false for its own Cluster", ns)
		}
	}
	// 64 bits of hash: Clusters whose names are cut short cannot be made to share a
	// namespace by trying names.
	if ns := ClusterNamespace(long, long); !isHex(ns[len(ns)-16:]) || ns[len(ns)-17] != '-' {
		t.Errorf("namespace %q does not end in 16 hex digits", ns)
	}
	if IsClusterNamespaceOf(ClusterNamespace(long, long+"x"), long, long) {
		t.Error("a Cluster whose name differs after the cut owns the other's namespace")
	}
	for _, ns := range []string{"clusters", "cluster-", "cluster-abcdef12", "cluster-x-abcdef1", "cluster-x-ABCDEF12", "cluster-x_abcdef12", "kube-system"} {
		if IsClusterNamespace(ns) {
			t.Errorf("IsClusterNamespace(%q) is true", ns)
		}
	}
	if CredentialSecret("a", "bc") == CredentialSecret("ab", "c") {
		t.Error("credential names collide when clientID and clientRandom are split differently")
	}
}
