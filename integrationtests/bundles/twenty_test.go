package bundles

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

// TestTwentyClustersGetABundle: twenty agents (in namespaces of one downstream control
// plane, as twenty clusters would not fit on one machine) register, then one Bundle
// targets all of them, each with its own namespace through a target of its own.
// It reports the time from creating the Bundle to all its BundleDeployments Ready.
func TestTwentyClustersGetABundle(t *testing.T) {
	t.Parallel()
	const n = 20
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "downstream")
	values, err := framework.ReadValues(hub.CreateToken(workspace, "token", ""))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	client := ds.Client()
	framework.StartAgentsSharingACluster(t, ds, values, n, map[string]string{"monitorInterval": "5s"})
	var clusters []string
	framework.Eventually(t, "twenty Clusters Ready", 3*time.Minute, func(ctx context.Context) error {
		list, err := hub.Fleet().FleetV1alpha1().Clusters(workspace).List(ctx, metav1.ListOptions{LabelSelector: "fleet=twenty"})
		if err != nil {
			return err
		}
		clusters = clusters[:0]
		for i := range list.Items {
			if readyCondition(&list.Items[i]) == "True" {
				clusters = append(clusters, list.Items[i].Name)
			}
		}
		if len(clusters) != n {
			return fmt.Errorf("%d of %d Ready", len(clusters), n)
		}
		return nil
	})

	var targets strings.Builder
	for i, c := range clusters {
		fmt.Fprintf(&targets, "  - clusterName: %s\n    defaultNamespace: app-%02d\n", c, i)
	}
	start := time.Now()
	hub.MustKubectl(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: twenty
  namespace: clusters
spec:
  resources:
  - name: cm.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: twenty
      data:
        hello: world
  targets:
`+targets.String(), "apply", "-f", "-")
	waitBundleReady(t, hub, "twenty", fmt.Sprintf("%d/%d", n, n))
	t.Logf("Bundle created to all %d BundleDeployments Ready: %s", n, time.Since(start).Round(time.Millisecond))
	for i := 0; i < n; i++ {
		if _, err := client.CoreV1().ConfigMaps(fmt.Sprintf("app-%02d", i)).Get(ctx, "twenty", framework.Get); err != nil {
			t.Errorf("app-%02d: %v", i, err)
		}
	}
}
