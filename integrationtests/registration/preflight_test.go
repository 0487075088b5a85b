package registration

import (
	"context"
	"encoding/base64"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"

	"github.com/flotilla/flotilla/integrationtests/framework"
)

// preflight runs `agent preflight` against ds, with kubeconfig (ds's admin
// kubeconfig when empty), and returns its PREFLIGHT lines and whether it passed.
func preflight(t *testing.T, ds *framework.Cluster, kubeconfig string) (string, bool) {
	t.Helper()
	if kubeconfig == "" {
		kubeconfig = ds.Kubeconfig
	}
	out, err := exec.Command(filepath.Join(framework.BinDir(t), "agent"), "preflight", "--kubeconfig", kubeconfig).CombinedOutput()
	t.Logf("agent preflight:\n%s", grepLines(string(out), "PREFLIGHT"))
	return grepLines(string(out), "PREFLIGHT"), err == nil
}

// setBootstrap sets key of ds's bootstrap Secret to value and returns what it was.
func setBootstrap(t *testing.T, ds *framework.Cluster, key, value string) string {
	t.Helper()
	secrets := ds.Client().CoreV1().Secrets("cattle-fleet-system")
	secret, err := secrets.Get(context.Background(), "fleet-agent-bootstrap", framework.Get)
	if err != nil {
		t.Fatal(err)
	}
	was := string(secret.Data[key])
	secret.Data[key] = []byte(value)
	if _, err := secrets.Update(context.Background(), secret, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	return was
}

// serviceAccountToken creates ServiceAccount name in namespace, allowed rules there
// and nothing else, and returns a token of it.
func serviceAccountToken(t *testing.T, client kubernetes.Interface, namespace, name string, rules ...rbacv1.PolicyRule) string {
	t.Helper()
	ctx := context.Background()
	if _, err := client.CoreV1().ServiceAccounts(namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().Roles(namespace).Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := client.RbacV1().RoleBindings(namespace).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: namespace}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	tr, err := client.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// caOf is the PEM of the CA of ds's API server.
func caOf(t *testing.T, ds *framework.Cluster) []byte {
	t.Helper()
	cfg := ds.RESTConfig()
	if len(cfg.CAData) > 0 {
		return cfg.CAData
	}
	ca, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

// TestAgentPreflightSaysWhatIsWrong: `agent preflight` passes with a token's values
// as the chart installs them, and prints one PREFLIGHT line, and fails, for each
// thing broken in turn: a token the hub does not accept (also logged by the agent
// when it starts), a CA that did not sign the hub's certificate, an address nothing
// answers at, a token whose places are taken, and downstream credentials without
// the rights the agent needs.
func TestAgentPreflightSaysWhatIsWrong(t *testing.T) {
	t.Parallel()
	hub := framework.StartHub(t)
	ds := framework.StartControlPlane(t, "preflight")
	values := filepath.Join(t.TempDir(), "values.yaml")
	hubCommand(t, hub, "token", "create", "one-cluster", "-n", workspace, "--max-registrations", "1", "-o", values)
	framework.InstallAgent(t, ds, values)

	if lines, ok := preflight(t, ds, ""); !ok || lines != "PREFLIGHT ok" {
		t.Fatalf("preflight of a fresh install: passed %v\n%s", ok, lines)
	}

	expect := func(what, check, message string) {
		t.Helper()
		lines, ok := preflight(t, ds, "")
		if ok || !strings.HasPrefix(lines, "PREFLIGHT "+check+": ") || !strings.Contains(lines, message) || strings.Count(lines, "\n") != 0 {
			t.Errorf("preflight with %s: passed %v, want one %q line saying %q:\n%s", what, ok, check, message, lines)
		}
	}

	token := setBootstrap(t, ds, "token", "not-a-token")
	expect("a token the hub does not accept", "token", "the hub does not accept the registration token (401 Unauthorized)")
	agent := framework.StartAgent(t, ds)
	framework.Eventually(t, "the agent to log the preflight problem when it starts", timeout, func(context.Context) error {
		if !strings.Contains(agent.Log(), "PREFLIGHT token: the hub does not accept the registration token") {
			return fmt.Errorf("agent log:\n%s", agent.Log())
		}
		return nil
	})
	agent.Kill()
	setBootstrap(t, ds, "token", token)

	ca := setBootstrap(t, ds, "apiServerCA", base64.StdEncoding.EncodeToString(caOf(t, ds)))
	expect("the downstream cluster's CA", "ca", "is not signed by the apiServerCA this agent was given")
	setBootstrap(t, ds, "apiServerCA", ca)

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "https://" + l.Addr().String()
	l.Close()
	url := setBootstrap(t, ds, "apiServerURL", closed)
	expect("an address nothing answers at", "reachable", "cannot reach the hub at "+closed)
	setBootstrap(t, ds, "apiServerURL", url)

	// Another cluster takes the token's one place.
	first := framework.StartControlPlane(t, "first")
	framework.InstallAgent(t, first, values)
	framework.StartAgent(t, first)
	waitRegistered(t, first)
	expect("a used-up token", "token", "has registered the 1 clusters its maxRegistrations allows")

	// Credentials that may do what the agent does in its namespace only.
	ns := "cattle-fleet-system"
	limitedToken := serviceAccountToken(t, ds.Client(), ns, "limited",
		rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets", "configmaps"}, Verbs: []string{"get", "update", "delete"}})
	kubeconfig := clientcmdapi.NewConfig()
	kubeconfig.Clusters["ds"] = &clientcmdapi.Cluster{Server: ds.RESTConfig().Host, CertificateAuthorityData: caOf(t, ds)}
	kubeconfig.AuthInfos["limited"] = &clientcmdapi.AuthInfo{Token: limitedToken}
	kubeconfig.Contexts["ds"] = &clientcmdapi.Context{Cluster: "ds", AuthInfo: "limited"}
	kubeconfig.CurrentContext = "ds"
	raw, err := clientcmd.Write(*kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	limited := filepath.Join(t.TempDir(), "limited.kubeconfig")
	if err := os.WriteFile(limited, raw, 0o600); err != nil {
		t.Fatal(err)
	}
	lines, ok := preflight(t, ds, limited)
	if ok || !strings.Contains(lines, "PREFLIGHT rbac: the agent's downstream credentials may not * * in every namespace") || strings.Contains(lines, "in namespace "+ns) {
		t.Errorf("preflight with namespace rights only: passed %v\n%s", ok, lines)
	}
}
