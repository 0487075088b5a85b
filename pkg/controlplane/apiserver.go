package controlplane

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/union"
	genericapiserver "k8s.io/apiserver/pkg/server"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// serviceAccountIssuer is the issuer of ServiceAccount tokens, as on most clusters.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// apiServerFlags are the kube-apiserver command-line flags for this control plane.
// Flags, rather than option struct fields, are kube-apiserver's stable interface.
func (c *ControlPlane) apiServerFlags(etcdURL string) []string {
	p := c.pki
	flags := []string{
		"--bind-address=" + c.cfg.BindAddress.String(),
		"--secure-port=" + strconv.Itoa(c.cfg.SecurePort),
		"--tls-cert-file=" + p.certFile(servingName),
		"--tls-private-key-file=" + p.keyFile(servingName),
		"--client-ca-file=" + p.certFile(clientCAName),
		"--etcd-servers=" + etcdURL,
		"--service-account-issuer=" + serviceAccountIssuer,
		"--service-account-key-file=" + p.keyFile(serviceAccountKey),
		"--service-account-signing-key-file=" + p.keyFile(serviceAccountKey),
		"--service-cluster-ip-range=" + serviceClusterIPCIDR,
		"--authorization-mode=RBAC",
		// No kubelets or Pods reach this API through the "kubernetes" Service.
		"--endpoint-reconciler-type=none",
		"--profiling=" + strconv.FormatBool(c.cfg.Profiling),
		"--enable-priority-and-fairness=true",
		// Events are kept an hour, as on a default cluster.
		"--event-ttl=1h",
		// On SIGTERM, close the watches of clients elsewhere (agents in Pods) within
		// a few seconds: otherwise the server waits up to a minute for them, past the
		// 30 seconds a Pod or systemd grants before killing it.
		"--shutdown-watch-termination-grace-period=5s",
	}
	if c.admissionConfig != "" {
		flags = append(flags, "--admission-control-config-file="+c.admissionConfig)
	}
	if c.cfg.Node != nil {
		flags = replaceFlags(flags, c.nodeAPIServerFlags())
	}
	if c.cfg.MaxTokenExpiration > 0 {
		flags = append(flags, "--service-account-max-token-expiration="+c.cfg.MaxTokenExpiration.String())
	}
	return flags
}

// runAPIServer configures kube-apiserver from flags and serves until ctx ends. It
// returns the loopback configuration once the server is built, and reports the end
// of serving on done.
func (c *ControlPlane) runAPIServer(ctx context.Context, etcdURL string, done chan<- error) error {
	s := options.NewServerRunOptions()
	fs := pflag.NewFlagSet("kube-apiserver", pflag.ContinueOnError)
	for _, f := range s.Flags().FlagSets {
		fs.AddFlagSet(f)
	}
	if err := fs.Parse(c.apiServerFlags(etcdURL)); err != nil {
		return fmt.Errorf("kube-apiserver flags: %w", err)
	}
	if err := s.GenericServerRunOptions.ComponentGlobalsRegistry.Set(); err != nil {
		return fmt.Errorf("kube-apiserver feature gates: %w", err)
	}
	// The API server's own loopback clients should not log the warnings they cause.
	rest.SetDefaultWarningHandler(rest.NoWarnings{})

	completed, err := s.Complete(ctx)
	if err != nil {
		return fmt.Errorf("completing kube-apiserver options: %w", err)
	}
	if errs := completed.Validate(); len(errs) != 0 {
		return fmt.Errorf("kube-apiserver options: %w", utilerrors.NewAggregate(errs))
	}
	if completed.InformerName == nil {
		if completed.InformerName, err = cache.NewInformerName("kube-apiserver"); err != nil {
			return err
		}
	}
	// What app.Run does, with the identity authorizer put before RBAC.
	config, err := app.NewConfig(completed)
	if err != nil {
		return fmt.Errorf("configuring kube-apiserver: %w", err)
	}
	if c.cfg.IdentityAuthorizer {
		// Each server of the chain has its own copy of the generic configuration, all
		// with the same authorizer.
		identities, err := newIdentityAuthorizer(config.KubeAPIs.ControlPlane.Generic.Authorization.Authorizer,
			config.KubeAPIs.ControlPlane.VersionedInformers.Core().V1().Namespaces().Lister())
		if err != nil {
			return err
		}
		for _, generic := range []*genericapiserver.Config{config.KubeAPIs.ControlPlane.Generic, &config.ApiExtensions.GenericConfig.Config, &config.Aggregator.GenericConfig.Config} {
			generic.Authorization.Authorizer, err = union.New(
				union.NamedAuthorizer{AuthorizerName: "flotilla-identities", Authorizer: authorizer.AuthorizerFunc(identities.Authorize)},
				union.NamedAuthorizer{AuthorizerName: "kube-apiserver", Authorizer: generic.Authorization.Authorizer})
			if err != nil {
				return err
			}
		}
	}
	completedConfig, err := config.Complete()
	if err != nil {
		return fmt.Errorf("completing the kube-apiserver configuration: %w", err)
	}
	server, err := app.CreateServerChain(completedConfig)
	if err != nil {
		return fmt.Errorf("creating kube-apiserver: %w", err)
	}
	prepared, err := server.PrepareRun()
	if err != nil {
		return fmt.Errorf("preparing kube-apiserver: %w", err)
	}
	go func() { done <- prepared.Run(ctx) }()
	return nil
}
