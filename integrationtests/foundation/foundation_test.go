// Package foundation tests what every other feature stands on: the hub's embedded
// control plane, the fleet.cattle.io API it serves, and a downstream control plane.
package foundation

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

// The seed's token, applied exactly as the Fleet documentation writes it.
const seedToken = `kind: ClusterRegistrationToken
apiVersion: "fleet.cattle.io/v1alpha1"
metadata:
    name: new-token
    namespace: clusters
spec:
    # A duration string for how long this token is valid for. A value <= 0 or null means infinite time.
    ttl: 240h
`

const seedCluster = `kind: Cluster
apiVersion: fleet.cattle.io/v1alpha1
metadata:
  name: my-cluster
  namespace: clusters
spec:
  clientID: "really-random"
`

var fleetCRDs = []string{
	"bundledeployments.fleet.cattle.io",
	"bundles.fleet.cattle.io",
	"clustergroups.fleet.cattle.io",
	"clusterregistrationrequests.fleet.cattle.io",
	"clusterregistrations.fleet.cattle.io",
	"clusterregistrationtokens.fleet.cattle.io",
	"clusters.fleet.cattle.io",
	"contents.fleet.cattle.io",
	"gitreporestrictions.fleet.cattle.io",
	"gitrepos.fleet.cattle.io",
	"policies.fleet.cattle.io",
}

func TestHubServesTheFleetAPI(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)

	out := hub.MustKubectl("", "get", "crd", "-o", "name")
	var got []string
	for _, line := range strings.Fields(out) {
		if name := strings.TrimPrefix(line, "customresourcedefinition.apiextensions.k8s.io/"); strings.HasSuffix(name, ".fleet.cattle.io") {
			got = append(got, name)
		}
	}
	sort.Strings(got)
	if strings.Join(got, " ") != strings.Join(fleetCRDs, " ") {
		t.Fatalf("fleet.cattle.io CRDs served: %v, want %v", got, fleetCRDs)
	}

	hub.MustKubectl("", "create", "namespace", "clusters")
	hub.MustKubectl(seedToken, "apply", "-f", "-")
	hub.MustKubectl(seedCluster, "apply", "-f", "-")

	t.Run("cluster columns are the seed's", func(t *testing.T) {
		out := hub.MustKubectl("", "-n", "clusters", "get", "clusters.fleet.cattle.io")
		header := strings.Fields(strings.SplitN(out, "\n", 2)[0])
		want := []string{"NAME", "BUNDLES-READY", "NODES-READY", "SAMPLE-NODE", "LAST-SEEN", "STATUS"}
		if strings.Join(header, " ") != strings.Join(want, " ") {
			t.Fatalf("header %q, want %q\n%s", header, want, out)
		}
		if !strings.Contains(out, "my-cluster") {
			t.Fatalf("my-cluster not listed:\n%s", out)
		}
	})

	t.Run("token keeps its ttl as written", func(t *testing.T) {
		// The hub writes status only; the user's spec stays as applied.
		eventually(t, "the token's values Secret", func() error {
			_, err := hub.Kubectl("", "-n", "clusters", "get", "secret", "new-token")
			return err
		})
		out := hub.MustKubectl("", "-n", "clusters", "get", "clusterregistrationtokens.fleet.cattle.io", "new-token", "-o", "jsonpath={.spec.ttl}")
		if out != "240h" {
			t.Fatalf("spec.ttl = %q, want 240h as applied", out)
		}
	})

	t.Run("short names and the fleet category", func(t *testing.T) {
		out := hub.MustKubectl("", "-n", "clusters", "get", "fleet")
		for _, want := range []string{"cluster.fleet.cattle.io/my-cluster", "clusterregistrationtoken.fleet.cattle.io/new-token"} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl get fleet does not list %s:\n%s", want, out)
			}
		}
		hub.MustKubectl("", "-n", "clusters", "get", "fc,crt,crr,cg,fb,bd")
		hub.MustKubectl("", "get", "fcontent")
	})

	t.Run("every kind has a status subresource", func(t *testing.T) {
		for _, crd := range fleetCRDs {
			if crd == "policies.fleet.cattle.io" {
				// Policies are only read, as in Fleet.
				continue
			}
			out := hub.MustKubectl("", "get", "crd", crd, "-o", "jsonpath={.spec.versions[0].subresources.status}")
			if out != "{}" {
				t.Errorf("%s: status subresource = %q", crd, out)
			}
		}
	})

	t.Run("no ServiceAccount token outlives a year", func(t *testing.T) {
		hub.MustKubectl("", "-n", "clusters", "create", "serviceaccount", "long-lived")
		tenYears := int64(10 * 365 * 24 * 3600)
		tr, err := hub.Client().CoreV1().ServiceAccounts("clusters").CreateToken(context.Background(), "long-lived",
			&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &tenYears}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		expires := tr.Status.ExpirationTimestamp.Time
		if limit := time.Now().Add(366 * 24 * time.Hour); expires.After(limit) {
			t.Fatalf("a token asked for ten years expires at %s, after a year from now", expires)
		}
	})

	t.Run("people and the hub are different users", func(t *testing.T) {
		// The hub's user is controlplane.HubUsername (a constant not imported here: it
		// would link kube-apiserver into this test).
		const hubUser = "flotilla-hub"
		out := hub.MustKubectl("", "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
		if out == "" || out == hubUser {
			t.Fatalf("the admin kubeconfig authenticates as %q, want a user other than the hub's %s", out, hubUser)
		}
	})

	t.Run("kubectl sees the stamped Kubernetes version", func(t *testing.T) {
		out := hub.MustKubectl("", "version", "-o", "json")
		if !strings.Contains(out, `"gitVersion": "v1.37.2"`) {
			t.Fatalf("server version is not v1.37.2:\n%s", out)
		}
	})
}

