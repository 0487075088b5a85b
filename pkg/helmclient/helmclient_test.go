package helmclient

import (
	"testing"

	"k8s.io/client-go/rest"
)

// Objects without a namespace go into the release's namespace, which Helm reads from
// the getter's kubeconfig loader.
func TestGetterGivesTheReleaseNamespace(t *testing.T) {
	g := &getter{cfg: &rest.Config{Host: "https://127.0.0.1:1"}, namespace: "plain-app"}
	ns, _, err := g.ToRawKubeConfigLoader().Namespace()
	if err != nil || ns != "plain-app" {
		t.Fatalf("namespace %q, err %v; want plain-app", ns, err)
	}
}
