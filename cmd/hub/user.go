package main

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/hubctl"
	"github.com/flotilla/flotilla/pkg/signals"
	"github.com/flotilla/flotilla/pkg/version"
)

// userKubeconfig is how the user commands reach the hub: --kubeconfig, else
// $KUBECONFIG or ~/.kube/config, else the embedded hub's admin kubeconfig in the
// default data directory.
type userKubeconfig struct{ path string }

func (u *userKubeconfig) register(cmd *cobra.Command) {
	cmd.PersistentFlags().StringVar(&u.path, "kubeconfig", "",
		"kubeconfig of the hub (default: $KUBECONFIG, ~/.kube/config, or the embedded hub's DATA_DIR/admin.kubeconfig)")
}

func (u *userKubeconfig) clients() (kubernetes.Interface, versioned.Interface, error) {
	hub, err := u.hub()
	return hub.Kube, hub.Fleet, err
}

// hub is the hub's clients and address.
func (u *userKubeconfig) hub() (hubctl.HubClients, error) {
	cfg, err := u.config()
	if err != nil {
		return hubctl.HubClients{}, err
	}
	kube, fleet, err := clientsFor(cfg)
	return hubctl.HubClients{Kube: kube, Fleet: fleet, URL: cfg.Host}, err
}

func (u *userKubeconfig) config() (*rest.Config, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	if u.path != "" {
		rules.ExplicitPath = u.path
	} else if _, err := rules.Load(); err != nil || !hasConfig(rules) {
		admin := filepath.Join(defaultDataDir("flotilla"), "admin.kubeconfig")
		if _, err := os.Stat(admin); err == nil {
			rules.ExplicitPath = admin
		}
	}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
	if err != nil {
		return nil, errors.New("no kubeconfig for the hub: pass --kubeconfig, or start the hub (make run) so that its admin kubeconfig exists")
	}
	return cfg, nil
}

func hasConfig(rules *clientcmd.ClientConfigLoadingRules) bool {
	for _, p := range rules.GetLoadingPrecedence() {
		if _, err := os.Stat(p); err == nil {
			return true
		}
	}
	return false
}

func clientsFor(cfg *rest.Config) (kubernetes.Interface, versioned.Interface, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, nil, err
	}
	fleet, err := versioned.NewForConfig(cfg)
	return kube, fleet, err
}

func newTokenCommand() *cobra.Command {
	var kc userKubeconfig
	cmd := &cobra.Command{Use: "token", Short: "Manage ClusterRegistrationTokens"}
	kc.register(cmd)
	opts := hubctl.TokenOptions{}
	create := &cobra.Command{
		Use:   "create NAME",
		Short: "Create a ClusterRegistrationToken and print the helm command that registers a cluster with it",
		Example: `  hub token create new-token -n clusters --ttl 240h -o values.yaml
  # then, in the cluster to register:
  helm -n cattle-fleet-system install --create-namespace --values values.yaml fleet-agent charts/fleet-like/agent`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kube, fleet, err := kc.clients()
			if err != nil {
				return err
			}
			opts.Name = args[0]
			return hubctl.CreateToken(signals.Context(), kube, fleet, opts, cmd.OutOrStdout())
		},
	}
	create.Flags().StringVarP(&opts.Namespace, "namespace", "n", "fleet-default", "workspace the token registers clusters into")
	create.Flags().DurationVar(&opts.TTL, "ttl", 0, "lifetime of the token, e.g. 240h (default: no expiry)")
	create.Flags().StringVarP(&opts.Output, "output", "o", "", "write the agent chart's values.yaml to this file")
	create.Flags().StringVar(&opts.Chart, "chart", "charts/fleet-like/agent", "the agent chart the printed command installs")
	create.Flags().DurationVar(&opts.Wait, "wait", time.Minute, "how long to wait for the hub to write the token's values")
	create.Flags().Int32Var(&opts.MaxRegistrations, "max-registrations", 0, "how many clusters the token may register (default: no limit)")
	create.Flags().BoolVar(&opts.RequireApproval, "require-approval", false, "new clusters registering with the token wait for a hub admin's approval (hub cluster approve NAME)")
	cmd.AddCommand(create)
	return cmd
}

func newClusterCommand() *cobra.Command {
	var (
		kc        userKubeconfig
		namespace string
	)
	cmd := &cobra.Command{Use: "cluster", Short: "Look at registered Clusters and answer those waiting for approval"}
	kc.register(cmd)
	list := &cobra.Command{
		Use:   "list",
		Short: "List Clusters of every workspace, with the columns of kubectl get clusters.fleet.cattle.io",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, fleet, err := kc.clients()
			if err != nil {
				return err
			}
			return hubctl.ListClusters(signals.Context(), fleet, namespace, cmd.OutOrStdout())
		},
	}
	list.Flags().StringVarP(&namespace, "namespace", "n", "", "only this workspace (default: all)")
	cmd.AddCommand(list, newPendingCommand(&kc), newAnswerCommand(&kc, true), newAnswerCommand(&kc, false), newDoctorCommand(&kc), newMoveCommand(&kc))
	return cmd
}

