package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/spf13/pflag"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
	"k8s.io/kubernetes/cmd/kube-controller-manager/app/options"
	"k8s.io/kubernetes/cmd/kube-controller-manager/names"
)

// controllers are the kube-controller-manager controllers a cluster without nodes
// still needs, and that Flotilla relies on as it would on any cluster.
var controllers = []string{
	names.GarbageCollectorController,       // owner references: deleting a token deletes what it owns
	names.NamespaceController,              // deleting a namespace deletes its contents
	names.ClusterRoleAggregationController, // the admin, edit and view ClusterRoles
}

// workloadControllers are the controllers Pods need, run with Config.Workloads.
var workloadControllers = []string{
	names.ServiceAccountController,             // the "default" ServiceAccount of every namespace
	names.RootCACertificatePublisherController, // kube-root-ca.crt in every namespace
	// The tokens of ServiceAccount token Secrets (type kubernetes.io/service-account-token),
	// which programs written for any cluster create, Fleet's controllers among them.
	names.ServiceAccountTokenController,
}

// nodeControllers are the controllers that run a node's Pods and Services, run with
// Config.Node: the workload controllers, Service endpoints, and the node lifecycle
// (a node that stops reporting turns NotReady and its Pods are evicted).
var nodeControllers = []string{
	names.DeploymentController,
	names.ReplicaSetController,
	names.StatefulSetController,
	names.DaemonSetController,
	names.JobController,
	names.CronJobController,
	names.TTLAfterFinishedController,
	names.DisruptionController,
	names.EndpointSliceController,
	names.EndpointSliceMirroringController,
	names.EndpointsController,
	names.PodGarbageCollectorController,
	names.NodeLifecycleController,
	names.TaintEvictionController,
	names.TTLController,
}

// runControllerManager runs the controllers above against the API server, with
// leader election and serving turned off: this process is their only instance.
func (c *ControlPlane) runControllerManager(ctx context.Context, kubeconfigPath string, done chan<- error) error {
	s, err := options.NewKubeControllerManagerOptions()
	if err != nil {
		return fmt.Errorf("kube-controller-manager options: %w", err)
	}
	known, disabled, aliases := app.KnownControllers(), app.ControllersDisabledByDefault(), app.ControllerAliases()
	fs := pflag.NewFlagSet("kube-controller-manager", pflag.ContinueOnError)
	for _, f := range s.Flags(known, disabled, aliases).FlagSets {
		fs.AddFlagSet(f)
	}
	run := slices.Clone(controllers)
	workloads := c.cfg.Workloads || c.cfg.Node != nil
	if workloads {
		run = append(run, workloadControllers...)
	}
	if c.cfg.Node != nil {
		run = append(run, nodeControllers...)
	}
	flags := []string{
		"--kubeconfig=" + kubeconfigPath,
		"--controllers=" + strings.Join(run, ","),
		"--leader-elect=false",
		"--secure-port=0",
		"--root-ca-file=" + c.pki.certFile(caName),
		"--use-service-account-credentials=false",
	}
	if workloads {
		flags = append(flags, "--service-account-private-key-file="+c.pki.keyFile(serviceAccountKey))
	}
	if err := fs.Parse(flags); err != nil {
		return fmt.Errorf("kube-controller-manager flags: %w", err)
	}
	if err := s.ComponentGlobalsRegistry.Set(); err != nil {
		return fmt.Errorf("kube-controller-manager feature gates: %w", err)
	}
	config, err := s.Config(ctx, known, disabled, aliases)
	if err != nil {
		return fmt.Errorf("kube-controller-manager configuration: %w", err)
	}
	go func() { done <- app.Run(ctx, config.Complete()) }()
	return nil
}
