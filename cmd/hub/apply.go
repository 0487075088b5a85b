package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlereader"
	"github.com/flotilla/flotilla/pkg/hubctl"
	"github.com/flotilla/flotilla/pkg/kubeconfig"
	"github.com/flotilla/flotilla/pkg/signals"
)

// applyFlags are `hub apply`'s flags, named as `fleet apply` names them.
type applyFlags struct {
	kc             userKubeconfig
	opts           hubctl.ApplyOptions
	output         string
	labels         map[string]string
	commit         string
	targetsFile    string
	passwordFile   string
	caFile         string
	credentialsFor string
	correctDrift   fleet.CorrectDrift
	allowed        []string
}

func newApplyCommand() *cobra.Command {
	f := &applyFlags{}
	cmd := &cobra.Command{
		Use:   "apply NAME [DIR...]",
		Short: "Make Bundles of folders with a fleet.yaml (as fleet apply does) and create them on the hub, or print them",
		Long: `Reads each folder (default: the current one): its fleet.yaml and every file beside it,
and the folders below it that have a fleet.yaml of their own. Each becomes a Bundle
named NAME-<path>, as Fleet names it. Charts that fleet.yaml takes from a repository,
an OCI registry or a URL are downloaded now and stored in the Bundle, so that agents
need no access to them. See docs/fleet-yaml.md.`,
		Example: `  hub apply my-app ./my-app -n fleet-default
  hub apply my-app ./my-app -n fleet-default -o - | less`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.complete(args); err != nil {
				return err
			}
			ctx := signals.Context()
			if f.output != "" {
				w, closeOut, err := outputFile(f.output, cmd.OutOrStdout())
				if err != nil {
					return err
				}
				defer closeOut()
				f.opts.Output = w
				return hubctl.Apply(ctx, nil, f.opts)
			}
			_, client, err := f.kc.clients()
			if err != nil {
				return err
			}
			return hubctl.Apply(ctx, client, f.opts)
		},
	}
	f.kc.register(cmd)
	fl := cmd.Flags()
	r := &f.opts.Read
	fl.StringVarP(&f.opts.Namespace, "namespace", "n", "fleet-local", "the workspace the Bundles go to")
	fl.StringVarP(&f.output, "output", "o", "", "write the Bundles to this file (- for standard output) instead of the hub")
	fl.StringToStringVarP(&f.labels, "label", "l", nil, "labels for every Bundle, KEY=VALUE")
	fl.StringVar(&f.commit, "commit", os.Getenv("COMMIT"), "the commit the folders are from, as the label "+hubctl.CommitLabel+" (default $COMMIT)")
	fl.StringVar(&f.targetsFile, "targets-file", "", "a YAML file whose targets and targetRestrictions are added to every Bundle's (unless its fleet.yaml has overrideTargets)")
	fl.StringVar(&r.TargetNamespace, "target-namespace", "", "put every Bundle's objects in this namespace")
	fl.StringVarP(&r.ServiceAccount, "service-account", "a", "", "the service account every Bundle deploys as")
	fl.BoolVar(&r.Paused, "paused", false, "create the Bundles paused")
	fl.BoolVar(&r.KeepResources, "keep-resources", false, "keep the deployed objects when a Bundle is deleted")
	fl.Int64Var(&r.SyncGeneration, "sync-generation", 0, "forceSyncGeneration of every Bundle: raise it to redeploy")
	fl.BoolVar(&f.correctDrift.Enabled, "correct-drift", false, "put back objects changed downstream")
	fl.BoolVar(&f.correctDrift.Force, "correct-drift-force", false, "replace objects that cannot be patched when correcting drift")
	fl.BoolVar(&f.correctDrift.KeepFailHistory, "correct-drift-keep-fail-history", false, "keep failed corrections in the release history")
	fl.BoolVarP(&r.Compress, "compress", "c", false, "store every file compressed (base64+gz)")
	fl.Int64Var(&r.MaxSize, "max-bundle-size", 0, "the most bytes one Bundle's files, downloaded charts included, may take (default 64 MiB)")
	fl.StringVar(&r.Auth.Username, "username", os.Getenv("HELM_USERNAME"), "user name for chart repositories and registries (default $HELM_USERNAME)")
	fl.StringVar(&f.passwordFile, "password-file", "", "file holding the password for chart repositories and registries")
	fl.StringVar(&f.caFile, "cacerts-file", "", "PEM file of CA certificates that chart repositories may be signed by, besides the system's")
	fl.StringVar(&f.credentialsFor, "helm-repo-url-regex", "", "send the credentials only to chart repositories whose URL this matches from its start (required with --username or --password-file)")
	fl.BoolVar(&r.Auth.InsecureSkipVerify, "helm-insecure-skip-tls", false, "do not check chart repositories' certificates")
	fl.BoolVar(&r.Auth.PlainHTTP, "helm-basic-http", false, "talk to OCI registries over plain HTTP")
	registerAllowedNetworks(fl, &f.allowed)
	return cmd
}

