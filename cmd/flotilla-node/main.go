// Command flotilla-node turns a control plane that "hub controlplane --node" started
// into a one-node cluster that runs Pods: it starts containerd (Debian's package) with
// a configuration of its own, loads image tarballs into it, and runs the kubelet,
// kube-proxy and kube-scheduler, each as a child process of this same binary. When it
// stops, it stops every Pod it started and removes what it changed on the machine.
//
//	flotilla-node run --data-dir DIR --kubeconfig-dir DIR --images bin/images
//
// It is a test and try-out tool, not part of the product images: see docs/node.md.
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/sirupsen/logrus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client metrics, as the upstream commands register them
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"

	"github.com/flotilla/flotilla/pkg/node"
	"github.com/flotilla/flotilla/pkg/signals"
	"github.com/flotilla/flotilla/pkg/version"
)

func main() {
	// The Kubernetes commands below are the upstream ones, run as child processes
	// ("flotilla-node kubelet ..."): each has its own flags, feature gates and
	// logging, which would collide in one process.
	if len(os.Args) > 1 {
		var component *cobra.Command
		switch os.Args[1] {
		case node.KubeletCommand:
			component = kubelet.NewKubeletCommand(context.Background())
		case node.ProxyCommand:
			component = proxy.NewProxyCommand()
		case node.SchedulerCommand:
			component = scheduler.NewSchedulerCommand()
		}
		if component != nil {
			component.SetArgs(os.Args[2:])
			os.Exit(cli.Run(component))
		}
	}
	pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
	if err := newRootCommand().Execute(); err != nil {
		logrus.Error(err)
		os.Exit(1)
	}
}

func newRootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "flotilla-node",
		Short:         "Run a one-node Kubernetes node beside a Flotilla control plane",
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version.Version,
	}
	root.AddCommand(newRunCommand(), newCheckCommand(), newLoadCommand())
	return root
}

func newRunCommand() *cobra.Command {
	var cfg node.Config
	cmd := &cobra.Command{
		Use:   "run",
		Short: "Start containerd, the kubelet, kube-proxy and the scheduler; stop and clean up on SIGTERM",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return node.Run(signals.Context(), cfg)
		},
	}
	node.RegisterFlags(cmd.Flags(), &cfg)
	return cmd
}

func newCheckCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "check",
		Short: "Say whether this machine can run a node (root, cgroups, containerd, runc, CNI plugins, iptables)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := node.Preflight(); err != nil {
				return err
			}
			fmt.Println("This machine can run a node.")
			return nil
		},
	}
}

func newLoadCommand() *cobra.Command {
	var dataDir string
	cmd := &cobra.Command{
		Use:   "load TARBALL|DIR...",
		Short: "Load image tarballs (docker-archive, as make images writes them) into a running node",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return node.LoadImages(signals.Context(), dataDir, args)
		},
	}
	cmd.Flags().StringVar(&dataDir, "data-dir", "", "the running node's --data-dir (hub controlplane --node: <data-dir>/node) (required)")
	return cmd
}
