// Package imports is the manager-initiated registration controller. For a Cluster with
// spec.kubeConfigSecret it reads the downstream kubeconfig (the Cluster API
// "<cluster>-kubeconfig" format), checks that the downstream API answers, mints a
// short-lived registration token bound to this Cluster, and installs the fleet-agent
// chart into the downstream cluster with the Helm SDK. The agent then registers
// through the same pull path as any other. Raising spec.redeployAgentGeneration, or
// changing the agent settings, deploys it afresh.
package imports

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corecontrollers "github.com/rancher/wrangler/v3/pkg/generated/controllers/core/v1"
	"github.com/rancher/wrangler/v3/pkg/relatedresource"
	"github.com/sirupsen/logrus"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/connrotation"
	"k8s.io/client-go/util/flowcontrol"
	"sigs.k8s.io/yaml"

	"github.com/flotilla/flotilla/pkg/agentchart"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/controllers/statuspatch"
	fleetclient "github.com/flotilla/flotilla/pkg/generated/clientset/versioned/typed/fleet.cattle.io/v1alpha1"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/helmclient"
	"github.com/flotilla/flotilla/pkg/kubeconfig"
	"github.com/flotilla/flotilla/pkg/metrics"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// Settings of the import controller.
type Settings struct {
	// SecretNamespaces are namespaces other than a Cluster's own that
	// spec.kubeConfigSecretNamespace may name.
	SecretNamespaces []string
	// TokenTTL is the lifetime of the registration token minted for a deployment.
	TokenTTL time.Duration
	// InitialBackoff and MaxBackoff bound the retries of a failing import.
	InitialBackoff, MaxBackoff time.Duration
	// Addresses decides which addresses a kubeconfig's server may resolve to.
	Addresses kubeconfig.AddressPolicy
	// Agent is what the agents the hub deploys learn from it.
	Agent agentchart.Hub
}

// Keys of a kubeconfig Secret.
const (
	KeyKubeconfig   = "value"
	KeyAPIServerURL = "apiServerURL"
	KeyAPIServerCA  = "apiServerCA"
)

// Reasons of the Imported condition.
const (
	ReasonSecretNamespaceNotAllowed = "SecretNamespaceNotAllowed"
	ReasonSecretNotFound            = "SecretNotFound"
	ReasonSecretNotShared           = "SecretNotShared"
	ReasonMissingKubeconfig         = "MissingKubeconfig"
	ReasonInvalidKubeconfig         = "InvalidKubeconfig"
	ReasonUnsafeKubeconfig          = "UnsafeKubeconfig"
	ReasonUnreachable               = "Unreachable"
	ReasonUnauthorized              = "Unauthorized"
	ReasonWaitingForToken           = "WaitingForToken"
	ReasonHelmFailed                = "HelmFailed"
)

// maxDownstreamReleases bounds what the agent's Helm releases read from a downstream
// cluster may decode to (the agent chart's release is about a hundred kilobytes).
const maxDownstreamReleases = 32 << 20

// helmTimeout bounds a Helm install or uninstall in a downstream cluster.
const helmTimeout = 2 * time.Minute

// deploymentKey, on an import token (annotation) and on the agent's Helm release
// (label), records which deployment of the Cluster's agent it belongs to: the Cluster
// and its redeployAgentGeneration. A change of agent settings does not redeploy: it
// reaches the agent through its agent bundle, as an upgrade of the same release.
const deploymentKey = "fleet.cattle.io/agent-deployment"

// deploymentID identifies one deployment of cluster's agent.
func deploymentID(cluster *fleet.Cluster) string {
	return string(cluster.UID) + "-" + strconv.FormatInt(cluster.Spec.RedeployAgentGeneration, 10)
}

// importError is a failure with a reason for the Imported condition.
type importError struct {
	reason string
	err    error
}

func (e *importError) Error() string { return e.err.Error() }
func (e *importError) Unwrap() error { return e.err }

// failureReason is the Imported reason of an attempt that ended with err: the
// reason of the import error it wraps, HelmFailed for any other error, "" for none.
func failureReason(err error) string {
	var failure *importError
	switch {
	case err == nil:
		return ""
	case errors.As(err, &failure):
		return failure.reason
	default:
		return ReasonHelmFailed
	}
}

