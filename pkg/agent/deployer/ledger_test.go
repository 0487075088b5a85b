package deployer

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sfake "k8s.io/client-go/kubernetes/fake"

	"github.com/flotilla/flotilla/pkg/names"
)

func TestLedger(t *testing.T) {
	ctx := context.Background()
	legacy := []made{{Namespace: "old", Release: "old-app", BundleDeployment: "old-app", KeepResources: true}}
	kube := k8sfake.NewClientset()
	l := &ledger{kube: kube, namespace: "agent-ns", legacy: func() ([]made, error) { return legacy, nil }}

	t.Run("made from the labelled releases the first time", func(t *testing.T) {
		got, err := l.find(func(made) bool { return true })
		if err != nil || len(got) != 1 || got[0] != legacy[0] {
			t.Fatalf("entries %+v, %v", got, err)
		}
	})
	t.Run("a namespace the agent created stays its doing across upgrades", func(t *testing.T) {
		app := made{Namespace: "tenant", Release: "app", BundleDeployment: "app", ServiceAccount: "deployer", DeleteNamespace: true}
		created := app
		created.CreatedNamespace = true
		if err := l.record(created); err != nil {
			t.Fatal(err)
		}
		if err := l.record(app); err != nil {
			t.Fatal(err)
		}
		got, _ := l.find(func(m made) bool { return m.BundleDeployment == "app" })
		if len(got) != 1 || !got[0].CreatedNamespace || got[0].ServiceAccount != "deployer" {
			t.Fatalf("entries %+v", got)
		}
	})
	t.Run("read back by a new agent, forged entries left out", func(t *testing.T) {
		cm, err := kube.CoreV1().ConfigMaps("agent-ns").Get(ctx, names.AgentReleasesConfigMap, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		// An entry whose key is not its release's, and one that is not JSON.
		cm.Data["kube-system.victim"] = `{"namespace":"tenant","release":"app","bundleDeployment":"app"}`
		cm.Data["garbage"] = `{`
		if _, err := kube.CoreV1().ConfigMaps("agent-ns").Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		again := &ledger{kube: kube, namespace: "agent-ns", legacy: func() ([]made, error) { t.Fatal("made again"); return nil, nil }}
		got, err := again.find(func(made) bool { return true })
		if err != nil || len(got) != 2 {
			t.Fatalf("entries %+v, %v", got, err)
		}
		if err := again.forget(got[0]); err != nil {
			t.Fatal(err)
		}
		cm, _ = kube.CoreV1().ConfigMaps("agent-ns").Get(ctx, names.AgentReleasesConfigMap, metav1.GetOptions{})
		if len(cm.Data) != 1 {
			t.Errorf("after forgetting one of two: %v", cm.Data)
		}
	})
	t.Run("written again when someone deleted it", func(t *testing.T) {
		if err := kube.CoreV1().ConfigMaps("agent-ns").Delete(ctx, names.AgentReleasesConfigMap, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		l.legacy = func() ([]made, error) { return nil, nil }
		if err := l.record(made{Namespace: "x", Release: "y", BundleDeployment: "y"}); err != nil {
			t.Fatal(err)
		}
		var cm *corev1.ConfigMap
		cm, err := kube.CoreV1().ConfigMaps("agent-ns").Get(ctx, names.AgentReleasesConfigMap, metav1.GetOptions{})
		if err != nil || len(cm.Data) != 3 {
			t.Fatalf("%v %v", cm, err)
		}
	})
}

func TestReleasesOfAnotherHubAreNotItsOrphans(t *testing.T) {
	for _, tc := range []struct {
		name, made, hub string
		want            bool
	}{
		{"recorded before hubs were", "", "https://hub-a", true},
		{"this hub's", "https://hub-a", "https://hub-a", true},
		{"the hub the cluster moved from", "https://hub-a", "https://hub-b", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ofHub(made{Hub: tc.made}, tc.hub); got != tc.want {
				t.Fatalf("ofHub = %v, want %v", got, tc.want)
			}
		})
	}
}
