package controlplane

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	"go.etcd.io/etcd/server/v3/embed"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/klog/v2"

	"github.com/flotilla/flotilla/pkg/kubeconfig"
	"github.com/flotilla/flotilla/pkg/registration"
)

// Config says where a control plane keeps its state and where it listens.
type Config struct {
	// DataDir holds etcd's data, the PKI and the kubeconfigs.
	DataDir string
	// BindAddress is the address the API server listens on; 0.0.0.0 for all.
	BindAddress net.IP
	// SecurePort is the API server's HTTPS port.
	SecurePort int
	// TLSSANs are extra names or addresses for the serving certificate, such as the
	// address agents in other networks use to reach the hub.
	TLSSANs []string
	// Profiling serves the API server's Go profiles at /debug/pprof (to its admins).
	Profiling bool
	// IdentityAuthorizer authorizes cluster identities in the API server itself, so
	// the hub creates no RBAC objects for them (see identityAuthorizer).
	IdentityAuthorizer bool
	// Workloads runs the controllers that Pods need: a "default" ServiceAccount and
	// the kube-root-ca.crt ConfigMap in every namespace. A hub's control plane runs
	// no Pods and goes without, saving two writes for every per-cluster namespace.
	Workloads bool
	// Node, when set, makes this control plane ready for a node (flotilla-node) to
	// join: credentials for its kubelet, kube-proxy and scheduler, the Node
	// authorizer, the workload controllers, and the "kubernetes" Service pointing at
	// the node's address so that Pods reach the API server.
	Node *NodeConfig
	// MaxTokenExpiration is the longest lifetime of a ServiceAccount token the API
	// server issues; zero leaves it unbounded.
	MaxTokenExpiration time.Duration
	// PodSecurity is the Pod Security Standards level enforced in namespaces that
	// do not label one (PodSecurityLevels); empty is DefaultPodSecurity.
	PodSecurity string
}

// DefaultMaxTokenExpiration is a year: the longest credential the hub hands out, that
// of a registration token without a TTL.
const DefaultMaxTokenExpiration = 365 * 24 * time.Hour

// ControlPlane is a running embedded control plane.
type ControlPlane struct {
	cfg  Config
	pki  *pki
	etcd *embed.Etcd

	// AdminKubeconfig is the path of a cluster-admin kubeconfig, rewritten on every start.
	AdminKubeconfig string
	// RESTConfig is a cluster-admin client configuration, the one AdminKubeconfig holds.
	RESTConfig *rest.Config
	// HubRESTConfig is the client configuration of the hub's controllers: a cluster
	// administrator too, but named HubUsername.
	HubRESTConfig *rest.Config
	// URL is the API server's address as clients on this machine reach it.
	URL string
	// CAPEM is the CA certificate that signed the serving certificate.
	CAPEM []byte
	// ComponentLog is the file kube-apiserver and kube-controller-manager log to.
	ComponentLog string

	stopped chan struct{}
	// admissionConfig is the API server's admission configuration file.
	admissionConfig string
	err             error
}

// LogFile is where the Kubernetes components of a control plane under dataDir log.
func LogFile(dataDir string) string { return filepath.Join(dataDir, "logs", "controlplane.log") }

// Start starts etcd, kube-apiserver and the needed kube-controller-manager controllers
// and returns once the API server is ready. Everything stops when ctx ends; Wait
// returns after that.
func Start(ctx context.Context, cfg Config) (*ControlPlane, error) {
	if cfg.DataDir == "" {
		return nil, errors.New("controlplane: no data directory")
	}
	if cfg.BindAddress == nil {
		cfg.BindAddress = net.IPv4zero
	}
	dataDir, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = dataDir
	if err := os.MkdirAll(filepath.Join(dataDir, "logs"), 0o700); err != nil {
		return nil, fmt.Errorf("creating data directory %s: %w", dataDir, err)
	}
	if err := checkPortFree(cfg.BindAddress, cfg.SecurePort); err != nil {
		return nil, err
	}
	if err := redirectKubernetesLogs(LogFile(dataDir)); err != nil {
		return nil, err
	}

	c := &ControlPlane{cfg: cfg, stopped: make(chan struct{}), ComponentLog: LogFile(dataDir)}
	c.pki, err = ensurePKI(filepath.Join(dataDir, "pki"), servingSANs(cfg.BindAddress, cfg.TLSSANs))
	if err != nil {
		return nil, err
	}
	if cfg.Node != nil {
		if err := c.pki.ensureNodeLeaves(*cfg.Node); err != nil {
			return nil, err
		}
	}
	if c.admissionConfig, err = c.writeAdmissionConfig(); err != nil {
		return nil, err
	}
	c.CAPEM = c.pki.caPEM()
	c.URL = "https://" + net.JoinHostPort(clientHost(cfg.BindAddress), strconv.Itoa(cfg.SecurePort))

	c.AdminKubeconfig = filepath.Join(dataDir, "admin.kubeconfig")
	if err := c.writeKubeconfig(adminName, "flotilla", c.AdminKubeconfig); err != nil {
		return nil, err
	}
	controllerMgrKubeconfig := filepath.Join(dataDir, "pki", "controller-manager.kubeconfig")
	if err := c.writeKubeconfig(controllerMgrName, "flotilla", controllerMgrKubeconfig); err != nil {
		return nil, err
	}
	if cfg.Node != nil {
		if err := c.writeNodeCredentials(); err != nil {
			return nil, err
		}
	}
	c.RESTConfig, err = kubeconfig.Load(c.AdminKubeconfig)
	if err != nil {
		return nil, err
	}
	if c.HubRESTConfig, err = c.clientConfig(hubName, "flotilla"); err != nil {
		return nil, err
	}

	// Components stop in reverse order: the API server drains before etcd closes.
	runCtx, stop := context.WithCancel(ctx)
	etcd, etcdURL, err := startEtcd(runCtx, filepath.Join(dataDir, "etcd"), filepath.Join(dataDir, "logs", "etcd.log"))
	if err != nil {
		stop()
		return nil, err
	}
	c.etcd = etcd

	apiDone := make(chan error, 1)
	if err := c.runAPIServer(runCtx, etcdURL, apiDone); err != nil {
		stop()
		etcd.Close()
		return nil, err
	}
	if err := c.waitReady(runCtx, apiDone); err != nil {
		stop()
		<-apiDone
		etcd.Close()
		return nil, err
	}
	kcmDone := make(chan error, 1)
	if err := c.runControllerManager(runCtx, controllerMgrKubeconfig, kcmDone); err != nil {
		stop()
		<-apiDone
		etcd.Close()
		return nil, err
	}

	go func() {
		var apiErr error
		select {
		case apiErr = <-apiDone:
		case err := <-etcd.Err():
			apiErr = fmt.Errorf("etcd stopped: %w", err)
		case <-runCtx.Done():
			apiErr = <-apiDone
		}
		stop()
		if err := <-kcmDone; err != nil {
			logrus.WithError(err).Warn("kube-controller-manager stopped with an error")
		}
		etcd.Close()
		klog.Flush()
		c.err = apiErr
		close(c.stopped)
	}()
	return c, nil
}