func fail(reason string, format string, args ...any) error {
	return &importError{reason: reason, err: fmt.Errorf(format, args...)}
}

type handler struct {
	settings Settings
	clusters fleetcontrollers.ClusterController
	// client writes the Cluster's status (statuspatch.ImportsOwner).
	client  fleetclient.ClustersGetter
	tokens  fleetcontrollers.ClusterRegistrationTokenController
	secrets corecontrollers.SecretCache
	kube    kubernetes.Interface
	events  record.EventRecorder
	backoff *flowcontrol.Backoff

	// failures remembers the last failed attempt per Cluster: a reconcile that brings
	// nothing new (no change to the Cluster or its Secret) before the retry time is
	// put off until then, so status updates cannot make a hot loop, while a corrected
	// Secret is picked up at once.
	failures map[string]failedAttempt

	// clients caches a client configuration per Cluster while it is being imported,
	// keyed by the kubeconfig Secret's resourceVersion, and is emptied once the agent
	// is deployed: the hub keeps no connection to a downstream cluster after that.
	mu      sync.Mutex
	clients map[string]cachedClient
}

type failedAttempt struct {
	generation    int64
	secretVersion string
	retryAt       time.Time
}

type cachedClient struct {
	secretVersion string
	config        *rest.Config
	// dialer tracks the connections made with config, to close them all at once.
	dialer *connrotation.Dialer
}

// Register starts importing Clusters with a kubeConfigSecret.
func Register(ctx context.Context, settings Settings, clusters fleetcontrollers.ClusterController, client fleetclient.ClustersGetter,
	tokens fleetcontrollers.ClusterRegistrationTokenController, secrets corecontrollers.SecretController,
	kube kubernetes.Interface, events record.EventRecorder) {
	h := &handler{
		settings: settings, clusters: clusters, client: client, tokens: tokens, secrets: secrets.Cache(), kube: kube, events: events,
		backoff:  flowcontrol.NewBackOff(settings.InitialBackoff, settings.MaxBackoff),
		clients:  map[string]cachedClient{},
		failures: map[string]failedAttempt{},
	}
	clusters.Cache().AddIndexer(bySecret, func(c *fleet.Cluster) ([]string, error) {
		if c.Spec.KubeConfigSecret == "" {
			return nil, nil
		}
		return []string{secretNamespace(c) + "/" + c.Spec.KubeConfigSecret}, nil
	})
	// A changed kubeconfig Secret, or the values Secret of an import token appearing,
	// brings its Cluster back: fixing a Secret needs no hub restart.
	relatedresource.Watch(ctx, "cluster-kubeconfig-secret", h.clustersOfSecret, clusters, secrets, tokens)
	clusters.OnChange(ctx, "cluster-import", h.onChange)
}

const bySecret = "fleet.cattle.io/by-kubeconfig-secret"

// SharedWith says whether a kubeconfig Secret kept in a namespace of
// --kubeconfig-secret-namespaces may be used by the Clusters of workspace: whether its
// annotation names.AllowedWorkspacesAnnotation lists workspace, or is "*". Whoever may
// write the Secret decides who may use it; a Secret that says nothing is no one's.
func SharedWith(secret *corev1.Secret, workspace string) bool {
	for _, allowed := range strings.Split(secret.Annotations[names.AllowedWorkspacesAnnotation], ",") {
		if allowed = strings.TrimSpace(allowed); allowed == "*" || (allowed != "" && allowed == workspace) {
			return true
		}
	}
	return false
}

func secretNamespace(c *fleet.Cluster) string {
	if c.Spec.KubeConfigSecretNamespace != "" {
		return c.Spec.KubeConfigSecretNamespace
	}
	return c.Namespace
}