// newMoveCommand is `hub cluster move`.
func newMoveCommand(kc *userKubeconfig) *cobra.Command {
	var (
		opts hubctl.MoveOptions
		to   userKubeconfig
	)
	move := &cobra.Command{
		Use:   "move NAME --to-kubeconfig FILE",
		Short: "Move a cluster to another hub without reinstalling its agent",
		Long: `Creates the Cluster on the hub of --to-kubeconfig, bound to the same agent key,
and a token bound to it that only that key can use; hands the token's values to the
agent through its agent bundle on this hub; waits for the agent to check in with the
new hub; then deletes the Cluster here. The cluster's workloads stay: releases made
for this hub's Bundles are never removed for want of one on the new hub, and the new
hub's BundleDeployment of the same Bundle takes its release over.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if to.path == "" {
				return errors.New("--to-kubeconfig is required: the kubeconfig of the hub the cluster moves to")
			}
			from, err := kc.hub()
			if err != nil {
				return err
			}
			dest, err := to.hub()
			if err != nil {
				return err
			}
			opts.Name = args[0]
			return hubctl.Move(signals.Context(), from, dest, opts, cmd.OutOrStdout())
		},
	}
	move.Flags().StringVarP(&opts.Namespace, "namespace", "n", "fleet-default", "the cluster's workspace")
	move.Flags().StringVar(&to.path, "to-kubeconfig", "", "kubeconfig of the hub the cluster moves to")
	move.Flags().StringVar(&opts.ToNamespace, "to-namespace", "", "the cluster's workspace on the new hub (default: the same)")
	move.Flags().DurationVar(&opts.Wait, "wait", 10*time.Minute, "how long to wait for the agent to check in with the new hub")
	return move
}

// newDoctorCommand is `hub cluster doctor`.
func newDoctorCommand(kc *userKubeconfig) *cobra.Command {
	var namespace, hubVersion string
	doctor := &cobra.Command{
		Use:   "doctor NAME",
		Short: "Say what is wrong with a cluster, as the hub sees it: one DOCTOR line per problem",
		Long: `Looks at the Cluster from the hub and prints one DOCTOR line per problem, with what
to do, or "DOCTOR ok"; it fails when it found a problem. Checks: the Cluster exists
(else whether it waits for approval or was refused), its last registration request,
the import (kubeConfigSecret), its per-cluster namespace, the agent's check-ins
(never, offline), the agent's clock, its version, and its BundleDeployments.
In the cluster, agent preflight checks the rest (its token, the hub's address and CA,
proxy, clocks and its rights there).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			kube, fleet, err := kc.clients()
			if err != nil {
				return err
			}
			return hubctl.PrintDiagnosis(signals.Context(), kube, fleet, namespace, args[0], hubVersion, cmd.OutOrStdout())
		},
	}
	doctor.Flags().StringVarP(&namespace, "namespace", "n", "fleet-default", "the cluster's workspace")
	doctor.Flags().StringVar(&hubVersion, "agent-version", version.Version, "the agent version the cluster should run: the hub's (--agent-image-tag, if the hub pins one)")
	return doctor
}

// newPendingCommand is `hub cluster pending`.
func newPendingCommand(kc *userKubeconfig) *cobra.Command {
	var namespace string
	pending := &cobra.Command{
		Use:   "pending",
		Short: "List the clusters waiting for a hub admin's approval (tokens with spec.requireApproval)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, fleet, err := kc.clients()
			if err != nil {
				return err
			}
			return hubctl.PrintPending(signals.Context(), fleet, namespace, cmd.OutOrStdout())
		},
	}
	pending.Flags().StringVarP(&namespace, "namespace", "n", "", "only this workspace (default: all)")
	return pending
}

// newAnswerCommand is `hub cluster approve` or, with approve false, `hub cluster
// refuse`.
func newAnswerCommand(kc *userKubeconfig, approve bool) *cobra.Command {
	var namespace string
	answer := &cobra.Command{
		Use:   "approve NAME",
		Short: "Let a cluster waiting for approval register (NAME as hub cluster pending lists it)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			_, fleet, err := kc.clients()
			if err != nil {
				return err
			}
			return hubctl.Answer(signals.Context(), fleet, namespace, args[0], approve, cmd.OutOrStdout())
		},
	}
	if !approve {
		answer.Use = "refuse NAME"
		answer.Short = "Refuse a cluster waiting for approval: it gets no Cluster, and may not register with that token again"
	}
	answer.Flags().StringVarP(&namespace, "namespace", "n", "", "the cluster's workspace (default: the one it waits in)")
	return answer
}