// registerAllowedNetworks adds --allowed-networks, for downloadClient.
func registerAllowedNetworks(fl *pflag.FlagSet, allowed *[]string) {
	fl.StringSliceVar(allowed, "allowed-networks", nil, "CIDRs (or addresses) chart downloads may connect to even though they are private, loopback or link-local, e.g. 127.0.0.0/8 for a chart repository on this machine")
}

// downloadClient is the client of chart downloads: a fleet.yaml names the servers,
// and its folder may come from anyone's branch, so private, loopback and link-local
// addresses are refused unless allowed (--allowed-networks).
func downloadClient(allowed []string) (*http.Client, error) {
	prefixes, err := kubeconfig.ParsePrefixes(allowed)
	if err != nil {
		return nil, fmt.Errorf("--allowed-networks: %w", err)
	}
	policy := &kubeconfig.AddressPolicy{Allowed: prefixes, RefusePrivate: true, For: "a chart download", Flag: "--allowed-networks"}
	return &http.Client{Transport: policy.Transport()}, nil
}

// complete turns the flags into options.
func (f *applyFlags) complete(args []string) error {
	f.opts.Name, f.opts.Dirs = args[0], args[1:]
	r := &f.opts.Read
	r.Labels = map[string]string{}
	for k, v := range f.labels {
		r.Labels[k] = v
	}
	if f.commit != "" {
		r.Labels[hubctl.CommitLabel] = f.commit
	}
	if f.correctDrift.Enabled {
		r.CorrectDrift = &f.correctDrift
	}
	if f.passwordFile != "" {
		pw, err := os.ReadFile(f.passwordFile)
		if err != nil {
			return fmt.Errorf("--password-file: %w", err)
		}
		r.Auth.Password = string(bytes.TrimRight(pw, "\r\n"))
	}
	if r.Auth.Username != "" || r.Auth.Password != "" {
		if f.credentialsFor == "" {
			return errors.New("--helm-repo-url-regex is required with credentials: it names the repositories they may be sent to (a fleet.yaml can name any server)")
		}
		re, err := bundlereader.AllowCredentials(f.credentialsFor)
		if err != nil {
			return fmt.Errorf("--helm-repo-url-regex: %w", err)
		}
		r.Auth.SendCredentialsTo = re
	}
	client, err := downloadClient(f.allowed)
	if err != nil {
		return err
	}
	r.HTTPClient = client
	if f.caFile != "" {
		ca, err := os.ReadFile(f.caFile)
		if err != nil {
			return fmt.Errorf("--cacerts-file: %w", err)
		}
		r.Auth.CABundle = ca
	}
	if f.targetsFile != "" {
		data, err := os.ReadFile(f.targetsFile)
		if err != nil {
			return fmt.Errorf("--targets-file: %w", err)
		}
		var spec fleet.BundleSpec
		if err := yaml.UnmarshalStrict(data, &spec); err != nil {
			return fmt.Errorf("--targets-file %s: %w", f.targetsFile, err)
		}
		r.Targets, r.TargetRestrictions = spec.Targets, spec.TargetRestrictions
	}
	return nil
}

// outputFile opens path for writing, "-" being stdout.
func outputFile(path string, stdout io.Writer) (io.Writer, func(), error) {
	if path == "-" {
		return stdout, func() {}, nil
	}
	file, err := os.Create(path)
	if err != nil {
		return nil, nil, err
	}
	return file, func() { _ = file.Close() }, nil
}

func newTestCommand() *cobra.Command {
	opts := hubctl.TestOptions{}
	var allowed []string
	cmd := &cobra.Command{
		Use:   "test [DIR]",
		Short: "Print the manifests a cluster would get from a folder with a fleet.yaml (as fleet test does)",
		Long: `Reads the folder (default: the current one) as hub apply does, finds the target that
matches a cluster with the given name, labels and cluster group, and prints the manifests
that cluster would get, rendered by the code the agent deploys with (Helm, kustomize,
overlays). Which target matched is printed to standard error.`,
		Example: `  hub test ./my-app -l env=prod`,
		Args:    cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if len(args) == 1 {
				opts.Dir = args[0]
			}
			client, err := downloadClient(allowed)
			if err != nil {
				return err
			}
			opts.Read.HTTPClient = client
			return hubctl.Test(signals.Context(), opts, cmd.OutOrStdout(), cmd.ErrOrStderr())
		},
	}
	fl := cmd.Flags()
	fl.StringToStringVarP(&opts.ClusterLabels, "label", "l", nil, "labels of the cluster, KEY=VALUE")
	fl.StringVar(&opts.ClusterName, "name", "test", "name of the cluster")
	fl.StringVarP(&opts.Group, "group", "g", "default", "cluster group the cluster is in")
	fl.StringToStringVar(&opts.GroupLabels, "group-label", nil, "labels of that cluster group, KEY=VALUE")
	fl.StringVarP(&opts.Target, "target", "t", "", "render this target, whatever matches")
	fl.StringVarP(&opts.BundleFile, "bundle-file", "b", "", "a Bundle's YAML to render instead of a folder")
	fl.BoolVarP(&opts.Quiet, "quiet", "q", false, "print only which target matched")
	registerAllowedNetworks(fl, &allowed)
	return cmd
}
