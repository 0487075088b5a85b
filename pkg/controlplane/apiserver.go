package controlplane

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"
	utilerrors "k8s.io/apimachinery/pkg/util/errors"
	"k8s.io/client-go/rest"
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
	"k8s.io/kubernetes/cmd/kube-apiserver/app/options"
)

// serviceAccountIssuer is the issuer of ServiceAccount tokens, as on most clusters.
const serviceAccountIssuer = "https://kubernetes.default.svc.cluster.local"

// apiServerFlags are the kube-apiserver command-line flags for this control plane.
// Flags, rather than option struct fields, are kube-apiserver's stable interface.
func (c *ControlPlane) apiServerFlags(etcdURL string) []string {
	p := c.pki
	return []string{
		"--bind-address=" + c.cfg.BindAddress.String(),
		"--secure-port=" + strconv.Itoa(c.cfg.SecurePort),
		"--tls-cert-file=" + p.certFile(servingName),
		"--tls-private-key-file=" + p.keyFile(servingName),
		"--client-ca-file=" + p.certFile(caName),
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
	}
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
	go func() { done <- app.Run(ctx, completed) }()
	return nil
}