func (h *handler) clustersOfSecret(namespace, name string, obj runtime.Object) ([]relatedresource.Key, error) {
	var keys []relatedresource.Key
	// An import token, or its values Secret, leads to the Cluster it was minted for.
	if meta, ok := obj.(metav1.Object); ok && meta.GetLabels()[names.ClusterLabel] != "" {
		if _, isToken := obj.(*fleet.ClusterRegistrationToken); isToken || meta.GetLabels()[names.RegistrationTokenLabel] != "" {
			keys = append(keys, relatedresource.Key{Namespace: namespace, Name: meta.GetLabels()[names.ClusterLabel]})
		}
	}
	if _, ok := obj.(*corev1.Secret); !ok && obj != nil {
		return keys, nil
	}
	clusters, err := h.clusters.Cache().GetByIndex(bySecret, namespace+"/"+name)
	if err != nil {
		return nil, err
	}
	for _, c := range clusters {
		keys = append(keys, relatedresource.Key{Namespace: c.Namespace, Name: c.Name})
	}
	return keys, nil
}

// deployed says whether cluster's agent is deployed as its spec asks.
func deployed(cluster *fleet.Cluster) bool {
	gen := cluster.Status.AgentDeployedGeneration
	return gen != nil && *gen == cluster.Spec.RedeployAgentGeneration &&
		conditions.IsTrue(cluster.Status.Conditions, fleet.ConditionImported)
}

func (h *handler) onChange(key string, cluster *fleet.Cluster) (*fleet.Cluster, error) {
	if cluster == nil || cluster.DeletionTimestamp != nil || cluster.Spec.KubeConfigSecret == "" {
		h.forget(key)
		return cluster, nil
	}
	if deployed(cluster) {
		return cluster, nil
	}
	attempt := failedAttempt{generation: cluster.Generation, secretVersion: h.secretVersion(cluster)}
	if last, ok := h.lastFailure(key); ok && last.generation == attempt.generation && last.secretVersion == attempt.secretVersion {
		if wait := time.Until(last.retryAt); wait > 0 {
			h.clusters.EnqueueAfter(cluster.Namespace, cluster.Name, wait)
			return cluster, nil
		}
	}
	log := logrus.WithField("cluster", key)
	updated, err := h.deploy(context.Background(), cluster, log)
	if updated != nil {
		cluster = updated
	}
	status := cluster.Status.DeepCopy()
	switch reason := failureReason(err); {
	case reason == ReasonWaitingForToken:
		// Not a failure: the token controller has not written the values yet. Its
		// Secret appearing brings the Cluster back; the delayed retry is a safety net.
		conditions.Set(&status.Conditions, fleet.ConditionImported, corev1.ConditionFalse, reason, err.Error())
		h.clusters.EnqueueAfter(cluster.Namespace, cluster.Name, 2*time.Second)
	case err != nil:
		metrics.ImportsFailed.WithLabelValues(reason).Inc()
		h.backoff.Next(key, h.backoff.Clock.Now())
		delay := h.backoff.Get(key)
		attempt.retryAt = time.Now().Add(delay)
		h.mu.Lock()
		h.failures[key] = attempt
		h.mu.Unlock()
		if conditions.Set(&status.Conditions, fleet.ConditionImported, corev1.ConditionFalse, reason, err.Error()) {
			h.events.Event(cluster, corev1.EventTypeWarning, reason, err.Error())
		}
		log.WithError(err).WithFields(logrus.Fields{"reason": reason, "retryIn": delay.String()}).Warn("Cannot deploy the agent")
		h.clusters.EnqueueAfter(cluster.Namespace, cluster.Name, delay)
	default:
		h.backoff.Reset(key)
		h.forget(key)
		h.mu.Lock()
		delete(h.failures, key)
		h.mu.Unlock()
		gen := cluster.Spec.RedeployAgentGeneration
		status.AgentDeployedGeneration = &gen
		status.AgentConfigHash = agentchart.SettingsHash(cluster)
		conditions.Set(&status.Conditions, fleet.ConditionImported, corev1.ConditionTrue, "", "")
		metrics.AgentsDeployed.Inc()
		h.events.Eventf(cluster, corev1.EventTypeNormal, "AgentDeployed", "Deployed the agent (generation %d) into the downstream cluster", gen)
		log.WithField("generation", gen).Info("Deployed the agent into the downstream cluster")
	}
	if equality.Semantic.DeepEqual(*status, cluster.Status) {
		return cluster, nil
	}
	owner := statuspatch.ImportsOwner
	// A deployment's result is news whatever copy it was computed from; a failure
	// computed from a stale copy would send back the generation that copy had, over
	// one a later deployment recorded: it is written over the version it read only.
	owner.Optimistic = err != nil
	return owner.ApplyCluster(context.Background(), h.client, cluster, *status)
}

