package migrate

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

func object(t *testing.T, doc string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	if err := yaml.Unmarshal([]byte(doc), &u.Object); err != nil {
		t.Fatal(err)
	}
	return u
}

var now = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func TestDecide(t *testing.T) {
	for _, tc := range []struct {
		name, resource, doc string
		want                Action
		reason              string
	}{
		{name: "a registered cluster", resource: "clusters", want: Copy,
			doc: "kind: Cluster\nmetadata: {name: c1, namespace: fleet-default}\nspec: {clientID: abc}\n"},
		{name: "Fleet's own cluster", resource: "clusters", want: Cannot, reason: "stays with Fleet",
			doc: "kind: Cluster\nmetadata: {name: local, namespace: fleet-local}\n"},
		{name: "an imported cluster", resource: "clusters", want: Copy,
			doc: "kind: Cluster\nmetadata: {name: c2, namespace: fleet-default}\nspec: {kubeConfigSecret: c2-kubeconfig}\n"},
		{name: "an imported cluster with its Secret in its own namespace", resource: "clusters", want: Copy,
			doc: "kind: Cluster\nmetadata: {name: c2, namespace: fleet-default}\nspec: {kubeConfigSecret: c2-kubeconfig, kubeConfigSecretNamespace: fleet-default}\n"},
		{name: "an imported cluster with its Secret elsewhere", resource: "clusters", want: Cannot, reason: "--kubeconfig-secret-namespaces capi",
			doc: "kind: Cluster\nmetadata: {name: c2, namespace: fleet-default}\nspec: {kubeConfigSecret: c2-kubeconfig, kubeConfigSecretNamespace: capi}\n"},
		{name: "a per-cluster namespace", resource: "bundles", want: Skip, reason: "Fleet's own namespace",
			doc: "kind: Bundle\nmetadata: {name: b, namespace: cluster-fleet-default-c1-0123abcd}\n"},
		{name: "a Bundle of fleet apply", resource: "bundles", want: Copy,
			doc: "kind: Bundle\nmetadata: {name: b, namespace: fleet-default}\nspec: {resources: [{name: a.yaml, content: x}]}\n"},
		{name: "a GitRepo's Bundle", resource: "bundles", want: Skip, reason: "GitRepo simple",
			doc: "kind: Bundle\nmetadata: {name: b, namespace: fleet-default, labels: {fleet.cattle.io/repo-name: simple}}\n"},
		{name: "a HelmOp's Bundle", resource: "bundles", want: Cannot, reason: "HelmOp",
			doc: "kind: Bundle\nmetadata: {name: b, namespace: fleet-default, labels: {fleet.cattle.io/fleet-helm-name: op}}\n"},
		{name: "an agent bundle", resource: "bundles", want: Skip, reason: "agent bundle",
			doc: "kind: Bundle\nmetadata: {name: fleet-agent-c1, namespace: fleet-default}\n"},
		{name: "a migration bundle", resource: "bundles", want: Skip, reason: "hub migrate",
			doc: "kind: Bundle\nmetadata: {name: fleet-agent-to-flotilla-c1, namespace: fleet-default}\n"},
		{name: "a migration bundle", resource: "bundles", want: Skip, reason: "hub migrate",
			doc: "kind: Bundle\nmetadata: {name: fleet-agent-to-flotilla-c1, namespace: fleet-default}\n"},
		{name: "contents in Fleet's storage", resource: "bundles", want: Cannot, reason: "spec.contentsId",
			doc: "kind: Bundle\nmetadata: {name: b, namespace: fleet-default}\nspec: {contentsId: s-123}\n"},
		{name: "a token", resource: "clusterregistrationtokens", want: Copy,
			doc: "kind: ClusterRegistrationToken\nmetadata: {name: t, namespace: fleet-default}\nspec: {ttl: 240h}\nstatus: {expires: '2026-12-08T12:00:00Z'}\n"},
		{name: "an expired token", resource: "clusterregistrationtokens", want: Skip, reason: "expired",
			doc: "kind: ClusterRegistrationToken\nmetadata: {name: t, namespace: fleet-default}\nstatus: {expires: '2026-12-07T11:00:00Z'}\n"},
		{name: "an import token", resource: "clusterregistrationtokens", want: Skip, reason: "imports",
			doc: "kind: ClusterRegistrationToken\nmetadata: {name: t, namespace: fleet-default, ownerReferences: [{apiVersion: fleet.cattle.io/v1alpha1, kind: Cluster, name: c2, uid: u}]}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, reason := Decide(tc.resource, object(t, tc.doc), now)
			if got != tc.want || !strings.Contains(reason, tc.reason) {
				t.Errorf("%s (%q), want %s with %q", got, reason, tc.want, tc.reason)
			}
		})
	}
}

