// Package hub runs the Flotilla hub: it brings up (or connects to) a Kubernetes API,
// installs the fleet.cattle.io CRDs and runs the hub controllers in the replica that
// holds the leader Lease.
package hub

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla/flotilla/pkg/controllers"
	"github.com/flotilla/flotilla/pkg/controlplane"
	"github.com/flotilla/flotilla/pkg/crds"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/health"
	"github.com/flotilla/flotilla/pkg/kubeconfig"
	"github.com/flotilla/flotilla/pkg/leader"
	"github.com/flotilla/flotilla/pkg/metrics"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/node/launch"
	"github.com/flotilla/flotilla/pkg/registration"
	"github.com/flotilla/flotilla/pkg/webhook"
)

// Options configure a hub.
type Options struct {
	// Kubeconfig points at an existing cluster to run against. Empty means in-cluster
	// when running in a Pod, and otherwise an embedded control plane.
	Kubeconfig string
	// ControlPlane configures the embedded control plane.
	ControlPlane controlplane.Config
	// Settings are the controllers' settings. An empty APIServerURL/APIServerCA is
	// filled from the embedded control plane, or from the kubeconfig's cluster.
	Settings controllers.Settings
	// QPS and Burst limit the hub's requests to the API server.
	QPS   float32
	Burst int
	// HealthProbeBindAddress is where /healthz and /readyz are served; "0" turns
	// them off.
	HealthProbeBindAddress string
	// MetricsBindAddress is where /metrics is served; "0" turns it off. Every
	// replica serves it, leading or not.
	MetricsBindAddress string
	// WebhookBindAddress is where Git servers' push events are received; "0" turns
	// it off.
	WebhookBindAddress string
	// WebhookLimits bound what the push event listener holds; zero takes
	// webhook.DefaultLimits.
	WebhookLimits webhook.Limits
	// Profiling serves the hub's Go profiles at /debug/pprof on MetricsBindAddress.
	Profiling bool
	// LeaderElection times the hub's Lease; zero fields take leader.DefaultConfig's.
	LeaderElection leader.Config
	// IdentityCACertFile and IdentityCAKeyFile, for a hub run against a cluster
	// (Kubeconfig), are a CA that cluster's API server trusts for client
	// certificates: the hub signs cluster identities with it. The embedded control
	// plane has one of its own.
	IdentityCACertFile, IdentityCAKeyFile string
	// ClusterIdentities is "certificates" (the default where the hub can sign them)
	// or "tokens", ServiceAccount tokens, e.g. behind a proxy that terminates TLS
	// and so drops client certificates.
	ClusterIdentities string
	// Announce is called once the embedded control plane is ready, to tell the user
	// where its kubeconfig is.
	Announce func(cp *controlplane.ControlPlane)
}

// leaderConfig is the Lease configuration, the defaults filling what is unset.
func (o Options) leaderConfig() leader.Config {
	cfg := leader.DefaultConfig(names.SystemNamespace, names.HubLease)
	if o.LeaderElection.LeaseDuration > 0 {
		cfg.LeaseDuration = o.LeaderElection.LeaseDuration
	}
	if o.LeaderElection.RenewDeadline > 0 {
		cfg.RenewDeadline = o.LeaderElection.RenewDeadline
	}
	if o.LeaderElection.RetryPeriod > 0 {
		cfg.RetryPeriod = o.LeaderElection.RetryPeriod
	}
	return cfg
}

// Embedded reports whether these options start an embedded control plane.
func (o Options) Embedded() bool {
	return o.Kubeconfig == "" && !inCluster()
}

func inCluster() bool {
	return os.Getenv("KUBERNETES_SERVICE_HOST") != "" && os.Getenv("KUBERNETES_SERVICE_PORT") != ""
}