func (h *handler) lastFailure(key string) (failedAttempt, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f, ok := h.failures[key]
	return f, ok
}

// secretVersion is the resourceVersion of cluster's kubeconfig Secret, or "" if absent.
func (h *handler) secretVersion(cluster *fleet.Cluster) string {
	if secret, err := h.secrets.Get(secretNamespace(cluster), cluster.Spec.KubeConfigSecret); err == nil {
		return secret.ResourceVersion
	}
	return ""
}

// forget drops the client of a Cluster and closes its connections.
func (h *handler) forget(key string) {
	h.mu.Lock()
	cached, ok := h.clients[key]
	delete(h.clients, key)
	h.mu.Unlock()
	if ok {
		cached.dialer.CloseAll()
	}
}

// deploy does one attempt at deploying cluster's agent. It returns the Cluster if it
// had to update it (to give it a clientID).
func (h *handler) deploy(ctx context.Context, cluster *fleet.Cluster, log logrus.FieldLogger) (*fleet.Cluster, error) {
	secret, err := h.kubeconfigSecret(cluster)
	if err != nil {
		return nil, err
	}
	cfg, err := h.downstreamConfig(cluster, secret)
	if err != nil {
		return nil, err
	}
	if err := checkReachable(cfg, secret); err != nil {
		return nil, err
	}

	var updated *fleet.Cluster
	if cluster.Spec.ClientID == "" {
		withID := cluster.DeepCopy()
		withID.Spec.ClientID, err = randomClientID()
		if err != nil {
			return nil, err
		}
		if updated, err = h.clusters.Update(withID); err != nil {
			return nil, fmt.Errorf("giving Cluster a clientID: %w", err)
		}
		cluster = updated
	}

	values, err := h.registrationValues(cluster, secret)
	if err != nil {
		return updated, err
	}
	return updated, h.install(ctx, cluster, cfg, values, secretRef(secret), log)
}

func secretRef(s *corev1.Secret) string { return s.Namespace + "/" + s.Name }

func (h *handler) kubeconfigSecret(cluster *fleet.Cluster) (*corev1.Secret, error) {
	ns := secretNamespace(cluster)
	if ns != cluster.Namespace && !slices.Contains(h.settings.SecretNamespaces, ns) {
		return nil, fail(ReasonSecretNamespaceNotAllowed,
			"kubeConfigSecretNamespace %q is not allowed: the hub reads kubeconfig Secrets from a Cluster's own namespace, or from the namespaces given to --kubeconfig-secret-namespaces", ns)
	}
	secret, err := h.secrets.Get(ns, cluster.Spec.KubeConfigSecret)
	if apierrors.IsNotFound(err) {
		return nil, fail(ReasonSecretNotFound, "kubeconfig Secret %s/%s not found: create it with the downstream kubeconfig under the key %q", ns, cluster.Spec.KubeConfigSecret, KeyKubeconfig)
	}
	if err != nil {
		return nil, err
	}
	if ns != cluster.Namespace && !SharedWith(secret, cluster.Namespace) {
		return nil, fail(ReasonSecretNotShared,
			"kubeconfig Secret %s/%s is in a namespace of --kubeconfig-secret-namespaces but does not name workspace %q in its annotation %s (a comma-separated list of workspaces, or *)",
			ns, secret.Name, cluster.Namespace, names.AllowedWorkspacesAnnotation)
	}
	if len(secret.Data[KeyKubeconfig]) == 0 {
		return nil, fail(ReasonMissingKubeconfig, "kubeconfig Secret %s/%s has no key %q (the kubeconfig, as Cluster API writes it)", ns, secret.Name, KeyKubeconfig)
	}
	return secret, nil
}