func TestCopyOfKeepsTheSpecAndTheUsersMetadata(t *testing.T) {
	src := object(t, `apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterRegistrationToken
metadata:
  name: t
  namespace: fleet-default
  uid: 1234
  resourceVersion: "99"
  finalizers: [fleet.cattle.io/x]
  labels: {team: a, fleet.cattle.io/managed: "true", objectset.rio.cattle.io/hash: h}
  annotations: {kubectl.kubernetes.io/last-applied-configuration: "{}", note: kept}
spec: {ttl: 240h}
status: {expires: '2026-12-08T12:00:00Z', secretName: t-values}
`)
	got := CopyOf(src, now)
	if got.GetUID() != "" || got.GetResourceVersion() != "" || len(got.GetFinalizers()) != 0 || got.Object["status"] != nil {
		t.Errorf("server fields or status kept: %v", got.Object)
	}
	if l := got.GetLabels(); len(l) != 1 || l["team"] != "a" {
		t.Errorf("labels %v, want only team=a", l)
	}
	if a := got.GetAnnotations(); len(a) != 1 || a["note"] != "kept" {
		t.Errorf("annotations %v", a)
	}
	// The copy lasts as long as the original has left, not its whole ttl again.
	if ttl, _, _ := unstructured.NestedString(got.Object, "spec", "ttl"); ttl != "24h0m0s" {
		t.Errorf("ttl %q, want what is left, 24h0m0s", ttl)
	}
	src.Object["spec"].(map[string]interface{})["ttl"] = "1h"
	if ttl, _, _ := unstructured.NestedString(got.Object, "spec", "ttl"); ttl != "24h0m0s" {
		t.Error("the copy shares its spec with the original")
	}
}

func TestSecretsOf(t *testing.T) {
	for _, tc := range []struct {
		name, resource, doc string
		want                []string
	}{
		{name: "values behind a hash", resource: "bundles", want: []string{"b"},
			doc: "kind: Bundle\nmetadata: {name: b, namespace: w}\nspec: {valuesHash: abc}\n"},
		{name: "values in the Bundle", resource: "bundles",
			doc: "kind: Bundle\nmetadata: {name: b, namespace: w}\nspec: {helm: {values: {a: 1}}}\n"},
		{name: "an imported cluster's kubeconfig", resource: "clusters", want: []string{"c2-kubeconfig"},
			doc: "kind: Cluster\nmetadata: {name: c2, namespace: w}\nspec: {kubeConfigSecret: c2-kubeconfig}\n"},
		{name: "a registered cluster", resource: "clusters",
			doc: "kind: Cluster\nmetadata: {name: c1, namespace: w}\nspec: {clientID: abc}\n"},
		{name: "a GitRepo's credentials", resource: "gitrepos", want: []string{"git-auth", "helm-auth"},
			doc: "kind: GitRepo\nmetadata: {name: g, namespace: w}\nspec: {clientSecretName: git-auth, helmSecretName: helm-auth}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := SecretsOf(tc.resource, object(t, tc.doc)); strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("%v, want %v", got, tc.want)
			}
		})
	}
}

func TestMovesAgent(t *testing.T) {
	for _, tc := range []struct {
		name, doc string
		want      bool
	}{
		{name: "registered and reporting", want: true,
			doc: "kind: Cluster\nmetadata: {name: c}\nspec: {clientID: abc}\nstatus: {agent: {namespace: cattle-fleet-system, lastSeen: '2026-12-07T11:59:00Z'}}\n"},
		{name: "predefined, never registered", doc: "kind: Cluster\nmetadata: {name: c}\nspec: {clientID: abc}\n"},
		{name: "imported: the Flotilla hub moves it", doc: "kind: Cluster\nmetadata: {name: c}\nspec: {clientID: abc, kubeConfigSecret: c-kubeconfig}\nstatus: {agent: {namespace: cattle-fleet-system, lastSeen: '2026-12-07T11:59:00Z'}}\n"},
		{name: "no clientID", doc: "kind: Cluster\nmetadata: {name: c}\nstatus: {agent: {namespace: cattle-fleet-system}}\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := MovesAgent(object(t, tc.doc)); got != tc.want {
				t.Errorf("%t, want %t", got, tc.want)
			}
		})
	}
}

func TestTheMigrationBundleDeploysFlotillasAgentOverFleets(t *testing.T) {
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "fleet-default"}, Spec: fleet.ClusterSpec{ClientID: "abc"}}
	values := registration.Values{Token: "tok", TokenName: "migrate-c1", APIServerURL: "https://flotilla:6443", ClusterNamespace: "fleet-default", SystemRegistrationNamespace: "cattle-fleet-clusters-system"}
	u, err := migrationBundleFor(cluster, values)
	if err != nil {
		t.Fatal(err)
	}
	var b fleet.Bundle
	data, _ := yaml.Marshal(u.Object)
	if err := yaml.Unmarshal(data, &b); err != nil {
		t.Fatal(err)
	}
	if b.Name != "fleet-agent-to-flotilla-c1" || b.Namespace != "fleet-default" {
		t.Errorf("named %s/%s", b.Namespace, b.Name)
	}
	h := b.Spec.Helm
	if h == nil || h.ReleaseName != names.AgentRelease || !h.TakeOwnership || b.Spec.DefaultNamespace != names.SystemNamespace {
		t.Fatalf("helm options %+v, namespace %s", h, b.Spec.DefaultNamespace)
	}
	if h.Values.Data["token"] != "tok" || h.Values.Data["apiServerURL"] != "https://flotilla:6443" || h.Values.Data["clientID"] != "abc" {
		t.Errorf("values %v", h.Values.Data)
	}
	if len(b.Spec.Targets) != 1 || b.Spec.Targets[0].ClusterName != "c1" || b.Spec.Targets[0].ClusterSelector != nil {
		t.Errorf("targets %+v, want cluster c1 alone", b.Spec.Targets)
	}
	hasChart := false
	for _, r := range b.Spec.Resources {
		hasChart = hasChart || r.Name == "Chart.yaml"
	}
	if !hasChart {
		t.Error("no Chart.yaml among the resources")
	}
}
