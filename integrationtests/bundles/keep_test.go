package bundles

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

const keptBundle = `apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: %[1]s
  namespace: clusters
spec:
  defaultNamespace: %[1]s-app
  keepResources: %[2]t
  resources:
  - name: cm.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: %[1]s
      data:
        kept: "%[2]t"
  targets:
  - clusterName: %[3]s
`

// TestKeepResourcesLeavesTheObjects: deleting a Bundle with keepResources forgets its
// release downstream and leaves its objects; without it, the objects go with it.
func TestKeepResourcesLeavesTheObjects(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	d := register(t, hub, map[string]string{"keep": "dev"})[0]
	for name, keep := range map[string]bool{"kept": true, "removed": false} {
		hub.MustKubectl(fmt.Sprintf(keptBundle, name, keep, d.ClusterName), "apply", "-f", "-")
	}
	waitBundleReady(t, hub, "kept", "1/1")
	waitBundleReady(t, hub, "removed", "1/1")
	if out, err := d.Helm("list", "-A", "-q"); err != nil || !strings.Contains(out, "kept") || !strings.Contains(out, "removed") {
		t.Fatalf("releases before: %v\n%s", err, out)
	}

	hub.MustKubectl("", "-n", workspace, "delete", "bundles.fleet.cattle.io", "kept", "removed")
	framework.Eventually(t, "the releases to be gone and only the kept objects to stay", timeout, func(ctx context.Context) error {
		out, err := d.Helm("list", "-A", "-q", "--all")
		if err != nil {
			return err
		}
		if strings.Contains(out, "kept") || strings.Contains(out, "removed") {
			return fmt.Errorf("releases left: %s", out)
		}
		if _, err := d.Client().CoreV1().ConfigMaps("removed-app").Get(ctx, "removed", framework.Get); !apierrors.IsNotFound(err) {
			return fmt.Errorf("ConfigMap removed-app/removed: %v, want it deleted with its Bundle", err)
		}
		return nil
	})
	cm, err := d.Client().CoreV1().ConfigMaps("kept-app").Get(context.Background(), "kept", framework.Get)
	if err != nil {
		t.Fatalf("the kept ConfigMap is gone: %v", err)
	}
	if cm.Data["kept"] != "true" {
		t.Errorf("the kept ConfigMap holds %v", cm.Data)
	}
}
