package framework

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"sigs.k8s.io/yaml"

	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// AgentChart is the path of the fleet-agent chart in the repository.
func AgentChart(t testing.TB) string {
	return filepath.Join(RepoRoot(t), "charts", "fleet-like", "agent")
}

// StartAgent runs the agent against downstream cluster ds, exactly as the chart's
// Deployment runs it in a cluster (there is no kubelet to run the Pod; while the
// process runs, the Deployment's status says its Pod is available).
func StartAgent(t testing.TB, ds *Cluster) *Process {
	t.Helper()
	return StartAgentIn(t, ds, "cattle-fleet-system")
}

// StartAgentIn runs an agent whose Secrets and ConfigMap are in namespace of ds,
// with extra flags (such as --hub-proxy).
func StartAgentIn(t testing.TB, ds *Cluster, namespace string, extra ...string) *Process {
	t.Helper()
	logDir := ShortTempDir(t, "flt-agent-")
	p := startProcess(t, "agent of "+ds.Name+"/"+namespace, filepath.Join(logDir, "agent.log"), filepath.Join(BinDir(t), "agent"),
		append([]string{"--kubeconfig", ds.Kubeconfig, "--namespace", namespace}, extra...)...)
	StandInForAgentPod(t, ds, namespace, p.Exited())
	return p
}

// Fleet returns a fleet.cattle.io clientset for this cluster.
func (c *Cluster) Fleet() versioned.Interface {
	c.t.Helper()
	client, err := versioned.NewForConfig(c.RESTConfig())
	if err != nil {
		c.t.Fatal(err)
	}
	return client
}

// CreateToken applies a ClusterRegistrationToken with ttl (empty for none) in
// namespace, creating the namespace if needed, and returns the path of its
// values.yaml once the hub has written it, as the seed's commands fetch it.
func (h *Hub) CreateToken(namespace, name, ttl string) string {
	h.t.Helper()
	return h.createToken(namespace, name, ttl, "")
}

// CreateBoundToken is CreateToken for a token bound to Cluster cluster (label
// fleet.cattle.io/cluster), which registers that Cluster only, with any agent key.
func (h *Hub) CreateBoundToken(namespace, name, cluster string) string {
	h.t.Helper()
	return h.createToken(namespace, name, "", cluster)
}

// CreateMoveToken is CreateBoundToken for a token like the one `hub cluster move`
// makes: only the key Cluster cluster is bound to registers with it.
func (h *Hub) CreateMoveToken(namespace, name, cluster string) string {
	h.t.Helper()
	return h.createToken(namespace, name, "", cluster, names.MovedFromAnnotation+": https://old-hub.example.com")
}

// createToken writes the token and returns the path of its values.yaml; annotations
// are "key: value" lines.
func (h *Hub) createToken(namespace, name, ttl, cluster string, annotations ...string) string {
	h.t.Helper()
	if _, err := h.Kubectl("", "get", "namespace", namespace); err != nil {
		h.MustKubectl("", "create", "namespace", namespace)
	}
	manifest := "kind: ClusterRegistrationToken\napiVersion: fleet.cattle.io/v1alpha1\nmetadata:\n  name: " + name +
		"\n  namespace: " + namespace + "\n"
	if cluster != "" {
		manifest += "  labels:\n    fleet.cattle.io/cluster: " + cluster + "\n"
	}
	if len(annotations) > 0 {
		manifest += "  annotations:\n    " + strings.Join(annotations, "\n    ") + "\n"
	}
	if ttl != "" {
		manifest += "spec:\n  ttl: " + ttl + "\n"
	}
	h.MustKubectl(manifest, "apply", "-f", "-")
	var values string
	waitFor(h.t, "the values Secret of token "+name, time.Minute, nil, func(ctx context.Context) (bool, error) {
		out, err := h.Kubectl("", "-n", namespace, "get", "secret", name, "-o", "jsonpath={.data.values}")
		if err != nil || out == "" {
			return false, err
		}
		decoded, err := base64.StdEncoding.DecodeString(out)
		if err != nil {
			return false, err
		}
		values = string(decoded)
		return true, nil
	})
	path := filepath.Join(ShortTempDir(h.t, "flt-values-"), "values.yaml")
	if err := os.WriteFile(path, []byte(values), 0o600); err != nil {
		h.t.Fatal(err)
	}
	return path
}

