// Package controllers wires the hub's controllers onto one shared set of informers.
// Each concern (tokens, registration requests, clusters, ...) is a package below this
// one with a Register function; Manager.Start registers them all and starts the
// informers, only in the replica that leads.
package controllers

import (
	"context"
	"fmt"
	"time"

	"github.com/rancher/lasso/pkg/cache"
	"github.com/rancher/lasso/pkg/controller"
	coordinationcontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/coordination.k8s.io"
	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core"
	"github.com/rancher/wrangler/v3/pkg/schemes"
	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"

	"github.com/flotilla/flotilla/pkg/agentchart"
	"github.com/flotilla/flotilla/pkg/bundlestate"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/controllers/agentbundle"
	"github.com/flotilla/flotilla/pkg/controllers/bundle"
	"github.com/flotilla/flotilla/pkg/controllers/cachetrim"
	"github.com/flotilla/flotilla/pkg/controllers/capi"
	"github.com/flotilla/flotilla/pkg/controllers/cluster"
	"github.com/flotilla/flotilla/pkg/controllers/clustergroup"
	"github.com/flotilla/flotilla/pkg/controllers/clusterns"
	"github.com/flotilla/flotilla/pkg/controllers/gitrepo"
	"github.com/flotilla/flotilla/pkg/controllers/imports"
	"github.com/flotilla/flotilla/pkg/controllers/request"
	"github.com/flotilla/flotilla/pkg/controllers/token"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io"
	"github.com/flotilla/flotilla/pkg/gitfetch"
	"github.com/flotilla/flotilla/pkg/kubeconfig"
	"github.com/flotilla/flotilla/pkg/metrics"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// Settings are the hub's settings that its controllers act on.
type Settings struct {
	// APIServerURL and APIServerCA (PEM) are what agents are told to reach the hub by.
	APIServerURL string
	APIServerCA  []byte
	// ClusterTokenTTL is the lifetime of each cluster identity's token (agents renew it).
	ClusterTokenTTL time.Duration
	// AgentTokenRenewAfter, if set, has agents renew their token this long after it
	// was issued instead of half way through its lifetime.
	AgentTokenRenewAfter time.Duration
	// NoTTLTokenLifetime is the credential lifetime of a registration token without TTL.
	NoTTLTokenLifetime time.Duration
	// Workers is the number of concurrent reconciles per kind.
	Workers int
	// KubeconfigSecretNamespaces are the namespaces, besides a Cluster's own, that
	// spec.kubeConfigSecretNamespace may name.
	KubeconfigSecretNamespaces []string
	// ClusterRecoveryTTL is how long a cluster's recovery token lasts: how long an
	// agent may be offline and still come back with its key alone. Zero hands out
	// no recovery tokens.
	ClusterRecoveryTTL time.Duration
	// RequestRetention is how long an answered registration request is kept.
	RequestRetention time.Duration
	// FleetAgents lets Fleet's agents register (ClusterRegistrations), with a token
	// lasting FleetAgentTokenTTL.
	FleetAgents        bool
	FleetAgentTokenTTL time.Duration
	// MaxBundleSize bounds what a Bundle's resources decode to.
	MaxBundleSize int64
	// AgentImageRepository and AgentImageTag replace the agent chart's image when set.
	AgentImageRepository, AgentImageTag string
	// ImportAddresses decides which addresses the hub may connect to for an
	// imported cluster (--import-allowed-networks, and the hub's own endpoints).
	ImportAddresses kubeconfig.AddressPolicy
	// GitRepoAddresses decides which addresses GitRepos' repositories may be fetched from.
	GitRepoAddresses kubeconfig.AddressPolicy
	// GitRepo bounds and paces the fetches of GitRepos.
	GitRepo gitrepo.Settings
	// ImportTokenTTL is the lifetime of the registration token minted to deploy an
	// imported cluster's agent.
	ImportTokenTTL time.Duration
	// ClusterOfflineAfter is how long after its agent's last check-in a Cluster is
	// shown as offline (Ready=Unknown).
	ClusterOfflineAfter time.Duration
	// APIServerAuthorizesIdentities says that the API server authorizes cluster
	// identities itself (Flotilla's control plane), so they need no RBAC objects.
	APIServerAuthorizesIdentities bool
	// Signer signs cluster identities as client certificates; nil hands out
	// ServiceAccount tokens.
	Signer *registration.IdentitySigner
}

// DefaultSettings are the settings the hub's flags default to.
func DefaultSettings() Settings {
	return Settings{
		ClusterTokenTTL:     24 * time.Hour,
		NoTTLTokenLifetime:  365 * 24 * time.Hour,
		Workers:             20,
		ImportTokenTTL:      time.Hour,
		ClusterOfflineAfter: 2 * time.Minute,
		MaxBundleSize:       content.DefaultMaxSize,
		RequestRetention:    time.Hour,
		FleetAgents:         true,
		FleetAgentTokenTTL:  7 * 24 * time.Hour,
		ClusterRecoveryTTL:  90 * 24 * time.Hour,
	}
}

// Manager holds the configuration the hub's controllers share.
type Manager struct {
	cfg      *rest.Config
	settings Settings
}

// New prepares the controllers without contacting the API server.
func New(cfg *rest.Config, settings Settings) (*Manager, error) {
	if settings.APIServerURL == "" {
		return nil, fmt.Errorf("no API server URL to give agents: set --api-server-url")
	}
	return &Manager{cfg: cfg, settings: settings}, nil
}

// Start registers every controller and runs them until ctx ends.
func (m *Manager) Start(ctx context.Context) error {
	kube, err := kubernetes.NewForConfig(m.cfg)
	if err != nil {
		return err
	}
	fleetClient, err := versioned.NewForConfig(m.cfg)
	if err != nil {
		return err
	}
	if err := ensureClusterRoles(ctx, kube); err != nil {
		return err
	}
	if err := ensureFlowControl(ctx, kube); err != nil {
		return err
	}
	if err := ensureAdmissionPolicies(ctx, kube, m.settings.ClusterTokenTTL, m.settings.ClusterRecoveryTTL); err != nil {
		return err
	}
	shared, err := controller.NewSharedControllerFactoryFromConfigWithOptions(m.cfg, schemes.All, &controller.SharedControllerFactoryOptions{
		CacheOptions: &cache.SharedCacheFactoryOptions{KindTweakList: map[schema.GroupVersionKind]cache.TweakListOptionsFunc{
			// Agents' credentials are written, never read back from the cache: the
			// hub's cache keeps only the Secrets it reads (kubeconfigs, token values),
			// not a thousand credentials and an event for each.
			corev1.SchemeGroupVersion.WithKind("Secret"): func(o *metav1.ListOptions) {
				o.FieldSelector = "type!=" + names.CredentialSecretType
			},
			// Of the Leases, only agents' heartbeats.
			coordinationv1.SchemeGroupVersion.WithKind("Lease"): func(o *metav1.ListOptions) {
				o.FieldSelector = "metadata.name=" + names.AgentLease
			},
		}},
	})
	if err != nil {
		return err
	}
	opts := &fleetcontrollers.FactoryOptions{SharedControllerFactory: shared}
	fleetFactory, err := fleetcontrollers.NewFactoryFromConfigWithOptions(m.cfg, opts)
	if err != nil {
		return err
	}
	coreFactory, err := corecontrollers.NewFactoryFromConfigWithOptions(m.cfg, opts)
	if err != nil {
		return err
	}
	coordinationFactory, err := coordinationcontrollers.NewFactoryFromConfigWithOptions(m.cfg, opts)
	if err != nil {
		return err
	}
	fleet := fleetFactory.Fleet().V1alpha1()
	core := coreFactory.Core().V1()
	leases := coordinationFactory.Coordination().V1().Lease()

	broadcaster := record.NewBroadcaster()
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: kube.CoreV1().Events("")})
	defer broadcaster.Shutdown()
	events := broadcaster.NewRecorder(schemes.All, corev1.EventSource{Component: "flotilla-hub"})

	namespaces := &clusterns.Ensurer{Namespaces: core.Namespace()}
	namespaces.Register(ctx)
	token.Register(ctx, token.Settings{
		APIServerURL: m.settings.APIServerURL, APIServerCA: m.settings.APIServerCA, NoTTLLifetime: m.settings.NoTTLTokenLifetime,
	}, fleet.ClusterRegistrationToken(), kube, events)
	request.Register(ctx, request.Settings{
		APIServerURL: m.settings.APIServerURL, APIServerCA: m.settings.APIServerCA,
		ClusterTokenTTL: m.settings.ClusterTokenTTL, AgentTokenRenewAfter: m.settings.AgentTokenRenewAfter,
		APIServerAuthorizesIdentities: m.settings.APIServerAuthorizesIdentities,
		Signer:                        m.settings.Signer,
		RequestRetention:              m.settings.RequestRetention,
		RecoveryTTL:                   m.settings.ClusterRecoveryTTL,
		FleetAgents:                   m.settings.FleetAgents,
		FleetAgentTokenTTL:            m.settings.FleetAgentTokenTTL,
	}, fleet.ClusterRegistrationRequest(), fleet.ClusterRegistration(), fleet.Cluster(), fleet.ClusterRegistrationToken(), namespaces, kube, events)
	cluster.Register(ctx, cluster.Settings{OfflineAfter: m.settings.ClusterOfflineAfter},
		fleet.Cluster(), fleetClient.FleetV1alpha1(), fleet.ClusterRegistrationRequest(), fleet.BundleDeployment(), leases, namespaces, kube, events)
	bundle.Register(ctx, bundle.Settings{MaxSize: m.settings.MaxBundleSize}, bundle.Sources{
		Bundles: fleet.Bundle(), Deployments: fleet.BundleDeployment(), Contents: fleet.Content(), Clusters: fleet.Cluster(),
		Groups: fleet.ClusterGroup(), Policies: fleet.Policy(), Secrets: kube.CoreV1(), Events: events,
	})
	bundle.RegisterContents(ctx, fleet.Content(), fleet.BundleDeployment(), fleet.Bundle().Cache())
	clustergroup.Register(ctx, fleet.ClusterGroup(), fleet.Cluster(), fleet.BundleDeployment().Cache())
	agentHub := agentchart.Hub{MaxBundleSize: m.settings.MaxBundleSize, ImageRepository: m.settings.AgentImageRepository, ImageTag: m.settings.AgentImageTag}
	if err := agentbundle.Register(ctx, agentHub, fleet.Cluster(), fleet.Bundle(), fleet.Content()); err != nil {
		return err
	}
	imports.Register(ctx, imports.Settings{
		SecretNamespaces: m.settings.KubeconfigSecretNamespaces, TokenTTL: m.settings.ImportTokenTTL,
		InitialBackoff: 2 * time.Second, MaxBackoff: 5 * time.Minute, Addresses: m.settings.ImportAddresses, Agent: agentHub,
	}, fleet.Cluster(), fleetClient.FleetV1alpha1(), fleet.ClusterRegistrationToken(), core.Secret(), kube, events)

	gitPolicy := m.settings.GitRepoAddresses
	gitPolicy.For, gitPolicy.Flag = "a GitRepo", "--gitrepo-allowed-networks"
	// A GitRepo's author names the servers; private networks are the hub's own.
	gitPolicy.RefusePrivate = true
	gitfetch.Install(&gitPolicy)
	gitSettings := m.settings.GitRepo
	gitSettings.MaxBundleSize = m.settings.MaxBundleSize
	if err := gitrepo.Register(ctx, gitSettings, fleet.GitRepo(), fleet.Bundle(), fleet.GitRepoRestriction(), core.Secret().Cache(), fleetClient, events); err != nil {
		return err
	}

	deployments := fleet.BundleDeployment().Cache()
	_ = metrics.Registry.Register(metrics.StateCounter(func() map[string]int {
		counts := map[string]int{}
		list, _ := deployments.List("", labels.Everything())
		for _, bd := range list {
			counts[string(bundlestate.Of(bd))]++
		}
		return counts
	}))
	if err := cachetrim.Apply(fleet.Cluster().Informer(), fleet.Bundle().Informer(), fleet.BundleDeployment().Informer(),
		fleet.Content().Informer(), fleet.ClusterGroup().Informer(), fleet.ClusterRegistrationRequest().Informer(),
		fleet.ClusterRegistrationToken().Informer(), core.Namespace().Informer(), core.Secret().Informer(), leases.Informer()); err != nil {
		return err
	}
	if err := shared.Start(ctx, m.settings.Workers); err != nil {
		return fmt.Errorf("starting controllers: %w", err)
	}
	dynamicClient, err := dynamic.NewForConfig(m.cfg)
	if err != nil {
		return err
	}
	go capi.Run(ctx, kube.Discovery(), dynamicClient, fleet.Cluster())
	logrus.Info("Controllers started")
	<-ctx.Done()
	return nil
}

