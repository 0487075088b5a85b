package conformance

import (
	"context"
	"fmt"
	"io"
	"log"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	ggcrregistry "github.com/google/go-containerregistry/pkg/registry"
	"helm.sh/helm/v3/pkg/registry"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/flotilla/flotilla/integrationtests/framework"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// deployWorkspace is where tests/test.sh applies the multi-cluster examples; the
// single-cluster ones go there too, to the cluster group "default" of all clusters.
const deployWorkspace = "fleet-default"

// TestFleetExamplesDeployToLabelledClusters applies every example of fleet-examples
// with `hub apply` to a hub with three downstream clusters labelled env=dev, test and
// prod, and finds downstream, in each, every object Fleet's expected output has for
// its environment. Two more Bundles take the guestbook chart from a chart repository
// that wants basic auth and from an OCI registry that does.
func TestFleetExamplesDeployToLabelledClusters(t *testing.T) {
	repo := newChartRepository(t)
	hub, clusters := startHubWithLabelledClusters(t)

	bundles := map[string]bool{}
	for _, ex := range examples(t) {
		name := strings.ReplaceAll(ex.Case, "/", "-")
		args := []string{}
		if ex.Case == "single-cluster/helm-multi-chart" {
			// Only its guestbook: rancher-monitoring's CRDs are installed by a Job, and
			// these control planes run no Pods.
			args = append(args, "guestbook")
		}
		for _, b := range hubApply(t, hub, localExample(t, ex.Case, repo), name, args...) {
			bundles[b] = true
		}
	}

	// The guestbook chart from a repository with basic auth, and from an OCI registry.
	private := writeFolder(t, map[string]string{"fleet.yaml": "defaultNamespace: from-private-repo\nhelm:\n  repo: " + repo.URL + "/private\n  chart: guestbook\n  version: ^0.0.1\n"})
	password := filepath.Join(t.TempDir(), "password")
	if err := os.WriteFile(password, []byte("p\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	credentials := []string{"--username", "u", "--password-file", password}
	for _, b := range hubApply(t, hub, private, "private", append(credentials, "--helm-repo-url-regex", regexp.QuoteMeta(repo.URL+"/private/"))...) {
		bundles[b] = true
	}
	host := ociRegistryWithGuestbook(t, repo.guestbook)
	oci := writeFolder(t, map[string]string{"fleet.yaml": "defaultNamespace: from-oci\nhelm:\n  repo: oci://" + host + "/charts/guestbook\n  version: 0.0.1\n"})
	for _, b := range hubApply(t, hub, oci, "oci", append(credentials, "--helm-basic-http", "--helm-repo-url-regex", regexp.QuoteMeta("oci://"+host+"/"))...) {
		bundles[b] = true
	}

	waitBundlesReady(t, hub, slices.Collect(maps.Keys(bundles)))

	// A folder cannot take over a Bundle that another apply (or GitRepo) owns.
	hub.MustKubectl(`apiVersion: fleet.cattle.io/v1alpha1
kind: Bundle
metadata:
  name: owned
  namespace: `+deployWorkspace+`
  labels: {fleet.cattle.io/repo-name: other}
spec:
  resources: [{name: cm.yaml, content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: owned}\n"}]
  targets: [{clusterName: nobody}]
`, "apply", "-f", "-")
	takeover := writeFolder(t, map[string]string{"fleet.yaml": "name: owned\n", "cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: mine}\n"})
	cmd := exec.Command(filepath.Join(framework.BinDir(t), "hub"), "apply", "attacker", "-n", deployWorkspace, "--kubeconfig", hub.Kubeconfig)
	cmd.Dir = takeover
	if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "belongs to other") {
		t.Errorf("hub apply over another's Bundle: %v\n%s", err, out)
	}

	// A fleet.yaml that names a chart on this machine (or the cloud's metadata service,
	// or the company network) is refused by hub apply and hub test before anything is
	// sent there, unless the user allows it: the server sees no request.
	var asked atomic.Int32
	local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		http.Error(w, "secret", http.StatusOK)
	}))
	t.Cleanup(local.Close)
	for _, url := range []string{local.URL + "/chart.tgz", "http://169.254.169.254/latest/meta-data/chart.tgz", "http://10.1.2.3/chart.tgz"} {
		folder := writeFolder(t, map[string]string{"fleet.yaml": "helm:\n  chart: " + url + "\n"})
		cmd := exec.Command(filepath.Join(framework.BinDir(t), "hub"), "apply", "ssrf", "-n", deployWorkspace, "--kubeconfig", hub.Kubeconfig)
		cmd.Dir = folder
		host := strings.Split(strings.TrimPrefix(url, "http://"), "/")[0]
		if !strings.Contains(host, ":") {
			host += ":80"
		}
		if out, err := cmd.CombinedOutput(); err == nil || !strings.Contains(string(out), "does not connect to "+host+" for a chart download") ||
			!strings.Contains(string(out), "--allowed-networks") {
			t.Errorf("hub apply of a chart at %s: %v, want the address refused naming --allowed-networks\n%s", url, err, out)
		}
		render := exec.Command(filepath.Join(framework.BinDir(t), "hub"), "test", ".")
		render.Dir = folder
		if out, err := render.CombinedOutput(); err == nil || !strings.Contains(string(out), "does not connect to "+host+" for a chart download") {
			t.Errorf("hub test of a chart at %s: %v, want the address refused\n%s", url, err, out)
		}
	}
	if n := asked.Load(); n != 0 {
		t.Errorf("the server on this machine was asked %d times for a refused chart", n)
	}

	found := expectDeployed(t, clusters)
	for _, d := range clusters {
		client := dynamicFor(t, d.Cluster)
		for _, ns := range []string{"from-private-repo", "from-oci"} {
			if err := client.exists("apps/v1", "Deployment", ns, "frontend"); err != nil {
				t.Errorf("cluster %s: the guestbook chart in %s: %v", d.Name, ns, err)
			}
		}
		t.Logf("cluster %s: %d objects of Fleet's expected output found, and the two guestbook charts", d.Name, found[d.Name])
	}
}