// InstallAgent runs the seed's `helm install` of the fleet-agent chart into ds with
// valuesFile and extra arguments (such as --set-string labels.env=dev).
func InstallAgent(t testing.TB, ds *Cluster, valuesFile string, extra ...string) {
	t.Helper()
	args := append([]string{"-n", "cattle-fleet-system", "install", "--create-namespace"}, extra...)
	args = append(args, "--values", valuesFile, "fleet-agent", AgentChart(t))
	if out, err := ds.Helm(args...); err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// Eventually retries check every 100ms until it returns nil, failing the test with
// its last error after timeout.
func Eventually(t testing.TB, what string, timeout time.Duration, check func(ctx context.Context) error) {
	t.Helper()
	waitFor(t, what, timeout, nil, func(ctx context.Context) (bool, error) {
		err := check(ctx)
		return err == nil, err
	})
}

// Get is metav1.GetOptions{}, to keep test lines short.
var Get = metav1.GetOptions{}

// ReadValues reads a values.yaml written by CreateToken.
func ReadValues(path string) (registration.Values, error) {
	var v registration.Values
	data, err := os.ReadFile(path)
	if err != nil {
		return v, err
	}
	err = yaml.Unmarshal(data, &v)
	return v, err
}

// Registered says whether the agent of ds has stored an identity: its fleet-agent
// Secret holds a token or a certificate (before that it may hold only the agent's
// key).
func Registered(ctx context.Context, ds *Cluster) error {
	secret, err := ds.Client().CoreV1().Secrets("cattle-fleet-system").Get(ctx, "fleet-agent", Get)
	if err != nil {
		return err
	}
	if len(secret.Data["token"]) == 0 && len(secret.Data["certificate"]) == 0 {
		return fmt.Errorf("%s: the identity Secret holds no credential yet", ds.Name)
	}
	return nil
}

// Identity reads the cluster identity the agent stored in ds's fleet-agent Secret.
func Identity(t testing.TB, ds *Cluster) registration.Credential {
	t.Helper()
	secret, err := ds.Client().CoreV1().Secrets("cattle-fleet-system").Get(context.Background(), "fleet-agent", Get)
	if err != nil {
		t.Fatalf("%s: reading the identity Secret: %v", ds.Name, err)
	}
	cred, err := registration.CredentialFromSecretData(secret.Data)
	if err != nil {
		t.Fatalf("%s: %v", ds.Name, err)
	}
	return cred
}

// As returns clients for this cluster that authenticate with a bearer token only,
// such as an agent's identity or a registration token.
func (c *Cluster) As(token string) (kubernetes.Interface, versioned.Interface) {
	c.t.Helper()
	cfg := rest.AnonymousClientConfig(c.RESTConfig())
	cfg.BearerToken = token
	return ClientsFor(c.t, cfg)
}

// ClientsFor returns the Kubernetes and Fleet clients of cfg.
func ClientsFor(t testing.TB, cfg *rest.Config) (kubernetes.Interface, versioned.Interface) {
	t.Helper()
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	fleetClient, err := versioned.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return kube, fleetClient
}

// AsCluster returns clients for this cluster (the hub) that authenticate as cred, the
// identity of the agent whose key is in namespace of ds: with its certificate and
// that key, or with its token.
func (c *Cluster) AsCluster(ds *Cluster, namespace string, cred registration.Credential) (kubernetes.Interface, versioned.Interface) {
	c.t.Helper()
	cfg, _, err := registration.Downstream{Client: ds.Client(), Namespace: namespace}.HubClient(context.Background(), cred)
	if err != nil {
		c.t.Fatal(err)
	}
	return ClientsFor(c.t, cfg)
}

// StartAgentsSharingACluster runs n agents in namespaces agent-00, agent-01, ... of
// one downstream cluster ds, each with what the chart would write there (bootstrap
// Secret with values, ConfigMap with clientID "twenty-<namespace>", labels
// fleet=twenty, and settings), since n real clusters do not fit on one machine.
// It returns the namespaces.
func StartAgentsSharingACluster(t testing.TB, ds *Cluster, values registration.Values, n int, settings map[string]string) []string {
	t.Helper()
	ctx := context.Background()
	client := ds.Client()
	var namespaces []string
	for i := 0; i < n; i++ {
		ns := fmt.Sprintf("agent-%02d", i)
		if _, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: names.AgentBootstrapSecret},
			StringData: map[string]string{
				registration.KeyToken: values.Token, registration.KeyTokenName: values.TokenName, registration.KeyAPIServerURL: values.APIServerURL,
				registration.KeyAPIServerCA: values.APIServerCA, registration.KeyClusterNamespace: values.ClusterNamespace,
				registration.KeySystemRegistrationNamespace: values.SystemRegistrationNamespace,
			},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		data := map[string]string{"clientID": "twenty-" + ns, "labels": `{"fleet":"twenty"}`}
		for k, v := range settings {
			data[k] = v
		}
		if _, err := client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: names.AgentConfigMap}, Data: data,
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		namespaces = append(namespaces, ns)
	}
	for _, ns := range namespaces {
		StartAgentIn(t, ds, ns)
	}
	return namespaces
}

// Downstream is a downstream control plane registered with a hub, and its agent.
type Downstream struct {
	*Cluster
	Agent *Process
	// ClusterName is its Cluster's name on the hub.
	ClusterName string
}

// RegisterClusters starts a control plane for each key of envs, installs the agent
// chart into it with a token of workspace and the label env=<value> (and extra helm
// flags), runs the agent, and returns once every one has registered.
func RegisterClusters(t testing.TB, hub *Hub, workspace string, envs map[string]string, extra ...string) []*Downstream {
	t.Helper()
	return registerClusters(t, hub, workspace, envs, nil, extra)
}

// RegisterSimulatedClusters is RegisterClusters with control planes that report
// workloads rolled out (hub controlplane --simulate-workloads), so that Bundles of
// Deployments and LoadBalancer Services turn Ready.
func RegisterSimulatedClusters(t testing.TB, hub *Hub, workspace string, envs map[string]string, extra ...string) []*Downstream {
	t.Helper()
	return registerClusters(t, hub, workspace, envs, []string{"--simulate-workloads"}, extra)
}

func registerClusters(t testing.TB, hub *Hub, workspace string, envs map[string]string, controlPlaneArgs, extra []string) []*Downstream {
	t.Helper()
	values := hub.CreateToken(workspace, "token", "")
	var out []*Downstream
	for name, value := range envs {
		ds := StartControlPlane(t, name, controlPlaneArgs...)
		args := append([]string{"--set-string", "labels.env=" + value, "--set", "monitorInterval=2s"}, extra...)
		InstallAgent(t, ds, values, args...)
		out = append(out, &Downstream{Cluster: ds, Agent: StartAgent(t, ds)})
	}
	for _, d := range out {
		Eventually(t, d.Name+" to register", 2*time.Minute, func(ctx context.Context) error {
			return Registered(ctx, d.Cluster)
		})
		d.ClusterName = Identity(t, d.Cluster).ClusterName
	}
	return out
}
