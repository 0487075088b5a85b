package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/flotilla/flotilla/pkg/migrate"
	"github.com/flotilla/flotilla/pkg/signals"
)

func newMigrateCommand() *cobra.Command {
	var (
		kc   userKubeconfig
		from string
		opts = migrate.Options{AgentTokenTTL: 24 * time.Hour, Wait: time.Minute}
	)
	cmd := &cobra.Command{
		Use:   "migrate --from FLEET_KUBECONFIG",
		Short: "Move a running Fleet hub's clusters and objects to this hub, with no person touching the clusters",
		Long: `Copies the Fleet hub's workspaces, ClusterGroups, Clusters, GitRepos (with their
credentials), GitRepoRestrictions, Bundles made by fleet apply (with their values) and
ClusterRegistrationTokens to this hub, and moves each registered cluster's agent: the
Fleet hub deploys Flotilla's agent chart over Fleet's agent (its fleet-agent release)
with the values of a token bound to the Cluster here, and the cluster registers here
as the same Cluster. Objects already here are left as they are, so it may be run
again. --dry-run lists what would move and what cannot, with reasons, changing
nothing. See docs/migrate-from-fleet.md.`,
		Example: `  hub migrate --from fleet-hub.kubeconfig --dry-run
  hub migrate --from fleet-hub.kubeconfig`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if from == "" {
				return fmt.Errorf("--from names the kubeconfig of the Fleet hub")
			}
			fleetConfig, err := clientcmd.BuildConfigFromFlags("", from)
			if err != nil {
				return fmt.Errorf("--from %s: %w", from, err)
			}
			source, err := migrationHub(fleetConfig)
			if err != nil {
				return err
			}
			hubConfig, err := kc.config()
			if err != nil {
				return err
			}
			target, err := migrationHub(hubConfig)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			counts := map[migrate.Action]int{}
			err = migrate.Run(signals.Context(), source, target, opts, func(s migrate.Step) {
				counts[s.Action]++
				fmt.Fprintln(out, s)
			})
			verb := "moved"
			if opts.DryRun {
				verb = "would move"
			}
			fmt.Fprintf(out, "# %s: %d copied, %d agents; %d already here, %d skipped, %d cannot move\n", verb,
				counts[migrate.Copy], counts[migrate.MoveAgent], counts[migrate.Exists], counts[migrate.Skip], counts[migrate.Cannot])
			return err
		},
	}
	kc.register(cmd)
	cmd.Flags().StringVar(&from, "from", "", "kubeconfig of the Fleet hub to move from")
	cmd.Flags().BoolVar(&opts.DryRun, "dry-run", false, "list what would move and what cannot, changing nothing")
	cmd.Flags().DurationVar(&opts.AgentTokenTTL, "agent-token-ttl", opts.AgentTokenTTL, "lifetime of the token bound to each moved Cluster: its agent must register within it")
	cmd.Flags().DurationVar(&opts.Wait, "wait", opts.Wait, "how long to wait for this hub to write a token's values")
	return cmd
}

func migrationHub(cfg *rest.Config) (migrate.Hub, error) {
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return migrate.Hub{}, err
	}
	dyn, err := dynamic.NewForConfig(cfg)
	return migrate.Hub{Kube: kube, Dynamic: dyn}, err
}
