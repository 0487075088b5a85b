// Command hub is the Flotilla hub. Alone it runs an embedded Kubernetes control plane
// with the hub controllers; with --kubeconfig (or in a Pod) it runs the controllers
// against an existing cluster; "hub controlplane" runs only a control plane.
package main

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/flotilla/flotilla/pkg/controllers"
	"github.com/flotilla/flotilla/pkg/controllers/gitrepo"
	"github.com/flotilla/flotilla/pkg/controlplane"
	"github.com/flotilla/flotilla/pkg/hub"
	kubecfg "github.com/flotilla/flotilla/pkg/kubeconfig"
	"github.com/flotilla/flotilla/pkg/leader"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/node/launch"
	"github.com/flotilla/flotilla/pkg/signals"
	"github.com/flotilla/flotilla/pkg/version"
	"github.com/flotilla/flotilla/pkg/webhook"
)

func main() {
	// Kubernetes packages register their own global flags (such as a non-boolean
	// --version); cobra would merge them into the hub's. The hub has only its own.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
	if err := newRootCommand().Execute(); err != nil {
		logrus.Error(err)
		os.Exit(1)
	}
}

// controlPlaneFlags are the flags shared by "hub" and "hub controlplane".
type controlPlaneFlags struct {
	dataDir     string
	bindAddress string
	securePort  int
	tlsSANs     []string
	profiling   bool
	maxToken    time.Duration
	podSecurity string
}

func (f *controlPlaneFlags) register(cmd *cobra.Command, defaultDataDir string, defaultPort int) {
	cmd.Flags().StringVar(&f.dataDir, "data-dir", defaultDataDir, "directory for the embedded control plane's etcd data, certificates and admin.kubeconfig")
	cmd.Flags().StringVar(&f.bindAddress, "bind-address", hub.DefaultBindAddress.String(), "address the embedded API server listens on (0.0.0.0 for all interfaces)")
	cmd.Flags().IntVar(&f.securePort, "secure-port", defaultPort, "HTTPS port of the embedded API server")
	cmd.Flags().BoolVar(&f.profiling, "profiling", false, "serve Go profiles at /debug/pprof: the embedded API server's (to its admins) and the hub's on --metrics-bind-address")
	cmd.Flags().StringSliceVar(&f.tlsSANs, "tls-san", nil, "extra host names or IP addresses for the API server certificate, e.g. the address agents use to reach the hub")
	cmd.Flags().StringVar(&f.podSecurity, "pod-security", controlplane.DefaultPodSecurity, "Pod Security Standards level (privileged, baseline or restricted) the embedded API server enforces in namespaces without a pod-security.kubernetes.io/enforce label; kube-system is exempt")
	cmd.Flags().DurationVar(&f.maxToken, "service-account-max-token-expiration", controlplane.DefaultMaxTokenExpiration, "longest lifetime of a ServiceAccount token the embedded API server issues; a TokenRequest for longer gets this long")
}

func (f *controlPlaneFlags) config() (controlplane.Config, error) {
	ip := net.ParseIP(f.bindAddress)
	if ip == nil {
		return controlplane.Config{}, fmt.Errorf("--bind-address %q is not an IP address", f.bindAddress)
	}
	if f.securePort < 1 || f.securePort > 65535 {
		return controlplane.Config{}, fmt.Errorf("--secure-port %d is not a port number", f.securePort)
	}
	if f.maxToken < 10*time.Minute {
		return controlplane.Config{}, fmt.Errorf("--service-account-max-token-expiration %s is shorter than the 10 minutes the TokenRequest API allows", f.maxToken)
	}
	if !slices.Contains(controlplane.PodSecurityLevels, f.podSecurity) {
		return controlplane.Config{}, fmt.Errorf("--pod-security %q is none of %s", f.podSecurity, strings.Join(controlplane.PodSecurityLevels, ", "))
	}
	return controlplane.Config{DataDir: f.dataDir, BindAddress: ip, SecurePort: f.securePort, TLSSANs: f.tlsSANs, Profiling: f.profiling,
		MaxTokenExpiration: f.maxToken, PodSecurity: f.podSecurity}, nil
}