// Done is closed once the control plane has stopped.
func (c *ControlPlane) Done() <-chan struct{} { return c.stopped }

// Wait blocks until the control plane has stopped and returns why, if not because
// its context ended.
func (c *ControlPlane) Wait() error {
	<-c.stopped
	if errors.Is(c.err, context.Canceled) {
		return nil
	}
	return c.err
}

func (c *ControlPlane) writeKubeconfig(credentialName, contextName, path string) error {
	cfg, err := c.kubeconfig(credentialName, contextName)
	if err != nil {
		return err
	}
	return kubeconfig.Write(cfg, path)
}

// clientConfig is the client configuration of a credential ensurePKI issued, kept
// in memory only.
func (c *ControlPlane) clientConfig(credentialName, contextName string) (*rest.Config, error) {
	cfg, err := c.kubeconfig(credentialName, contextName)
	if err != nil {
		return nil, err
	}
	return kubeconfig.RESTConfig(cfg)
}

func (c *ControlPlane) kubeconfig(credentialName, contextName string) (*clientcmdapi.Config, error) {
	certPEM, keyPEM, err := c.pki.clientCredential(credentialName)
	if err != nil {
		return nil, fmt.Errorf("reading the %s credential: %w", credentialName, err)
	}
	return kubeconfig.New(contextName, c.URL, c.CAPEM, kubeconfig.Credential{ClientCertificatePEM: certPEM, ClientKeyPEM: keyPEM}), nil
}

// waitReady polls /readyz until the API server answers ok. The server starts in
// seconds, so a short fixed interval is enough.
func (c *ControlPlane) waitReady(ctx context.Context, apiDone <-chan error) error {
	client, err := kubernetes.NewForConfig(c.RESTConfig)
	if err != nil {
		return err
	}
	var lastErr error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(ctx context.Context) (bool, error) {
		select {
		case err := <-apiDone:
			return false, fmt.Errorf("kube-apiserver stopped while starting: %w (see %s)", err, LogFile(c.cfg.DataDir))
		default:
		}
		_, lastErr = client.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		return lastErr == nil, nil
	})
	if err != nil && lastErr != nil {
		return fmt.Errorf("kube-apiserver not ready: %w (last answer: %v; see %s)", err, lastErr, LogFile(c.cfg.DataDir))
	}
	return err
}

// clientHost is the host clients on this machine use for an API server bound to addr.
func clientHost(addr net.IP) string {
	if addr.IsUnspecified() {
		if addr.To4() == nil {
			return "::1"
		}
		return "127.0.0.1"
	}
	return addr.String()
}

// checkPortFree turns "address already in use" into a message that names the flag.
func checkPortFree(addr net.IP, port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort(addr.String(), strconv.Itoa(port)))
	if err != nil {
		return fmt.Errorf("cannot listen on %s port %d (is another hub or API server running? choose another with --secure-port): %w", addr, port, err)
	}
	return l.Close()
}

// redirectKubernetesLogs sends the klog output of kube-apiserver and
// kube-controller-manager to a file, keeping the terminal for the hub's own log.
func redirectKubernetesLogs(path string) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("opening the control plane log %s: %w", path, err)
	}
	flags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(flags)
	for name, value := range map[string]string{
		"logtostderr":     "false",
		"alsologtostderr": "false",
		// Errors of the Kubernetes components are often transient start-up noise;
		// they stay in the file, only fatal ones reach the terminal.
		"stderrthreshold": "FATAL",
	} {
		if err := flags.Set(name, value); err != nil {
			return fmt.Errorf("configuring the control plane log: %w", err)
		}
	}
	klog.SetOutput(io.Writer(f))
	return nil
}

// IdentitySigner signs cluster identities' client certificates with the control
// plane's identity CA, which its API server trusts for client certificates.
func (c *ControlPlane) IdentitySigner() (*registration.IdentitySigner, error) {
	return registration.LoadIdentitySigner(c.pki.certFile(identityCAName), c.pki.keyFile(identityCAName))
}

// IdentityCAFiles are the identity CA's certificate and key files, for a hub run
// against this control plane with --kubeconfig.
func (c *ControlPlane) IdentityCAFiles() (certFile, keyFile string) {
	return c.pki.certFile(identityCAName), c.pki.keyFile(identityCAName)
}
