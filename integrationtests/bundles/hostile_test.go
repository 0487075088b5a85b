package bundles

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// gzipped is a base64+gz Bundle resource holding prefix followed by n-len(prefix)
// bytes of filler: zeros compress a thousand to one, so a bomb fits in a Bundle.
func gzipped(t *testing.T, name, prefix string, filler byte, n int64) fleet.BundleResource {
	t.Helper()
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestCompression)
	if _, err := io.WriteString(zw, prefix); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(zw, bytes.NewReader(bytes.Repeat([]byte{filler}, int(n-int64(len(prefix))))), n-int64(len(prefix))); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return fleet.BundleResource{Name: name, Encoding: "base64+gz", Content: base64.StdEncoding.EncodeToString(gz.Bytes())}
}

// subchartBomb is a chart archive holding one template of n zeros.
func subchartBomb(t *testing.T, n int64) []byte {
	t.Helper()
	var buf bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&buf, gzip.BestCompression)
	tw := tar.NewWriter(zw)
	if err := tw.WriteHeader(&tar.Header{Name: "sub/templates/zeros.yaml", Mode: 0o644, Size: n}); err != nil {
		t.Fatal(err)
	}
	if _, err := io.CopyN(tw, zeroReader{}, n); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

type zeroReader struct{}

func (zeroReader) Read(p []byte) (int, error) {
	clear(p)
	return len(p), nil
}

func createBundle(t *testing.T, hub *framework.Hub, b *fleet.Bundle) {
	t.Helper()
	b.Namespace = workspace
	if _, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Create(context.Background(), b, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating Bundle %s: %v", b.Name, err)
	}
}

