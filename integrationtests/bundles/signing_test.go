package bundles

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/signing"
)

// signingBundle is a Bundle as its author writes it: a ConfigMap whose data says
// which version it is.
func signingBundle(name, data string) string {
	return fmt.Sprintf(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: %[1]s
  namespace: %[3]s
spec:
  defaultNamespace: %[1]s
  resources:
  - name: cm.yaml
    content: |
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: %[1]s
      data:
        version: %[2]q
  targets:
  - clusterSelector: {}
`, name, data, workspace)
}

// hubCLI runs the hub binary's user commands, as an author does.
func hubCLI(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(framework.BinDir(t), "hub"), args...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if exit, ok := err.(*exec.ExitError); ok {
			stderr = string(exit.Stderr)
		}
		t.Fatalf("hub %s: %v\n%s%s", strings.Join(args, " "), err, out, stderr)
	}
	return string(out)
}

// applyBundle creates or replaces a Bundle from YAML, as kubectl apply would.
func applyBundle(t *testing.T, hub *framework.Hub, manifest string) {
	t.Helper()
	var b fleet.Bundle
	if err := yaml.Unmarshal([]byte(manifest), &b); err != nil {
		t.Fatalf("%v\n%s", err, manifest)
	}
	b.Status = fleet.BundleStatus{}
	bundles := hub.Fleet().FleetV1alpha1().Bundles(workspace)
	have, err := bundles.Get(context.Background(), b.Name, framework.Get)
	switch {
	case apierrors.IsNotFound(err):
		_, err = bundles.Create(context.Background(), &b, metav1.CreateOptions{})
	case err == nil:
		b.ResourceVersion = have.ResourceVersion
		_, err = bundles.Update(context.Background(), &b, metav1.UpdateOptions{})
	}
	if err != nil {
		t.Fatalf("applying Bundle %s: %v", b.Name, err)
	}
}

// agentRevision is the revision of the agent's own release in d.
func agentRevision(t *testing.T, d *downstream) int {
	t.Helper()
	status, err := d.Helm("-n", names.SystemNamespace, "status", names.AgentRelease, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var release struct{ Version int }
	if err := json.Unmarshal([]byte(status), &release); err != nil {
		t.Fatalf("helm status: %v\n%s", err, status)
	}
	return release.Version
}

// waitRefused waits until the agent refuses the Bundle's deployment with reason, and
// the Bundle shows why.
func waitRefused(t *testing.T, hub *framework.Hub, name, reason, message string) {
	t.Helper()
	framework.Eventually(t, fmt.Sprintf("Bundle %s to be refused %s", name, reason), timeout, func(ctx context.Context) error {
		bds, err := hub.Fleet().FleetV1alpha1().BundleDeployments(metav1.NamespaceAll).List(ctx, metav1.ListOptions{LabelSelector: names.BundleNameLabel + "=" + name})
		if err != nil {
			return err
		}
		if len(bds.Items) != 1 {
			return fmt.Errorf("%d BundleDeployments", len(bds.Items))
		}
		bd := bds.Items[0]
		c := conditions.Get(bd.Status.Conditions, "Deployed")
		if c == nil || c.Status != "False" || c.Reason != reason || bd.Status.Display.State != string(fleet.ErrApplied) {
			return fmt.Errorf("Deployed condition %+v, state %q", c, bd.Status.Display.State)
		}
		b, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(ctx, name, framework.Get)
		if err != nil {
			return err
		}
		if msg := readyMessage(b.Status.Conditions); !strings.Contains(msg, message) {
			return fmt.Errorf("Bundle Ready message %q, want %q", msg, message)
		}
		return nil
	})
}

// An agent installed with trusted keys deploys only what their holder signed: a
// Bundle that is unsigned, signed by another key, or changed on the hub after it
// was signed is refused with its reason on the Bundle, and nothing of it reaches
// the cluster; signing it again deploys it. The agent bundle still upgrades the agent.
func TestAgentsWithTrustedKeysDeployOnlySignedBundles(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	dir := t.TempDir()
	key, otherKey := filepath.Join(dir, "release.key"), filepath.Join(dir, "other.key")
	hubCLI(t, "", "bundle", "keygen", key)
	hubCLI(t, "", "bundle", "keygen", otherKey)
	d := register(t, hub, map[string]string{"trusting": "prod"}, "--set-file", "trustedKeys="+key+".pub")[0]

	// Signed by the trusted key: deployed.
	applyBundle(t, hub, hubCLI(t, signingBundle("signed", "1"), "bundle", "sign", "--key", key))
	waitBundleReady(t, hub, "signed", "1/1")
	if got := getConfigMap(t, d, "signed", "signed").Data["version"]; got != "1" {
		t.Fatalf("version %q, want 1", got)
	}

	// Unsigned, and signed by a key the cluster does not trust: refused.
	applyBundle(t, hub, signingBundle("unsigned", "1"))
	waitRefused(t, hub, "unsigned", signing.ReasonUnsigned, "not signed")
	applyBundle(t, hub, hubCLI(t, signingBundle("other", "1"), "bundle", "sign", "--key", otherKey))
	waitRefused(t, hub, "other", signing.ReasonUntrustedKey, "does not trust")

	// Someone who may write Bundles changes the signed one, keeping its signature.
	signed, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(context.Background(), "signed", framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	tampered := signed.DeepCopy()
	tampered.Spec.Resources[0].Content = strings.Replace(tampered.Spec.Resources[0].Content, `version: "1"`, `version: "evil"`, 1)
	if _, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Update(context.Background(), tampered, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRefused(t, hub, "signed", signing.ReasonNotSigned, "changed after it was signed")
	// Or a customisation for the cluster's target, with the same signature.
	applyBundle(t, hub, hubCLI(t, signingBundle("custom", "1"), "bundle", "sign", "--key", key))
	waitBundleReady(t, hub, "custom", "1/1")
	custom, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Get(context.Background(), "custom", framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	custom.Spec.Targets[0].DefaultNamespace = "kube-system"
	if _, err := hub.Fleet().FleetV1alpha1().Bundles(workspace).Update(context.Background(), custom, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitRefused(t, hub, "custom", signing.ReasonNotSigned, "changed after it was signed")

	// None of the refused content reached the cluster.
	for _, ns := range []string{"unsigned", "other"} {
		if _, err := d.Client().CoreV1().ConfigMaps(ns).Get(context.Background(), ns, framework.Get); !apierrors.IsNotFound(err) {
			t.Errorf("ConfigMap %s/%s: %v, want NotFound", ns, ns, err)
		}
	}
	if got := getConfigMap(t, d, "signed", "signed").Data["version"]; got != "1" {
		t.Errorf("the tampered Bundle changed the ConfigMap to version %q", got)
	}
	if _, err := d.Client().CoreV1().ConfigMaps("kube-system").Get(context.Background(), "custom", framework.Get); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap kube-system/custom: %v, want NotFound", err)
	}

	// The author signs the new version: deployed.
	applyBundle(t, hub, hubCLI(t, signingBundle("signed", "2"), "bundle", "sign", "--key", key))
	waitBundleReady(t, hub, "signed", "1/1")
	framework.Eventually(t, "version 2 downstream", timeout, func(ctx context.Context) error {
		cm, err := d.Client().CoreV1().ConfigMaps("signed").Get(ctx, "signed", framework.Get)
		if err == nil && cm.Data["version"] != "2" {
			err = fmt.Errorf("version %q", cm.Data["version"])
		}
		return err
	})

	// The agent bundle, the hub's own, is not signed and still deploys; and the agent
	// keeps its owner's keys through it.
	waitClusterDisplay(t, hub, d.ClusterName, "BUNDLES-READY", readyBundles, "2/5")
	revision := agentRevision(t, d)
	if revision < 2 {
		t.Fatalf("the agent bundle did not upgrade the agent's release (revision %d)", revision)
	}

	// Whoever may write the Cluster on the hub sets its agent's image registry: the
	// agent bundle changes, but a trusting agent keeps the image its owner installed.
	framework.Eventually(t, "the Cluster's privateRepoURL", timeout, func(ctx context.Context) error {
		c, err := getCluster(ctx, hub, d.ClusterName)
		if err != nil {
			return err
		}
		c.Spec.PrivateRepoURL = "evil.example"
		_, err = hub.Fleet().FleetV1alpha1().Clusters(workspace).Update(ctx, c, metav1.UpdateOptions{})
		return err
	})
	framework.Eventually(t, "the agent bundle to be deployed again", timeout, func(context.Context) error {
		if now := agentRevision(t, d); now <= revision {
			return fmt.Errorf("revision %d", now)
		}
		return nil
	})
	values, err := d.Helm("-n", names.SystemNamespace, "get", "values", names.AgentRelease, "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(values, "evil.example") {
		t.Fatalf("the Cluster's privateRepoURL reached the trusting agent's release: %s", values)
	}
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(values, strings.ReplaceAll(strings.TrimSpace(string(pub)), "\n", `\n`)) {
		t.Fatalf("the agent's release lost its trusted keys: %s", values)
	}
}