func TestInvalidTTLIsRefusedByTheAPIServer(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	hub.MustKubectl("", "create", "namespace", "clusters")

	for _, ttl := range []string{"forever", "1d", "h", "10", "5m3"} {
		manifest := strings.Replace(seedToken, "ttl: 240h", "ttl: "+ttl, 1)
		out, err := hub.Kubectl(manifest, "apply", "-f", "-")
		if err == nil {
			t.Errorf("ttl %q was accepted:\n%s", ttl, out)
			continue
		}
		// A YAML number is refused by the schema's type ("must be of type string"),
		// anything else by the duration rule; both name the field.
		if !strings.Contains(out, "spec.ttl") ||
			!(strings.Contains(out, "must be a duration such as 240h") || strings.Contains(out, "must be of type string")) {
			t.Errorf("ttl %q refused without a clear message:\n%s", ttl, out)
		}
	}
	for _, ttl := range []string{"1h30m", "90m", `"0"`, "-1s", "2.5h", "300ms"} {
		manifest := strings.Replace(seedToken, "ttl: 240h", "ttl: "+ttl, 1)
		if out, err := hub.Kubectl(manifest, "apply", "-f", "-"); err != nil {
			t.Errorf("valid ttl %q refused: %v\n%s", ttl, err, out)
		}
	}
}

func TestHubRestartKeepsObjectsAndCredentials(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ctx := context.Background()
	hub.MustKubectl("", "create", "namespace", "clusters")
	hub.MustKubectl(seedCluster, "apply", "-f", "-")

	// A ServiceAccount token issued before the restart must still work after it: the
	// signing key and the CA are reused, not regenerated.
	token := serviceAccountToken(t, hub.Client(), "clusters", "reader", []rbacv1.PolicyRule{{
		APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"clusters"}, Verbs: []string{"get", "list"},
	}})
	caBefore := hub.RESTConfig().CAData

	hub.Restart()

	if caAfter := hub.RESTConfig().CAData; string(caAfter) != string(caBefore) {
		t.Fatal("the control plane CA changed across a restart")
	}
	out := hub.MustKubectl("", "-n", "clusters", "get", "clusters.fleet.cattle.io", "my-cluster", "-o", "jsonpath={.spec.clientID}")
	if out != "really-random" {
		t.Fatalf("after restart my-cluster has clientID %q, want really-random", out)
	}
	client := clientWithToken(t, hub.RESTConfig(), token)
	if _, err := client.CoreV1().Namespaces().Get(ctx, "clusters", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("the ServiceAccount may read namespaces (err=%v); RBAC is not enforced", err)
	}
	raw, err := client.Discovery().RESTClient().Get().AbsPath("/apis/fleet.cattle.io/v1alpha1/namespaces/clusters/clusters/my-cluster").DoRaw(ctx)
	if err != nil {
		t.Fatalf("a token issued before the restart no longer works: %v", err)
	}
	if !strings.Contains(string(raw), "really-random") {
		t.Fatalf("unexpected answer: %s", raw)
	}
}