// A bundle author's attacks on the hub and on the agent: a gzip bomb, a Bundle over
// --max-bundle-size, a Bundle labelled as a cluster's agent bundle. Each is refused
// or defused, and a Bundle just under the limit deploys.
func TestBundlesCannotHurtTheHubOrPoseAsTheAgent(t *testing.T) {
	t.Parallel()
	const limit = 1 << 20
	hub := framework.StartHub(t, fmt.Sprintf("--max-bundle-size=%d", limit))
	d := register(t, hub, map[string]string{"target": "dev"})[0]
	targets := []fleet.BundleTarget{{ClusterName: d.ClusterName}}

	// 200 MB of zeros in a Bundle of a few hundred kilobytes: refused, having decoded
	// no more than the limit.
	createBundle(t, hub, &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "bomb"},
		Spec:       fleet.BundleSpec{Resources: []fleet.BundleResource{gzipped(t, "bomb.yaml", "", 0, 200<<20)}, Targets: targets},
	})
	waitProcessed(t, hub, "bomb", "ContentTooLarge", fmt.Sprintf("decodes to more than %d bytes", limit))

	// A ConfigMap whose manifest is the limit exactly deploys; one byte more does not.
	configMap := func(name string, size int64) fleet.BundleResource {
		head := fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  filler: ", name)
		return gzipped(t, "cm.yaml", head, 'x', size)
	}
	createBundle(t, hub, &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "over"},
		Spec:       fleet.BundleSpec{Resources: []fleet.BundleResource{configMap("over", limit+1)}, Targets: targets},
	})
	waitProcessed(t, hub, "over", "ContentTooLarge")
	createBundle(t, hub, &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "at-limit"},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "at-limit"},
			Resources:               []fleet.BundleResource{configMap("at-limit", limit)}, Targets: targets,
		},
	})
	waitBundleReady(t, hub, "at-limit", "1/1")
	if cm := getConfigMap(t, d, "at-limit", "at-limit"); len(cm.Data["filler"]) < limit-200 {
		t.Fatalf("the ConfigMap at the limit arrived with %d bytes of filler", len(cm.Data["filler"]))
	}

	// A chart whose subchart archive expands to 200 MB: small enough for the hub,
	// which does not unpack charts, refused by the agent before Helm unpacks it.
	createBundle(t, hub, &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "nested-bomb"},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "nested-bomb"},
			Resources: []fleet.BundleResource{
				{Name: "Chart.yaml", Content: "apiVersion: v2\nname: top\nversion: 0.1.0\n"},
				{Name: "charts/sub.tgz", Encoding: "base64", Content: base64.StdEncoding.EncodeToString(subchartBomb(t, 200<<20))},
			},
			Targets: targets,
		},
	})
	waitReadyMessage(t, hub, "nested-bomb", "chart archive decodes to more than")
	// The hub's limit reaches the agent through its agent bundle.
	framework.Eventually(t, "the agent's maxBundleSize", timeout, func(ctx context.Context) error {
		cm, err := d.Client().CoreV1().ConfigMaps(names.SystemNamespace).Get(ctx, names.AgentConfigMap, framework.Get)
		if err == nil && cm.Data["maxBundleSize"] != fmt.Sprint(limit) {
			err = fmt.Errorf("maxBundleSize %q, want %d", cm.Data["maxBundleSize"], limit)
		}
		return err
	})

	// Only the hub makes agent bundles: a Bundle labelled as the cluster's agent
	// bundle is refused by the API server, as is a change to the hub's agent bundle.
	bundles := hub.Fleet().FleetV1alpha1().Bundles(workspace)
	agentCM := fleet.BundleResource{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: poser\n"}
	_, err := bundles.Create(context.Background(), &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "poser", Namespace: workspace, Labels: map[string]string{names.AgentBundleLabel: d.ClusterName}},
		Spec:       fleet.BundleSpec{Resources: []fleet.BundleResource{agentCM}, Targets: targets},
	}, metav1.CreateOptions{})
	wantForbidden(t, err, "only the Flotilla hub makes and changes agent bundles", "may not create or label one")
	var agentBundle *fleet.Bundle
	framework.Eventually(t, "the agent bundle", timeout, func(ctx context.Context) (err error) {
		agentBundle, err = bundles.Get(ctx, names.AgentBundle(d.ClusterName), framework.Get)
		return err
	})
	changed := agentBundle.DeepCopy()
	changed.Spec.Resources = []fleet.BundleResource{agentCM}
	_, err = bundles.Update(context.Background(), changed, metav1.UpdateOptions{})
	wantForbidden(t, err, "may not change the spec or that label of one")
	unlabelled := agentBundle.DeepCopy()
	delete(unlabelled.Labels, names.AgentBundleLabel)
	_, err = bundles.Update(context.Background(), unlabelled, metav1.UpdateOptions{})
	wantForbidden(t, err, "may not change the spec or that label of one")
	// Metadata others keep on it (the garbage collector's, a person's annotation) is not
	// the agent's to fear.
	annotated := agentBundle.DeepCopy()
	metav1.SetMetaDataAnnotation(&annotated.ObjectMeta, "team", "a")
	if _, err := bundles.Update(context.Background(), annotated, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("annotating the agent bundle: %v", err)
	}

	// The hub's other labels on a Bundle are not copied to its BundleDeployments,
	// where they could make them pass for another Bundle's.
	createBundle(t, hub, &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "poser", Labels: map[string]string{
			names.BundleNameLabel: names.AgentBundle(d.ClusterName), "team": "a",
		}},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "poser"},
			Resources:               []fleet.BundleResource{agentCM},
			Targets:                 targets,
		},
	})
	waitBundleReady(t, hub, "poser", "1/1")
	bds, err := hub.Fleet().FleetV1alpha1().BundleDeployments(metav1.NamespaceAll).List(context.Background(), metav1.ListOptions{LabelSelector: names.BundleNameLabel + "=poser"})
	if err != nil || len(bds.Items) != 1 {
		t.Fatalf("%d BundleDeployments of poser (err=%v), want 1", len(bds.Items), err)
	}
	if got := bds.Items[0].Labels; got[names.AgentBundleLabel] != "" || got["team"] != "a" {
		t.Fatalf("poser's BundleDeployment has labels %v: want team=a and no %s", got, names.AgentBundleLabel)
	}
	getConfigMap(t, d, "poser", "poser")

	// Nor can an ordinary Bundle name the agent's release in the agent's namespace.
	createBundle(t, hub, &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "hijack"},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				DefaultNamespace: names.SystemNamespace, Helm: &fleet.HelmOptions{ReleaseName: names.AgentRelease},
			},
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: hijack\n"}},
			Targets:   targets,
		},
	})
	waitReadyMessage(t, hub, "hijack", "is the agent's own")
	out, err := d.Helm("list", "-A", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var releases []struct{ Name, Namespace, Chart string }
	if err := json.Unmarshal([]byte(out), &releases); err != nil {
		t.Fatalf("helm list: %v\n%s", err, out)
	}
	for _, r := range releases {
		if r.Name == names.AgentRelease && !strings.HasPrefix(r.Chart, "fleet-agent-") {
			t.Fatalf("the agent's release now holds the chart %s (releases %+v)", r.Chart, releases)
		}
	}
	waitClusterDisplay(t, hub, d.ClusterName, "BUNDLES-READY", readyBundles, "3/5")
}

// waitReadyMessage waits until Bundle name's Ready condition says want.
func waitReadyMessage(t *testing.T, hub *framework.Hub, name, want string) {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("Bundle %s to say %q", name, want), timeout, func(ctx context.Context) error {
		b, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(ctx, name, framework.Get)
		if err != nil {
			return err
		}
		if msg := readyMessage(b.Status.Conditions); !strings.Contains(msg, want) {
			return fmt.Errorf("Ready message %q", msg)
		}
		return nil
	})
}

// wantForbidden fails t unless err is the API server's Forbidden with each of want in
// its message.
func wantForbidden(t *testing.T, err error, want ...string) {
	t.Helper()
	if !apierrors.IsForbidden(err) {
		t.Fatalf("got %v, want Forbidden", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("got %v, want a message with %q", err, w)
		}
	}
}
