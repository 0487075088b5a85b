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
			cfg, err := kubeconfig.Load(kubeconfigPath)
			if err != nil {
				return err
			}
			cfg.UserAgent = "flotilla-agent"
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				return err
			}
			logrus.WithFields(logrus.Fields{"namespace": namespace, "version": version.Version, "hubProxy": proxy.String()}).Info("Starting the agent")
			ctx := signals.Context()
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
	cmd.Flags().StringVar(&kubeconfigPath, "kubeconfig", "", "kubeconfig of the downstream cluster (default: in-cluster)")
	cmd.Flags().StringVar(&namespace, "namespace", names.SystemNamespace, "downstream namespace of the agent's Secrets and ConfigMap")
	cmd.Flags().BoolVar(&debug, "debug", false, "log at debug level")
	cmd.Flags().StringVar(&proxy.URL, "hub-proxy", "", "HTTP(S) proxy of the connections to the hub, and of those only, e.g. http://proxy.example.com:3128 (default: HTTPS_PROXY from the environment)")
	cmd.Flags().StringVar(&proxy.NoProxy, "hub-no-proxy", "", "with --hub-proxy: comma-separated hosts, domains, IPs and CIDRs of hub addresses reached without it")
	cmd.Flags().StringVar(&metricsAddr, "metrics-bind-address", "0", "address of the Prometheus /metrics endpoint, e.g. :8080; 0 turns it off")
	cmd.Flags().StringVar(&healthAddr, "health-probe-bind-address", "0", "address of /healthz (alive) and /readyz (running with the cluster's identity), e.g. :8081 as the chart sets it; 0 turns them off")
	return cmd
}
