// Command agent is the Flotilla agent that runs in each downstream cluster. It reads
// its configuration from the downstream API (the fleet-agent chart's bootstrap Secret
// and ConfigMap), so running it out of cluster with --kubeconfig does exactly what the
// chart's Deployment does in cluster.
package main

import (
	"fmt"
	"os"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/flotilla/flotilla/pkg/agent"
	"github.com/flotilla/flotilla/pkg/health"
	"github.com/flotilla/flotilla/pkg/kubeconfig"
	"github.com/flotilla/flotilla/pkg/metrics"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
	"github.com/flotilla/flotilla/pkg/signals"
	"github.com/flotilla/flotilla/pkg/version"
)

func main() {
	// Only the agent's own flags, not those Kubernetes packages register globally.
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
	if err := newRootCommand().Execute(); err != nil {
		logrus.Error(err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	var (
		kubeconfigPath, namespace, metricsAddr, healthAddr string
		debug                                              bool
		proxy                                              registration.HubProxy
	)
	cmd := &cobra.Command{
		Use:   "agent",
		Short: "Flotilla agent: registers its cluster with the hub and keeps its identity fresh",
		Long: `Flotilla agent. It reads everything it needs from its namespace in the downstream
cluster: the registration values (Secret fleet-agent-bootstrap), its settings
(ConfigMap fleet-agent) and, once registered, its identity (Secret fleet-agent).
In a Pod it uses the in-cluster configuration; elsewhere pass --kubeconfig.`,
		Version:       version.Version,
		SilenceUsage:  true,
		SilenceErrors: true,
		Args:          cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if debug {
				logrus.SetLevel(logrus.DebugLevel)
			}
			if err := proxy.Validate(); err != nil {
				return err
			}
			cfg, client, err := downstream(kubeconfigPath)
			if err != nil {
				return err
			}
			logrus.WithFields(logrus.Fields{"namespace": namespace, "version": version.Version, "hubProxy": proxy.String()}).Info("Starting the agent")
			ctx := signals.Context()
			// The same checks as `agent preflight`, logged while the agent starts.
			go func() {
				for _, problem := range registration.Preflight(ctx, registration.Downstream{Client: client, Namespace: namespace, HubProxy: proxy}) {
					logrus.Warn(problem.String())
				}
			}()
			if err := metrics.Serve(ctx, metricsAddr, false); err != nil {
				return fmt.Errorf("--metrics-bind-address: %w", err)
			}
			var probes health.Server
			if err := probes.Serve(ctx, healthAddr); err != nil {
				return err
			}
			return agent.Run(ctx, agent.Config{Downstream: client, DownstreamConfig: cfg, Namespace: namespace, Version: version.Version, HubProxy: proxy, Ready: probes.SetReady})
		},
	}
	cmd.PersistentFlags().StringVar(&kubeconfigPath, "kubeconfig", "", "kubeconfig of the downstream cluster (default: in-cluster)")
	cmd.PersistentFlags().StringVar(&namespace, "namespace", names.SystemNamespace, "downstream namespace of the agent's Secrets and ConfigMap")
	cmd.Flags().BoolVar(&debug, "debug", false, "log at debug level")
	cmd.PersistentFlags().StringVar(&proxy.URL, "hub-proxy", "", "HTTP(S) proxy of the connections to the hub, and of those only, e.g. http://proxy.example.com:3128 (default: HTTPS_PROXY from the environment)")
	cmd.PersistentFlags().StringVar(&proxy.NoProxy, "hub-no-proxy", "", "with --hub-proxy: comma-separated hosts, domains, IPs and CIDRs of hub addresses reached without it")
	cmd.Flags().StringVar(&metricsAddr, "metrics-bind-address", "0", "address of the Prometheus /metrics endpoint, e.g. :8080; 0 turns it off")
	cmd.Flags().StringVar(&healthAddr, "health-probe-bind-address", "0", "address of /healthz (alive) and /readyz (running with the cluster's identity), e.g. :8081 as the chart sets it; 0 turns them off")
	cmd.AddCommand(&cobra.Command{
		Use:   "preflight",
		Short: "Check what the agent needs, print one PREFLIGHT line per problem, and fail if there is one",
		Long: `Checks, from the downstream cluster and changing nothing: the agent's rights there,
its registration values or identity, the proxy, that the hub is reachable and its
certificate is signed by the CA the agent was given, the clocks, and that the hub
accepts the registration token (not expired, used up or refused for this cluster)
or the cluster's identity. The agent runs the same checks when it starts.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := proxy.Validate(); err != nil {
				return err
			}
			_, client, err := downstream(kubeconfigPath)
			if err != nil {
				return err
			}
			problems := registration.Preflight(signals.Context(), registration.Downstream{Client: client, Namespace: namespace, HubProxy: proxy})
			for _, problem := range problems {
				fmt.Fprintln(cmd.OutOrStdout(), problem.String())
			}
			if len(problems) > 0 {
				return fmt.Errorf("preflight found %d problems", len(problems))
			}
			fmt.Fprintln(cmd.OutOrStdout(), "PREFLIGHT ok")
			return nil
		},
	})
	return cmd
}

// downstream is the configuration of the downstream cluster, from kubeconfigPath
// or in-cluster, and a client for it.
func downstream(kubeconfigPath string) (*rest.Config, kubernetes.Interface, error) {
	cfg, err := kubeconfig.Load(kubeconfigPath)
	if err != nil {
		return nil, nil, err
	}
	cfg.UserAgent = "flotilla-agent"
	client, err := kubernetes.NewForConfig(cfg)
	return cfg, client, err
}