// ensureClusterRoles creates or updates the shared ClusterRoles of agents and tokens.
func ensureClusterRoles(ctx context.Context, kube kubernetes.Interface) error {
	roles, err := registration.ClusterRoles()
	if err != nil {
		return err
	}
	client := kube.RbacV1().ClusterRoles()
	for _, role := range roles {
		existing, err := client.Get(ctx, role.Name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			_, err = client.Create(ctx, role, metav1.CreateOptions{})
		} else if err == nil && !sameRules(existing, role) {
			existing.Rules = role.Rules
			existing.Labels = role.Labels
			_, err = client.Update(ctx, existing, metav1.UpdateOptions{})
		}
		if err != nil {
			return fmt.Errorf("ClusterRole %s: %w", role.Name, err)
		}
	}
	return nil
}

// ensureFlowControl applies the priority level and FlowSchema of registration traffic
// (registration.FlowControl). Registration works without them, in the level every
// ServiceAccount shares: a hub not allowed to write them, or on an API server without
// flowcontrol.apiserver.k8s.io/v1 (before Kubernetes 1.29), says so and goes on.
func ensureFlowControl(ctx context.Context, kube kubernetes.Interface) error {
	level, schema, err := registration.FlowControl()
	if err != nil {
		return err
	}
	apply := metav1.ApplyOptions{FieldManager: "flotilla-hub", Force: true}
	_, err = kube.FlowcontrolV1().PriorityLevelConfigurations().Apply(ctx, level, apply)
	if err == nil {
		_, err = kube.FlowcontrolV1().FlowSchemas().Apply(ctx, schema, apply)
	}
	return optional(err, "the priority level of registration traffic",
		"Could not apply the priority level of registration traffic (flotilla-registration); registering agents share the API server's workload-low level")
}