func TestControlPlaneRunsTheControllersAClusterNeeds(t *testing.T) {
	t.Parallel()
	ds := framework.StartControlPlane(t, "downstream")
	client := ds.Client()
	ctx := context.Background()

	ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "demo"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(t, "the default ServiceAccount and kube-root-ca.crt in a new namespace", func() error {
		if _, err := client.CoreV1().ServiceAccounts("demo").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := client.CoreV1().ConfigMaps("demo").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})

	owner, err := client.CoreV1().ConfigMaps("demo").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = client.CoreV1().ConfigMaps("demo").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name:            "owned",
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := client.CoreV1().ConfigMaps("demo").Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the garbage collector to delete an owned object", func() error {
		_, err := client.CoreV1().ConfigMaps("demo").Get(ctx, "owned", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errorf("owned ConfigMap still exists (err=%v)", err)
	})

	if err := client.CoreV1().Namespaces().Delete(ctx, ns.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the namespace controller to finish deleting a namespace", func() error {
		_, err := client.CoreV1().Namespaces().Get(ctx, "demo", metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return errorf("namespace still exists (err=%v)", err)
	})
}

func TestHelmInstallsIntoADownstreamControlPlane(t *testing.T) {
	t.Parallel()
	ds := framework.StartControlPlane(t, "downstream")
	chart := t.TempDir()
	writeChart(t, chart)
	out, err := ds.Helm("-n", "cattle-fleet-system", "install", "--create-namespace", "demo", chart)
	if err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	out, err = ds.Helm("-n", "cattle-fleet-system", "list", "-q")
	if err != nil || strings.TrimSpace(out) != "demo" {
		t.Fatalf("helm list = %q (err=%v), want demo", out, err)
	}
	if got := ds.MustKubectl("", "-n", "cattle-fleet-system", "get", "configmap", "demo", "-o", "jsonpath={.data.hello}"); got != "world" {
		t.Fatalf("the chart's ConfigMap has hello=%q", got)
	}
}

func TestHubAndTwoDownstreamClustersRunSideBySide(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	a := framework.StartControlPlane(t, "downstream-a")
	b := framework.StartControlPlane(t, "downstream-b")
	uids := map[string]bool{}
	for _, c := range []*framework.Cluster{&hub.Cluster, a, b} {
		ns, err := c.Client().CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
		if err != nil {
			t.Fatalf("%s: %v", c.Name, err)
		}
		uids[string(ns.UID)] = true
	}
	if len(uids) != 3 {
		t.Fatalf("the three clusters do not have distinct kube-system UIDs: %v", uids)
	}
}

func TestHubRunsAgainstAnExistingCluster(t *testing.T) {
	t.Parallel()
	existing := framework.StartControlPlane(t, "existing")
	hub := framework.StartHubOn(t, existing)

	out := hub.MustKubectl("", "get", "crd", "clusters.fleet.cattle.io", "-o", "jsonpath={.metadata.name}")
	if out != "clusters.fleet.cattle.io" {
		t.Fatalf("the hub did not install its CRDs on the existing cluster: %q", out)
	}
	for _, ns := range []string{"cattle-fleet-system", "cattle-fleet-clusters-system"} {
		hub.MustKubectl("", "get", "namespace", ns)
	}
	eventually(t, "the hub to hold its leader Lease", func() error {
		holder, err := hub.Kubectl("", "-n", "cattle-fleet-system", "get", "lease", "flotilla-hub", "-o", "jsonpath={.spec.holderIdentity}")
		if err != nil || holder == "" {
			return errorf("no holder yet: %v %s", err, holder)
		}
		return nil
	})

	// A clean shutdown gives the Lease up, so a replacement need not wait for it to expire.
	if err := hub.Process.Stop(); err != nil {
		t.Fatalf("the hub did not exit cleanly on SIGTERM: %v", err)
	}
	holder := hub.MustKubectl("", "-n", "cattle-fleet-system", "get", "lease", "flotilla-hub", "-o", "jsonpath={.spec.holderIdentity}")
	if holder != "" {
		t.Fatalf("the Lease is still held by %q after a clean shutdown", holder)
	}

	// Started again, it updates the CRDs it finds instead of failing on them.
	hub.Process.Restart()
	hub.WaitReady()
}

// serviceAccountToken creates a ServiceAccount with a Role of rules and returns a
// token for it from the TokenRequest API.
func serviceAccountToken(t *testing.T, client kubernetes.Interface, namespace, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	expiry := int64(3600)
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &expiry},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest: %v", err)
	}
	return tr.Status.Token
}

func clientWithToken(t *testing.T, admin *rest.Config, token string) kubernetes.Interface {
	t.Helper()
	cfg := rest.AnonymousClientConfig(admin)
	cfg.BearerToken = token
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return client
}

// eventually retries check until it returns nil, failing the test after a minute.
func eventually(t *testing.T, what string, check func() error) {
	t.Helper()
	var last error
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		last = check()
		return last == nil, nil
	})
	if err != nil {
		t.Fatalf("waiting for %s: %v", what, last)
	}
}