func defaultDataDir(name string) string {
	if dir := os.Getenv("XDG_DATA_HOME"); dir != "" {
		return filepath.Join(dir, name)
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".local", "share", name)
	}
	return name
}

func newRootCommand() *cobra.Command {
	var (
		cp                                               controlPlaneFlags
		identityCACert, identityCAKey, clusterIdentities string
		kubeconfig                                       string
		healthProbe                                      string
		metricsAddr                                      string
		webhookAddr                                      string
		webhookLimits                                    = webhook.DefaultLimits()
		caFile                                           string
		qps                                              float32
		burst                                            int
		debug                                            bool
		importAllowed                                    []string
		gitAllowed                                       []string
		settings                                         = controllers.DefaultSettings()
		election                                         = leader.DefaultConfig(names.SystemNamespace, names.HubLease)
	)
	cmd := &cobra.Command{
		Use:   "hub",
		Short: "Flotilla hub: registers downstream clusters and delivers bundles to them",
		Long: `Flotilla hub: a Fleet-compatible multi-cluster hub.

Without --kubeconfig, and outside a Pod, the hub starts its own Kubernetes control
plane (kube-apiserver and etcd) with data under --data-dir and writes an admin
kubeconfig to DATA_DIR/admin.kubeconfig. With --kubeconfig it runs against that
cluster instead, installing or updating the fleet.cattle.io CRDs there itself.`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		PersistentPreRun: func(*cobra.Command, []string) {
			if debug {
				logrus.SetLevel(logrus.DebugLevel)
			}
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			cpConfig, err := cp.config()
			if err != nil {
				return err
			}
			if caFile != "" {
				if settings.APIServerCA, err = os.ReadFile(caFile); err != nil {
					return fmt.Errorf("--api-server-ca-file: %w", err)
				}
			}
			if settings.GitRepoAddresses.Allowed, err = kubecfg.ParsePrefixes(gitAllowed); err != nil {
				return fmt.Errorf("--gitrepo-allowed-networks: %w", err)
			}
			if settings.ImportAddresses.Allowed, err = kubecfg.ParsePrefixes(importAllowed); err != nil {
				return fmt.Errorf("--import-allowed-networks: %w", err)
			}
			if settings.ClusterTokenTTL < 10*time.Minute {
				return fmt.Errorf("--cluster-token-ttl %s is shorter than the 10 minutes the TokenRequest API allows", settings.ClusterTokenTTL)
			}
			if settings.ClusterRecoveryTTL != 0 && settings.ClusterRecoveryTTL < settings.ClusterTokenTTL {
				return fmt.Errorf("--cluster-recovery-ttl %s is shorter than --cluster-token-ttl %s: recovery is for agents offline longer than their identity lasts (0 turns it off)",
					settings.ClusterRecoveryTTL, settings.ClusterTokenTTL)
			}
			opts := hub.Options{
				Settings:               settings,
				Kubeconfig:             kubeconfig,
				IdentityCACertFile:     identityCACert,
				IdentityCAKeyFile:      identityCAKey,
				ClusterIdentities:      clusterIdentities,
				ControlPlane:           cpConfig,
				HealthProbeBindAddress: healthProbe,
				MetricsBindAddress:     metricsAddr,
				WebhookBindAddress:     webhookAddr,
				WebhookLimits:          webhookLimits,
				QPS:                    qps,
				Burst:                  burst,
				LeaderElection:         election,
				Profiling:              cp.profiling,
				Announce:               announceHub,
			}
			if !(election.RetryPeriod > 0 && election.RetryPeriod < election.RenewDeadline && election.RenewDeadline < election.LeaseDuration) {
				return fmt.Errorf("leader election needs 0 < --leader-elect-retry-period (%s) < --leader-elect-renew-deadline (%s) < --leader-elect-lease-duration (%s)",
					election.RetryPeriod, election.RenewDeadline, election.LeaseDuration)
			}
			if opts.Embedded() {
				if err := tokensFit(cpConfig.MaxTokenExpiration, settings); err != nil {
					return err
				}
			}
			// The hub's own control plane authorizes cluster identities and runs no Pods.
			opts.ControlPlane.IdentityAuthorizer, opts.ControlPlane.Workloads = true, false
			ctx := signals.Context()
			if opts.Embedded() {
				logrus.WithField("dataDir", cpConfig.DataDir).Info("Starting the embedded control plane")
			}
			return hub.Run(ctx, opts)
		},
	}
	cmd.PersistentFlags().BoolVar(&debug, "debug", false, "log at debug level")
	cmd.Flags().StringVar(&kubeconfig, "kubeconfig", "", "run against the cluster of this kubeconfig instead of an embedded control plane")
	cmd.Flags().StringVar(&identityCACert, "identity-ca-cert-file", "", "with --kubeconfig: PEM certificate of a CA that cluster's API server trusts for client certificates (part of its --client-ca-file); the hub signs cluster identities with it, as x509 client certificates for the agents' keys, where that API server authorizes them (hub controlplane does; see docs/registration.md). The embedded control plane has its own")
	cmd.Flags().StringVar(&identityCAKey, "identity-ca-key-file", "", "with --kubeconfig: the key of --identity-ca-cert-file")
	cmd.Flags().StringVar(&clusterIdentities, "cluster-identities", hub.IdentityCertificates, "what a registered cluster's identity is: certificates (x509 client certificates for the agent's key, where the hub can sign them and its API server authorizes them) or tokens (ServiceAccount tokens, e.g. when agents reach the API server through a proxy that terminates TLS); Fleet's agent always gets a token")
	cmd.Flags().StringVar(&settings.APIServerURL, "api-server-url", "", "the hub API URL agents are told to use (default: the embedded API server's, or the kubeconfig's)")
	cmd.Flags().StringVar(&caFile, "api-server-ca-file", "", "PEM file of the CA agents are told to trust for --api-server-url (default: the embedded or kubeconfig CA)")
	cmd.Flags().DurationVar(&settings.ClusterTokenTTL, "cluster-token-ttl", settings.ClusterTokenTTL, "lifetime of a cluster identity's token; agents renew it before it ends (at least 10m)")
	cmd.Flags().DurationVar(&settings.ClusterRecoveryTTL, "cluster-recovery-ttl", settings.ClusterRecoveryTTL, "lifetime of a cluster's recovery token: an agent whose identity expired while it was offline for less than this comes back by proving its key; 0 turns recovery off")
	cmd.Flags().DurationVar(&settings.AgentTokenRenewAfter, "agent-token-renew-after", 0, "have agents renew their token this long after it was issued (default: half its lifetime)")
	cmd.Flags().StringSliceVar(&settings.KubeconfigSecretNamespaces, "kubeconfig-secret-namespaces", nil, "namespaces besides a Cluster's own that its spec.kubeConfigSecretNamespace may name")
	cmd.Flags().StringSliceVar(&gitAllowed, "gitrepo-allowed-networks", nil, "CIDRs (or addresses) a GitRepo's repository and the chart repositories its fleet.yaml files name may resolve to even though they are private, loopback, link-local or the hub's own API server, e.g. 10.0.0.0/8 for Git servers on the company network, 127.0.0.0/8 for one on the hub's machine")
	cmd.Flags().DurationVar(&settings.GitRepo.PollingInterval, "gitrepo-polling-interval", gitrepo.DefaultPollingInterval, "how often a GitRepo's branch is looked at for a new commit, unless its spec.pollingInterval says")
	cmd.Flags().DurationVar(&settings.GitRepo.FetchTimeout, "gitrepo-fetch-timeout", 2*time.Minute, "longest a GitRepo's look at its branch, and its checkout with its charts' downloads and the Bundles' writes, may each take once given a slot, and the wait for a slot")
	cmd.Flags().Int64Var(&settings.GitRepo.MaxCheckoutSize, "gitrepo-max-size", 256<<20, "bytes a GitRepo's download, and its checked-out files, may each take; a larger one is Accepted=False TooLarge")
	cmd.Flags().Int64Var(&settings.GitRepo.MaxSyncSize, "gitrepo-max-sync-size", gitrepo.DefaultMaxSyncSize, "bytes all the Bundles of one GitRepo's commit may take together, their files and downloaded charts, as the hub holds them while writing them; a GitRepo past it is Accepted=False TooLarge")
	cmd.Flags().Int64Var(&settings.GitRepo.FetchMemory, "gitrepo-fetch-memory", 512<<20, "bytes of memory one checkout's worker process may take; a repository that needs more is Accepted=False TooLarge")
	cmd.Flags().IntVar(&settings.GitRepo.ConcurrentFetches, "gitrepo-concurrent-fetches", 4, "checkouts run at the same time, and a quarter of the looks at branches; workspaces share both fairly")
	cmd.Flags().StringSliceVar(&importAllowed, "import-allowed-networks", nil, "CIDRs (or addresses) an imported cluster's kubeconfig server may resolve to even though they are loopback, link-local or the hub's own API server, e.g. 127.0.0.0/8 for downstream clusters on the hub's machine")
	cmd.Flags().BoolVar(&settings.FleetAgents, "fleet-agents", settings.FleetAgents, "register clusters whose agent is Fleet's (a ClusterRegistration, with no key to bind the Cluster to); they are upgraded to Flotilla's agent by their agent bundle")
	cmd.Flags().DurationVar(&settings.FleetAgentTokenTTL, "fleet-agent-token-ttl", settings.FleetAgentTokenTTL, "lifetime of the credential a Fleet agent registering gets; Fleet's agent cannot renew it, Flotilla's agent, which replaces it, does")
	cmd.Flags().DurationVar(&settings.RequestRetention, "request-retention", settings.RequestRetention, "how long an answered (granted or refused) ClusterRegistrationRequest or ClusterRegistration is kept, for its answer to be read, before the hub deletes it and its answer Secret")
	cmd.Flags().StringVar(&settings.AgentImageRepository, "agent-image-repository", "", "image repository of the agents the hub deploys and upgrades (default: the agent chart's, flotilla/agent); a change upgrades every agent through its agent bundle")
	cmd.Flags().StringVar(&settings.AgentImageTag, "agent-image-tag", "", "image tag of the agents the hub deploys and upgrades (default: the agent chart's appVersion, the hub's own version); a change upgrades every agent")
	cmd.Flags().Int64Var(&settings.MaxBundleSize, "max-bundle-size", settings.MaxBundleSize, "bytes a Bundle's resources may decode to; a Bundle over it is Processed=False ContentTooLarge")
	cmd.Flags().DurationVar(&settings.ImportTokenTTL, "import-token-ttl", settings.ImportTokenTTL, "lifetime of the registration token minted to deploy an imported cluster's agent")
	cmd.Flags().DurationVar(&settings.ClusterOfflineAfter, "cluster-offline-after", settings.ClusterOfflineAfter, "a Cluster whose agent has not checked in for this long is shown as offline (Ready=Unknown)")
	cmd.Flags().IntVar(&settings.Workers, "workers", settings.Workers, "concurrent reconciles per kind")
	cmd.Flags().Float32Var(&qps, "kube-api-qps", 500, "requests per second the hub may send to the Kubernetes API")
	cmd.Flags().IntVar(&burst, "kube-api-burst", 1000, "burst of requests the hub may send to the Kubernetes API")
	cmd.Flags().StringVar(&healthProbe, "health-probe-bind-address", "127.0.0.1:8081", "address of the /healthz and /readyz endpoints (unauthenticated: loopback by default; :8081 for all interfaces, as a Pod's probes need); 0 turns them off")
	cmd.Flags().DurationVar(&election.LeaseDuration, "leader-elect-lease-duration", election.LeaseDuration, "how long standby replicas wait after the leader's last renewal before taking over")
	cmd.Flags().DurationVar(&election.RenewDeadline, "leader-elect-renew-deadline", election.RenewDeadline, "how long the leader keeps trying to renew its Lease before it stops leading")
	cmd.Flags().DurationVar(&election.RetryPeriod, "leader-elect-retry-period", election.RetryPeriod, "how often replicas try to acquire or renew the Lease")
	cmd.Flags().StringVar(&webhookAddr, "webhook-bind-address", "0", "address of the endpoint for Git servers' push events (GitHub, GitLab, Gitea, Bitbucket), verified with the secrets of Secret cattle-fleet-system/gitjob-webhook; e.g. :8082; 0 turns it off")
	cmd.Flags().IntVar(&webhookLimits.MaxConnections, "webhook-max-connections", webhookLimits.MaxConnections, "open connections the push event endpoint holds; a new one past them is answered 503")
	cmd.Flags().IntVar(&webhookLimits.MaxConnectionsPerClient, "webhook-max-connections-per-client", webhookLimits.MaxConnectionsPerClient, "open connections the push event endpoint holds from one address; a new one past them is answered 429 (behind a proxy or SNAT every Git server has the proxy's address)")
	cmd.Flags().Int64Var(&webhookLimits.MaxMemory, "webhook-max-memory", webhookLimits.MaxMemory, "bytes of push events the endpoint holds while reading them; an event past them is answered 503")
	cmd.Flags().DurationVar(&webhookLimits.ReadTimeout, "webhook-read-timeout", webhookLimits.ReadTimeout, "longest a push event's request may take to arrive (its header a fifth of it); a slower one is answered 408")
	cmd.Flags().StringVar(&metricsAddr, "metrics-bind-address", "127.0.0.1:8080", "address of the Prometheus /metrics endpoint (unauthenticated: loopback by default; :8080 for all interfaces); 0 turns it off")
	cp.register(cmd, defaultDataDir("flotilla"), 6443)
	cmd.AddCommand(newControlPlaneCommand(), newTokenCommand(), newClusterCommand(), newBundleCommand(), newApplyCommand(), newTestCommand(), newMigrateCommand(), newGitFetchWorkerCommand())
	return cmd
}