// optional is the error of applying what the hub can run without: nil, after a
// warning, when the API server lacks the API or the hub may not write it.
func optional(err error, what, warning string) error {
	switch {
	case apierrors.IsForbidden(err) || apierrors.IsNotFound(err):
		logrus.WithError(err).Warn(warning)
		return nil
	case err != nil:
		return fmt.Errorf("applying %s: %w", what, err)
	}
	return nil
}

// ensureAdmissionPolicies server-side applies the admission policies of what
// outsiders send (registration.AdmissionPolicies), naming the hub by the user the API
// server sees it as. An API server without ValidatingAdmissionPolicy (before
// Kubernetes 1.30) or SelfSubjectReview, or a hub not allowed to write them, is
// warned about: the hub still works, but a token holder can then name another token
// in its requests, an agent create other Leases or write all of its Cluster's
// status or mint tokens longer than the hub's, and a workspace user make agent
// bundles.
func ensureAdmissionPolicies(ctx context.Context, kube kubernetes.Interface, tokenTTL, recoveryTTL time.Duration) error {
	const warning = "Could not apply the admission policies; requests naming another token, agents' other Leases, status fields and long-lived tokens, and agent bundles made by others are not refused"
	review, err := kube.AuthenticationV1().SelfSubjectReviews().Create(ctx, &authenticationv1.SelfSubjectReview{}, metav1.CreateOptions{})
	if err != nil {
		return optional(err, "a review of the hub's own user", warning)
	}
	policies, bindings, err := registration.AdmissionPolicies(registration.Admission{
		HubUser: review.Status.UserInfo.Username, ClusterTokenTTL: tokenTTL, ClusterRecoveryTTL: recoveryTTL})
	if err != nil {
		return err
	}
	apply := metav1.ApplyOptions{FieldManager: "flotilla-hub", Force: true}
	for _, p := range policies {
		if _, err = kube.AdmissionregistrationV1().ValidatingAdmissionPolicies().Apply(ctx, p, apply); err != nil {
			break
		}
	}
	for _, b := range bindings {
		if err != nil {
			break
		}
		_, err = kube.AdmissionregistrationV1().ValidatingAdmissionPolicyBindings().Apply(ctx, b, apply)
	}
	return optional(err, "the admission policies", warning)
}

func sameRules(a, b *rbacv1.ClusterRole) bool {
	if len(a.Rules) != len(b.Rules) {
		return false
	}
	for i := range a.Rules {
		if a.Rules[i].String() != b.Rules[i].String() {
			return false
		}
	}
	return true
}