// Run runs the hub until ctx ends.
func Run(ctx context.Context, opts Options) error {
	var (
		cfg    *rest.Config
		cp     *controlplane.ControlPlane
		err    error
		probes health.Server
	)
	// Probes answer from the start, so an orchestrator sees "alive, not ready"
	// while the control plane and CRDs come up.
	if err := probes.Serve(ctx, opts.HealthProbeBindAddress); err != nil {
		return err
	}
	if err := metrics.Serve(ctx, opts.MetricsBindAddress, opts.Profiling); err != nil {
		return fmt.Errorf("--metrics-bind-address: %w", err)
	}
	if opts.Embedded() {
		cp, err = controlplane.Start(ctx, opts.ControlPlane)
		if err != nil {
			return err
		}
		cfg = cp.HubRESTConfig
	} else {
		cfg, err = kubeconfig.Load(opts.Kubeconfig)
		if err != nil {
			return err
		}
	}
	cfg = rest.CopyConfig(cfg)
	cfg.UserAgent = "flotilla-hub"
	// client-go's default of 5 requests/s would serialise registrations; the API
	// server's priority and fairness protects it from a busy hub.
	cfg.QPS, cfg.Burst = opts.QPS, opts.Burst

	if err := crds.Apply(ctx, cfg); err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	if err := ensureNamespaces(ctx, client, names.SystemNamespace, names.RegistrationNamespace); err != nil {
		return err
	}
	fleetClient, err := versioned.NewForConfig(cfg)
	if err != nil {
		return err
	}
	hook := &webhook.Handler{Fleet: fleetClient, Kube: client, Namespace: names.SystemNamespace, Log: logrus.WithField("component", "webhook")}
	if opts.WebhookBindAddress != "" && opts.WebhookBindAddress != "0" {
		limits := opts.WebhookLimits
		if limits == (webhook.Limits{}) {
			limits = webhook.DefaultLimits()
		}
		if err := webhook.Serve(ctx, opts.WebhookBindAddress, hook, limits); err != nil {
			return err
		}
		hook.Start(ctx)
	}
	probes.SetReady(true)
	if cp != nil && opts.Announce != nil {
		opts.Announce(cp)
	}

	settings := opts.Settings
	if settings.APIServerURL == "" {
		settings.APIServerURL = cfg.Host
		if cp != nil {
			settings.APIServerURL = cp.URL
		}
		if !opts.Embedded() && inCluster() {
			logrus.WithField("url", settings.APIServerURL).Warn("Agents will be told the in-cluster API address, which downstream clusters rarely reach; set --api-server-url")
		}
	}
	if len(settings.APIServerCA) == 0 {
		settings.APIServerCA, err = caOf(cfg)
		if err != nil {
			return err
		}
		if cp != nil {
			settings.APIServerCA = cp.CAPEM
		}
	}
	var embedded *controlplane.Config
	if cp != nil {
		embedded = &opts.ControlPlane
	}
	settings.ImportAddresses.Own = ownEndpoints(cfg, embedded, settings.APIServerURL)
	settings.GitRepoAddresses.Own = settings.ImportAddresses.Own
	settings.APIServerAuthorizesIdentities, err = controlplane.AuthorizesClusterIdentities(ctx, client)
	if err != nil {
		logrus.WithError(err).Warn("Creating RBAC objects for every cluster identity")
	} else if !settings.APIServerAuthorizesIdentities {
		logrus.Info("The API server does not authorize cluster identities itself: creating RBAC objects for every cluster identity")
	}
	if settings.Signer, err = identitySigner(opts, cp); err != nil {
		return err
	}
	switch {
	case settings.Signer != nil && settings.APIServerAuthorizesIdentities:
		logrus.Info("Cluster identities are x509 client certificates for the agents' keys")
	case settings.Signer != nil:
		logrus.Warn("The API server does not authorize cluster identities itself: cluster identities are ServiceAccount tokens, not certificates")
	case opts.ClusterIdentities == IdentityTokens:
		logrus.Info("Cluster identities are ServiceAccount tokens (--cluster-identities=tokens)")
	default:
		logrus.Info("No identity CA (--identity-ca-cert-file): cluster identities are ServiceAccount tokens")
	}
	manager, err := controllers.New(cfg, settings)
	if err != nil {
		return err
	}
	if cp != nil {
		// A control plane that fails ends the hub instead of leaving it electing
		// leaders against an API server that is gone.
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		defer cancel()
		go func() {
			<-cp.Done()
			cancel()
		}()
	}
	electionErr := leader.Run(ctx, client, opts.leaderConfig(), manager.Start)
	if cp != nil {
		if err := cp.Wait(); err != nil && electionErr == nil {
			return err
		}
	}
	return electionErr
}

// The kinds of cluster identity (--cluster-identities).
const (
	IdentityCertificates = "certificates"
	IdentityTokens       = "tokens"
)

// identitySigner is the signer of cluster identity certificates: the embedded control
// plane's identity CA, or the one the flags name; nil without either.
func identitySigner(opts Options, cp *controlplane.ControlPlane) (*registration.IdentitySigner, error) {
	switch opts.ClusterIdentities {
	case "", IdentityCertificates:
	case IdentityTokens:
		return nil, nil
	default:
		return nil, fmt.Errorf("--cluster-identities %q: want %s or %s", opts.ClusterIdentities, IdentityCertificates, IdentityTokens)
	}
	if cp != nil {
		return cp.IdentitySigner()
	}
	if opts.IdentityCACertFile == "" && opts.IdentityCAKeyFile == "" {
		return nil, nil
	}
	if opts.IdentityCACertFile == "" || opts.IdentityCAKeyFile == "" {
		return nil, errors.New("--identity-ca-cert-file and --identity-ca-key-file go together")
	}
	signer, err := registration.LoadIdentitySigner(opts.IdentityCACertFile, opts.IdentityCAKeyFile)
	if err != nil {
		return nil, fmt.Errorf("--identity-ca-cert-file, --identity-ca-key-file: %w", err)
	}
	return signer, nil
}