// startHubWithLabelledClusters starts a hub with three simulated clusters labelled
// env=dev, test and prod, in the deploy workspace's ClusterGroup default of all its
// clusters, as tests/test.sh has them.
func startHubWithLabelledClusters(t *testing.T) (*framework.Hub, []*framework.Downstream) {
	t.Helper()
	hub := framework.StartHub(t)
	clusters := framework.RegisterSimulatedClusters(t, hub, deployWorkspace, map[string]string{"dev": "dev", "test": "test", "prod": "prod"})
	hub.MustKubectl(`apiVersion: fleet.cattle.io/v1alpha1
kind: ClusterGroup
metadata:
  name: default
  namespace: `+deployWorkspace+`
spec:
  selector: {}
`, "apply", "-f", "-")
	return hub, clusters
}

// waitBundlesReady waits until each Bundle of the deploy workspace named is Ready and
// deployed somewhere.
func waitBundlesReady(t *testing.T, hub *framework.Hub, bundles []string) {
	t.Helper()
	for _, name := range bundles {
		framework.Eventually(t, "Bundle "+name+" to be Ready", 5*time.Minute, func(ctx context.Context) error {
			b, err := hub.Fleet().FleetV1alpha1().Bundles(deployWorkspace).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			for _, c := range b.Status.Conditions {
				if c.Type == fleet.ConditionReady && c.Status == corev1.ConditionTrue && b.Status.Summary.DesiredReady > 0 {
					return nil
				}
			}
			return fmt.Errorf("status %+v", b.Status)
		})
	}
}