// tokensFit says whether the embedded API server issues tokens as long as the hub
// hands out: a shorter --service-account-max-token-expiration would cut them short
// without a word.
func tokensFit(maxToken time.Duration, settings controllers.Settings) error {
	for _, lifetime := range []struct {
		what string
		ttl  time.Duration
	}{
		{"--cluster-token-ttl", settings.ClusterTokenTTL},
		{"--cluster-recovery-ttl", settings.ClusterRecoveryTTL},
		{"--import-token-ttl", settings.ImportTokenTTL},
		{"the credential lifetime of a registration token without a TTL", settings.NoTTLTokenLifetime},
	} {
		if lifetime.ttl > maxToken {
			return fmt.Errorf("--service-account-max-token-expiration %s is shorter than %s (%s): raise it", maxToken, lifetime.what, lifetime.ttl)
		}
	}
	return nil
}

func newControlPlaneCommand() *cobra.Command {
	var (
		cp         controlPlaneFlags
		simulate   bool
		identities bool
		workloads  bool
		withNode   bool
		nodeName   string
		nodeIP     net.IP
		nodeImages []string
	)
	cmd := &cobra.Command{
		Use:   "controlplane",
		Short: "Run only an embedded Kubernetes control plane (a local downstream cluster)",
		Long: `Run only an embedded Kubernetes control plane: kube-apiserver, etcd and the
controllers that a cluster without nodes needs. Use it as a local downstream cluster
to try Flotilla on one machine.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cpConfig, err := cp.config()
			if err != nil {
				return err
			}
			if simulate && !workloads {
				return errors.New("--simulate-workloads needs the controllers of --workloads")
			}
			if simulate && withNode {
				return errors.New("--simulate-workloads and --node exclude each other: a node runs the workloads")
			}
			cpConfig.IdentityAuthorizer, cpConfig.Workloads = identities, workloads
			if withNode {
				if cpConfig.Node, err = nodeConfig(nodeName, nodeIP); err != nil {
					return err
				}
			}
			logrus.WithField("dataDir", cpConfig.DataDir).Info("Starting the control plane")
			return hub.ControlPlaneOnly(signals.Context(), cpConfig, hub.ControlPlaneOptions{SimulateWorkloads: simulate, NodeImages: nodeImages}, announceControlPlane)
		},
	}
	cp.register(cmd, defaultDataDir("flotilla-downstream"), 6444)
	cmd.Flags().BoolVar(&identities, "identity-authorizer", true, "authorize Flotilla cluster identities in the API server, as the hub's embedded control plane does, so that a hub run against this control plane creates no RBAC objects for them; false makes it authorize like any other cluster")
	cmd.Flags().BoolVar(&workloads, "workloads", true, "run the controllers Pods need (a default ServiceAccount and the kube-root-ca.crt ConfigMap in every namespace); false makes it like the hub's embedded control plane, which runs no Pods")
	cmd.Flags().BoolVar(&withNode, "node", false, "also run a node that runs Pods (flotilla-node: containerd, kubelet, kube-proxy, scheduler; needs root and make node-packages), with the scheduler's and workload controllers' control plane parts; see docs/node.md")
	cmd.Flags().StringVar(&nodeName, "node-name", "", "with --node: the Node's name (default: the host name)")
	cmd.Flags().IPVar(&nodeIP, "node-ip", nil, "with --node: the Node's address, where Pods reach the API server (default: this machine's first non-loopback IPv4 address)")
	cmd.Flags().StringSliceVar(&nodeImages, "node-images", nil, "with --node: image tarballs, or directories of them, loaded into the node (make images writes bin/images; it must hold the pause image)")
	cmd.Flags().BoolVar(&simulate, "simulate-workloads", false, "report every Deployment and StatefulSet rolled out and available, as the kubelets this control plane lacks would once its Pods ran, and give LoadBalancer Services the address 192.0.2.1 (nothing runs); for trying Flotilla with agents run as processes")
	return cmd
}

// nodeConfig is the node --node runs: named and addressed as asked, or by default.
func nodeConfig(name string, ip net.IP) (*controlplane.NodeConfig, error) {
	var err error
	if name == "" {
		if name, err = launch.DefaultName(); err != nil {
			return nil, err
		}
	}
	if ip == nil {
		if ip, err = launch.DefaultIP(""); err != nil {
			return nil, err
		}
	}
	return &controlplane.NodeConfig{Name: name, IP: ip}, nil
}

func announceHub(cp *controlplane.ControlPlane) {
	logrus.WithFields(logrus.Fields{"kubeconfig": cp.AdminKubeconfig, "url": cp.URL}).Info("Hub API is ready")
	fmt.Fprintf(os.Stderr, "\nThe hub is ready. Its admin kubeconfig is\n  %s\nTry:\n  kubectl --kubeconfig %s get crd\n(Kubernetes component logs: %s)\n\n",
		cp.AdminKubeconfig, cp.AdminKubeconfig, cp.ComponentLog)
}

func announceControlPlane(cp *controlplane.ControlPlane) {
	identityCert, identityKey := cp.IdentityCAFiles()
	logrus.WithFields(logrus.Fields{"kubeconfig": cp.AdminKubeconfig, "url": cp.URL, "identityCACert": identityCert, "identityCAKey": identityKey}).Info("Control plane is ready")
	fmt.Fprintf(os.Stderr, "\nThe control plane is ready. Its admin kubeconfig is\n  %s\nTry:\n  kubectl --kubeconfig %s get namespaces\n(Kubernetes component logs: %s)\n\n",
		cp.AdminKubeconfig, cp.AdminKubeconfig, cp.ComponentLog)
}