// ownEndpoints are the addresses of the hub's own API server, which an imported
// cluster's kubeconfig may not name: the URL the hub uses, the one agents are told,
// the in-cluster Service, and the embedded API server's listening address.
func ownEndpoints(cfg *rest.Config, embedded *controlplane.Config, urls ...string) []netip.AddrPort {
	var hostPorts []string
	for _, raw := range append([]string{cfg.Host}, urls...) {
		if u, err := url.Parse(raw); err == nil && u.Host != "" {
			port := u.Port()
			if port == "" {
				port = "443"
			}
			hostPorts = append(hostPorts, net.JoinHostPort(u.Hostname(), port))
		}
	}
	if inCluster() {
		hostPorts = append(hostPorts, net.JoinHostPort(os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")))
	}
	if embedded != nil {
		hostPorts = append(hostPorts, net.JoinHostPort(embedded.BindAddress.String(), strconv.Itoa(embedded.SecurePort)))
	}
	return kubeconfig.Endpoints(hostPorts...)
}

// caOf returns the CA a client configuration trusts, as PEM.
func caOf(cfg *rest.Config) ([]byte, error) {
	if len(cfg.CAData) > 0 {
		return cfg.CAData, nil
	}
	if cfg.CAFile != "" {
		data, err := os.ReadFile(cfg.CAFile)
		if err != nil {
			return nil, fmt.Errorf("reading the API server CA %s: %w", cfg.CAFile, err)
		}
		return data, nil
	}
	return nil, nil
}

// ensureNamespaces creates the hub's system namespaces if they are missing.
func ensureNamespaces(ctx context.Context, client kubernetes.Interface, namespaces ...string) error {
	for _, ns := range namespaces {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{
			ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{names.ManagedLabel: "true"}},
		}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating namespace %s: %w", ns, err)
		}
	}
	return nil
}

// ControlPlaneOnly runs just the embedded control plane until ctx ends: a local
// downstream cluster for trying Flotilla on one machine, and for tests.
func ControlPlaneOnly(ctx context.Context, cfg controlplane.Config, opts ControlPlaneOptions, announce func(*controlplane.ControlPlane)) error {
	parent := ctx
	ctx, stopControlPlane := context.WithCancel(ctx)
	defer stopControlPlane()
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(cp.RESTConfig)
	if err != nil {
		return err
	}
	if opts.SimulateWorkloads {
		go controlplane.SimulateWorkloads(ctx, client)
	}
	var nodeProc *launch.Process
	if cfg.Node != nil {
		nodeCfg := launch.Options{
			DataDir:        filepath.Join(cfg.DataDir, "node"),
			CredentialsDir: controlplane.NodeCredentialsDir(cfg.DataDir),
			Name:           cfg.Node.Name,
			IP:             cfg.Node.IP,
			Images:         opts.NodeImages,
		}
		if nodeProc, err = launch.Start(ctx, nodeCfg); err != nil {
			return err
		}
		logrus.WithFields(logrus.Fields{"node": cfg.Node.Name, "log": nodeProc.Log}).Info("Starting the node")
		if err := nodeProc.WaitReady(ctx, client, cfg.Node.Name, 3*time.Minute); err != nil {
			return err
		}
		logrus.WithField("node", cfg.Node.Name).Info("Node is Ready")
	}
	if announce != nil {
		announce(cp)
	}
	if nodeProc == nil {
		return cp.Wait()
	}
	// The node stops with ctx; a node that stops by itself stops everything, with
	// its error, and the control plane stops when the node has cleaned up.
	select {
	case <-cp.Done():
		nodeErr := nodeProc.Wait()
		if err := cp.Wait(); err != nil {
			return err
		}
		return nodeErr
	case <-nodeProc.Done():
		nodeErr := nodeProc.Wait()
		if parent.Err() == nil && nodeErr == nil {
			nodeErr = errors.New("the node stopped")
		}
		stopControlPlane()
		_ = cp.Wait()
		return nodeErr
	}
}

// ControlPlaneOptions are what "hub controlplane" runs beside the control plane.
type ControlPlaneOptions struct {
	// SimulateWorkloads reports Deployments rolled out without running anything.
	SimulateWorkloads bool
	// NodeImages are the image tarballs a node (controlplane.Config.Node) loads.
	NodeImages []string
}

// DefaultBindAddress is where the embedded API server listens unless told otherwise:
// every interface, as kube-apiserver does, so agents on other machines reach it.
var DefaultBindAddress = net.IPv4zero