// downstreamConfig parses the kubeconfig, or returns the one cached for this version
// of the Secret.
func (h *handler) downstreamConfig(cluster *fleet.Cluster, secret *corev1.Secret) (*rest.Config, error) {
	key := cluster.Namespace + "/" + cluster.Name
	h.mu.Lock()
	cached, ok := h.clients[key]
	h.mu.Unlock()
	if ok && cached.secretVersion == secret.ResourceVersion {
		return cached.config, nil
	}
	cfg, err := kubeconfig.FromUntrusted(secret.Data[KeyKubeconfig])
	var unsafe *kubeconfig.UnsafeError
	if errors.As(err, &unsafe) {
		return nil, fail(ReasonUnsafeKubeconfig, "kubeconfig Secret %s key %q: %v", secretRef(secret), KeyKubeconfig, err)
	}
	if err != nil {
		return nil, fail(ReasonInvalidKubeconfig, "kubeconfig Secret %s key %q is not a usable kubeconfig: %v", secretRef(secret), KeyKubeconfig, err)
	}
	cfg.UserAgent = "flotilla-hub-import"
	cfg.Timeout = 30 * time.Second
	// Every connection to the downstream cluster goes through this dialer, so that
	// they can all be closed once the agent is deployed, and each is checked against
	// the address policy as it is made.
	dialer := connrotation.NewDialer((&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second, Control: h.settings.Addresses.Control}).DialContext)
	cfg.Dial = dialer.DialContext
	h.forget(key)
	h.mu.Lock()
	h.clients[key] = cachedClient{secretVersion: secret.ResourceVersion, config: cfg, dialer: dialer}
	h.mu.Unlock()
	return cfg, nil
}

func checkReachable(cfg *rest.Config, secret *corev1.Secret) error {
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return fail(ReasonInvalidKubeconfig, "kubeconfig Secret %s: %v", secretRef(secret), err)
	}
	_, err = client.CoreV1().Namespaces().Get(context.Background(), "kube-system", metav1.GetOptions{})
	var refused *kubeconfig.AddressError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &refused):
		return fail(ReasonUnsafeKubeconfig, "kubeconfig Secret %s: server %s: %v", secretRef(secret), cfg.Host, refused)
	case apierrors.IsUnauthorized(err):
		return fail(ReasonUnauthorized, "the API server %s refused the credentials of kubeconfig Secret %s (401 Unauthorized)", cfg.Host, secretRef(secret))
	case apierrors.IsForbidden(err):
		return fail(ReasonUnauthorized, "the kubeconfig of Secret %s may not read namespaces on %s (403 Forbidden); it needs to install the agent as cluster administrator", secretRef(secret), cfg.Host)
	default:
		return fail(ReasonUnreachable, "cannot reach the API server %s of kubeconfig Secret %s: %v", cfg.Host, secretRef(secret), err)
	}
}

// registrationValues returns the values of the registration token minted for this
// deployment of cluster, creating it if needed and deleting the tokens of earlier
// deployments (so their values stop working). Optional apiServerURL and apiServerCA
// keys of the kubeconfig Secret replace the hub's.
func (h *handler) registrationValues(cluster *fleet.Cluster, secret *corev1.Secret) (*registration.Values, error) {
	deployment := deploymentID(cluster)
	name := names.ImportToken(cluster.Name, deployment)
	minted, err := h.tokens.Cache().List(cluster.Namespace, labels.SelectorFromSet(labels.Set{names.ClusterLabel: cluster.Name}))
	if err != nil {
		return nil, err
	}
	var token *fleet.ClusterRegistrationToken
	for _, t := range minted {
		if t.Name == name {
			token = t
			continue
		}
		if err := h.tokens.Delete(t.Namespace, t.Name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("deleting the registration token %s/%s of an earlier deployment: %w", t.Namespace, t.Name, err)
		}
	}
	if token == nil {
		_, err = h.tokens.Create(&fleet.ClusterRegistrationToken{
			ObjectMeta: metav1.ObjectMeta{
				Name: name, Namespace: cluster.Namespace,
				Labels:          map[string]string{names.ClusterLabel: cluster.Name, names.ManagedLabel: "true"},
				Annotations:     map[string]string{deploymentKey: deployment},
				OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(cluster, fleet.SchemeGroupVersion.WithKind("Cluster"))},
			},
			Spec: fleet.ClusterRegistrationTokenSpec{TTL: &metav1.Duration{Duration: h.settings.TokenTTL}},
		})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating registration token %s/%s: %w", cluster.Namespace, name, err)
		}
		return nil, fail(ReasonWaitingForToken, "waiting for registration token %s/%s", cluster.Namespace, name)
	}
	valuesSecret, err := h.secrets.Get(cluster.Namespace, name)
	if err != nil || len(valuesSecret.Data[registration.ValuesKey]) == 0 || !metav1.IsControlledBy(valuesSecret, token) {
		return nil, fail(ReasonWaitingForToken, "waiting for the values of registration token %s/%s", cluster.Namespace, name)
	}
	values := &registration.Values{}
	if err := yaml.Unmarshal(valuesSecret.Data[registration.ValuesKey], values); err != nil {
		return nil, fmt.Errorf("registration token %s/%s values: %w", cluster.Namespace, name, err)
	}
	if url := string(secret.Data[KeyAPIServerURL]); url != "" {
		values.APIServerURL = url
	}
	if ca := string(secret.Data[KeyAPIServerCA]); ca != "" {
		values.APIServerCA = ca
	}
	return values, nil
}

