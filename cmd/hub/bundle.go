package main

import (
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/flotilla/flotilla/pkg/hubctl"
)

func newBundleCommand() *cobra.Command {
	cmd := &cobra.Command{Use: "bundle", Short: "Sign Bundles, so that agents with trusted keys deploy them"}
	keygen := &cobra.Command{
		Use:     "keygen FILE",
		Short:   "Make a signing key: the private key in FILE, the public key in FILE.pub",
		Example: `  hub bundle keygen release.key`,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return hubctl.GenerateSigningKey(args[0], cmd.OutOrStdout())
		},
	}
	var key, namespace string
	sign := &cobra.Command{
		Use:   "sign --key FILE [BUNDLE.yaml]",
		Short: "Sign Bundles (from a file, or standard input) and print them, ready for kubectl apply",
		Long: `Sign Bundles and print them. The signature covers the Bundle's workspace and name,
its resources and the options each of its targets gives a cluster; sign again after
changing any of them. Agents installed with trustedKeys deploy only Bundles signed by one of those keys.`,
		Example: `  hub bundle sign --key release.key bundle.yaml | kubectl apply -f -`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			var in io.Reader = cmd.InOrStdin()
			if len(args) == 1 && args[0] != "-" {
				f, err := os.Open(args[0])
				if err != nil {
					return err
				}
				defer f.Close()
				in = f
			}
			return hubctl.SignBundles(key, namespace, in, cmd.OutOrStdout())
		},
	}
	sign.Flags().StringVarP(&key, "key", "k", "", "the private key (from hub bundle keygen, or openssl genpkey -algorithm ed25519)")
	sign.Flags().StringVarP(&namespace, "namespace", "n", "", "the Bundles' workspace, for Bundles without metadata.namespace (a signature holds for one workspace)")
	_ = sign.MarkFlagRequired("key")
	cmd.AddCommand(keygen, sign)
	return cmd
}
