package charts

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/flotilla/flotilla/integrationtests/framework"
	"github.com/flotilla/flotilla/pkg/kubeconfig"
	"github.com/flotilla/flotilla/pkg/names"
)

func hubChart(t *testing.T) string {
	return filepath.Join(framework.RepoRoot(t), "charts", "fleet-like", "hub")
}

func TestHubChartLintsClean(t *testing.T) {
	out, err := helm(t, "lint", "--strict", hubChart(t))
	if err != nil || !strings.Contains(out, "0 chart(s) failed") || strings.Contains(out, "[WARNING]") || strings.Contains(out, "[ERROR]") {
		t.Fatalf("helm lint: %v\n%s", err, out)
	}
	out, err = helm(t, "template", "flotilla", hubChart(t), "-n", "cattle-fleet-system", "--kube-version", "1.37.2")
	if err == nil || !strings.Contains(out, "apiServerURL is required") {
		t.Errorf("an install without apiServerURL: %v\n%s", err, out)
	}
}

// TestHubChartInstallsAndItsRBACSuffices installs the hub chart with the helm CLI into
// a control plane, then runs the hub binary as the chart's Deployment runs it (its
// arguments, and the chart's ServiceAccount as its only credential), and registers a
// cluster through it: the chart's least-privilege RBAC is enough for the hub's work.
func TestHubChartInstallsAndItsRBACSuffices(t *testing.T) {
	t.Parallel()
	host := framework.StartControlPlane(t, "hub-host", "--identity-authorizer=false")
	ds := framework.StartControlPlane(t, "downstream")
	url := host.RESTConfig().Host
	out, err := host.Helm("install", "flotilla", hubChart(t), "-n", "cattle-fleet-system", "--create-namespace",
		"--set", "apiServerURL="+url, "--wait=false")
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	if !strings.Contains(out, "hub token create new-token -n clusters") {
		t.Errorf("NOTES do not give the next command:\n%s", out)
	}
	for _, crd := range []string{"clusters.fleet.cattle.io", "bundles.fleet.cattle.io", "contents.fleet.cattle.io"} {
		host.MustKubectl("", "get", "crd", crd)
	}
	host.MustKubectl("", "get", "namespace", names.RegistrationNamespace)
	args := host.MustKubectl("", "-n", "cattle-fleet-system", "get", "deployment", "flotilla-hub", "-o", "jsonpath={.spec.template.spec.containers[0].args}")
	if !strings.Contains(args, "--api-server-url="+url) || !strings.Contains(args, "--metrics-bind-address=:8080") {
		t.Errorf("Deployment args %s", args)
	}
	host.MustKubectl("", "-n", "cattle-fleet-system", "get", "service", "fleet-like-metrics")

	// The Pod's credential: a token of the chart's ServiceAccount.
	tr, err := host.Client().CoreV1().ServiceAccounts("cattle-fleet-system").CreateToken(context.Background(), "flotilla-hub",
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	saKubeconfig := filepath.Join(t.TempDir(), "flotilla-hub.kubeconfig")
	if err := kubeconfig.Write(kubeconfig.New("hub", url, host.RESTConfig().CAData, kubeconfig.Credential{Token: tr.Status.Token}), saKubeconfig); err != nil {
		t.Fatal(err)
	}
	// The API server puts the hub's requests in the chart's FlowSchema, not in the
	// one all ServiceAccounts share with the agents.
	schema, err := host.Client().FlowcontrolV1().FlowSchemas().Get(context.Background(), "flotilla-hub", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the chart's FlowSchema: %v", err)
	}
	saConfig, err := kubeconfig.Load(saKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	httpClient, err := rest.HTTPClientFor(saConfig)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Get(url + "/api/v1/namespaces/cattle-fleet-system/serviceaccounts/flotilla-hub")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if got := resp.Header.Get("X-Kubernetes-PF-FlowSchema-UID"); got != string(schema.UID) {
		t.Errorf("the hub's request went to FlowSchema UID %q, want flotilla-hub's %q", got, schema.UID)
	}

	asPod := *host
	asPod.Kubeconfig = saKubeconfig
	hub := framework.StartHubOn(t, &asPod, "--api-server-url="+url)

	values := hub.CreateToken("clusters", "new-token", "")
	framework.InstallAgent(t, ds, values)
	framework.StartAgent(t, ds)
	framework.Eventually(t, "a cluster registered through the chart-installed hub to be Ready", 2*time.Minute, func(ctx context.Context) error {
		out, err := host.Kubectl("", "-n", "clusters", "get", "clusters.fleet.cattle.io", "-o", "jsonpath={.items[*].status.conditions[?(@.type==\"Ready\")].status}")
		if err != nil || out != "True" {
			return fmt.Errorf("Ready: %q %v", out, err)
		}
		return nil
	})
	// The chart lets the hub keep the priority level of registration traffic.
	if _, err := host.Client().FlowcontrolV1().FlowSchemas().Get(context.Background(), "flotilla-registration", metav1.GetOptions{}); err != nil {
		t.Errorf("the hub's registration FlowSchema: %v", err)
	}
	if log := hub.Process.Log(); strings.Contains(log, "forbidden") {
		t.Errorf("the hub was refused something its RBAC should allow:\n%s", log)
	}
}

func ptr[T any](v T) *T { return &v }