// install removes any earlier agent release and its downstream identity, then
// installs the agent chart afresh, so the agent registers anew into this Cluster.
func (h *handler) install(ctx context.Context, cluster *fleet.Cluster, cfg *rest.Config, reg *registration.Values, secret string, log logrus.FieldLogger) error {
	namespace := agentchart.Namespace(cluster)
	actionConfig, err := helmclient.Configuration(cfg, namespace, log)
	if err != nil {
		return fail(ReasonHelmFailed, "%v", err)
	}
	downstream, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	// The downstream cluster's releases are written by whoever runs it.
	helmclient.BoundReleases(actionConfig, downstream.CoreV1().Secrets(namespace), maxDownstreamReleases)
	deployment := deploymentID(cluster)
	existing, err := action.NewGet(actionConfig).Run(names.AgentRelease)
	if err == nil && existing.Labels[deploymentKey] == deployment {
		// Installed by an earlier attempt whose status update has not been seen yet.
		return nil
	}
	if err == nil {
		uninstall := action.NewUninstall(actionConfig)
		uninstall.Timeout = helmTimeout
		if _, err := uninstall.Run(names.AgentRelease); err != nil {
			return fail(ReasonHelmFailed, "removing the previous agent release %s/%s with kubeconfig Secret %s: %v", namespace, names.AgentRelease, secret, err)
		}
		log.Info("Removed the previous agent release")
	} else if !errors.Is(err, driver.ErrReleaseNotFound) {
		return fail(ReasonHelmFailed, "reading the agent release %s/%s with kubeconfig Secret %s: %v", namespace, names.AgentRelease, secret, err)
	}
	// The previous identity goes too: the new agent registers with the new token.
	for _, name := range []string{names.AgentIdentitySecret, names.AgentBootstrapSecret} {
		if err := downstream.CoreV1().Secrets(namespace).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return fail(ReasonHelmFailed, "removing the previous agent identity %s/%s: %v", namespace, name, err)
		}
	}

	chart, err := agentchart.Load()
	if err != nil {
		return err
	}
	values, err := agentchart.Values(cluster, reg, h.settings.Agent)
	if err != nil {
		return err
	}
	existingObjects, err := inTheWay(ctx, actionConfig, chart, values, namespace)
	if err != nil {
		return fail(ReasonHelmFailed, "with kubeconfig Secret %s: %v", secret, err)
	}
	takeover := decideTakeover(existingObjects, namespace)
	if err := removeFleetsAgent(actionConfig, takeover, namespace, secret, log); err != nil {
		return err
	}
	install := action.NewInstall(actionConfig)
	install.ReleaseName = names.AgentRelease
	install.Namespace = namespace
	install.CreateNamespace = true
	install.Timeout = helmTimeout
	install.Labels = map[string]string{deploymentKey: deployment}
	install.TakeOwnership = takeover.adopt
	if _, err := install.RunWithContext(ctx, chart, values); err != nil {
		return fail(ReasonHelmFailed, "installing the agent chart into %s with kubeconfig Secret %s: %v", namespace, secret, err)
	}
	if takeover.adopt {
		h.events.Event(cluster, corev1.EventTypeNormal, "FleetAgentReplaced", takeover.String())
		log.Info(takeover.String())
	}
	return nil
}

func randomClientID() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