// expectDeployed checks that each cluster (named after its env label) has every
// object Fleet's expected output has for its environment, and returns how many.
func expectDeployed(t *testing.T, clusters []*framework.Downstream) map[string]int {
	t.Helper()
	found := map[string]int{}
	for _, d := range clusters {
		env := d.Name
		client := dynamicFor(t, d.Cluster)
		for _, ex := range examples(t) {
			want, err := os.ReadFile(filepath.Join(examplesDir, "tests/expected", ex.Case, env+"-output.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			for _, key := range keys(objects(t, want)) {
				parts := strings.Split(key, "/") // apiVersion may hold a slash
				name, ns, kind := parts[len(parts)-1], parts[len(parts)-2], parts[len(parts)-3]
				apiVersion := strings.Join(parts[:len(parts)-3], "/")
				if err := client.exists(apiVersion, kind, ns, name); err != nil {
					t.Errorf("cluster %s (%s): %s: %v", env, ex.Case, key, err)
				}
				found[env]++
			}
		}
	}
	return found
}

// hubApply runs `hub apply NAME [ARGS...]` in dir against hub, allowing chart
// downloads from this machine, and returns the names of the Bundles it made.
func hubApply(t *testing.T, hub *framework.Hub, dir, name string, args ...string) []string {
	t.Helper()
	cmd := exec.Command(filepath.Join(framework.BinDir(t), "hub"), append([]string{"apply", name, "-n", deployWorkspace, "--kubeconfig", hub.Kubeconfig, "--allowed-networks=127.0.0.0/8"}, args...)...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("hub apply %s in %s: %v\n%s", name, dir, err, out)
	}
	var made []string
	for _, line := range strings.Split(string(out), "\n") {
		if rest, ok := strings.CutPrefix(line, "created: "+deployWorkspace+"/"); ok {
			made = append(made, rest)
		}
	}
	if len(made) == 0 {
		t.Fatalf("hub apply %s made no Bundle:\n%s", name, out)
	}
	return made
}

func writeFolder(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(data), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ociRegistryWithGuestbook starts an OCI registry that wants user u, password p, pushes
// chart to charts/guestbook:0.0.1 and returns the registry's host.
func ociRegistryWithGuestbook(t *testing.T, chart []byte) string {
	t.Helper()
	inner := ggcrregistry.New(ggcrregistry.Logger(log.New(io.Discard, "", 0)))
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "u" || pass != "p" {
			w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		inner.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	client, err := registry.NewClient(registry.ClientOptPlainHTTP(), registry.ClientOptBasicAuth("u", "p"),
		registry.ClientOptCredentialsFile(filepath.Join(t.TempDir(), "config.json")))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Push(chart, host+"/charts/guestbook:0.0.1"); err != nil {
		t.Fatal(err)
	}
	return host
}

// dynamicClient reads any object of a downstream cluster.
type dynamicClient struct {
	client dynamic.Interface
	mapper *restmapper.DeferredDiscoveryRESTMapper
}

func dynamicFor(t *testing.T, c *framework.Cluster) *dynamicClient {
	t.Helper()
	cfg := c.RESTConfig()
	client, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &dynamicClient{client: client, mapper: restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.Client().Discovery()))}
}

func (d *dynamicClient) exists(apiVersion, kind, namespace, name string) error {
	gv, err := schema.ParseGroupVersion(apiVersion)
	if err != nil {
		return err
	}
	mapping, err := d.mapper.RESTMapping(gv.WithKind(kind).GroupKind(), gv.Version)
	if err != nil {
		return err
	}
	var obj *unstructured.Unstructured
	if namespace == "" {
		obj, err = d.client.Resource(mapping.Resource).Get(context.Background(), name, metav1.GetOptions{})
	} else {
		obj, err = d.client.Resource(mapping.Resource).Namespace(namespace).Get(context.Background(), name, metav1.GetOptions{})
	}
	if apierrors.IsNotFound(err) {
		return fmt.Errorf("not found downstream")
	}
	if err != nil {
		return err
	}
	if obj.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" {
		return fmt.Errorf("not deployed by the agent's Helm release (labels %v)", obj.GetLabels())
	}
	return nil
}
