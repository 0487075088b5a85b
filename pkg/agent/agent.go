package agent

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	"github.com/flotilla/flotilla/pkg/agent/deployer"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
	"github.com/flotilla/flotilla/pkg/signing"
)

// Config is what the agent program is given: a client for the downstream cluster and
// the namespace of its Secrets and ConfigMap. Everything else it reads from there.
type Config struct {
	Downstream kubernetes.Interface
	// DownstreamConfig reaches the same cluster as Downstream, for Helm.
	DownstreamConfig *rest.Config
	Namespace        string
	Version          string
	// HubProxy is the proxy of the agent's connections to the hub (only those).
	HubProxy registration.HubProxy
	// Ready, when set, is told whether the agent runs with its identity: deploying
	// its cluster's Bundles and checking in. It is what the agent's /readyz answers.
	Ready func(bool)
}

func (c Config) setReady(ready bool) {
	if c.Ready != nil {
		c.Ready(ready)
	}
}

// Run runs the agent until ctx ends. A new bootstrap Secret (the chart installed or
// upgraded with a fresh values.yaml) makes it register again.
func Run(ctx context.Context, cfg Config) error {
	d := registration.Downstream{Client: cfg.Downstream, Namespace: cfg.Namespace, HubProxy: cfg.HubProxy}
	log := logrus.WithField("namespace", cfg.Namespace)
	bootstrapAdded := watchBootstrap(ctx, cfg.Downstream, cfg.Namespace)
	sessionBackoff := newSessionBackoff()
	pendingBackoff := newPendingBackoff()

	for ctx.Err() == nil {
		cred, pending := obtainIdentity(ctx, d, bootstrapAdded, log)
		if cred == nil {
			return nil
		}
		// A bootstrap Secret seen so far was the one just used (or gone): only a later
		// one asks for a new registration.
		select {
		case <-bootstrapAdded:
		default:
		}
		// One created since the registration deleted its own would have been drained
		// with it: look once.
		if values, err := d.Bootstrap(ctx); err == nil && values != nil && pending == nil {
			log.Info("A new bootstrap Secret appeared; registering again")
			continue
		}
		// With a bootstrap Secret it could not register with yet, the agent carries
		// on with its identity and tries the Secret again later.
		retry := time.Duration(0)
		switch {
		case pending == nil:
			pendingBackoff = newPendingBackoff()
		case needsAPerson(pending):
			retry = refusedRetry
		default:
			retry = pendingBackoff.Step()
		}
		session, cancel := context.WithCancel(ctx)
		go func() {
			var again <-chan time.Time
			if retry > 0 {
				again = time.After(retry)
			}
			select {
			case <-bootstrapAdded:
				log.Info("A new bootstrap Secret appeared; registering again")
				cancel()
			case <-again:
				log.Info("Trying the bootstrap Secret again")
				cancel()
			case <-session.Done():
			}
		}()
		started := time.Now()
		err := runSession(session, cfg, d, *cred, log)
		cancel()
		if err != nil {
			log.WithError(err).Error("Agent session ended")
			if time.Since(started) > time.Minute {
				sessionBackoff = newSessionBackoff()
			}
			select {
			case <-ctx.Done():
			case <-time.After(sessionBackoff.Step()):
			}
		}
	}
	return nil
}

// newPendingBackoff paces the attempts to register with a bootstrap Secret the agent
// could not register with, while it carries on with the identity it has.
func newPendingBackoff() wait.Backoff {
	return wait.Backoff{Duration: 30 * time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: refusedRetry}
}

// newSessionBackoff paces sessions that end in an error, so that one failing at once
// (a setting that cannot be read) is not started again and again.
func newSessionBackoff() wait.Backoff {
	return wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 5 * time.Minute}
}

// trustedKeys reads the keys whose signatures the agent requires (key trustedKeys of
// the fleet-agent ConfigMap, the chart's value of that name): nil when none is set. It
// fails closed: a ConfigMap it cannot read is an error (the session is tried again),
// and keys it cannot parse give a Verifier that refuses every Bundle and says why.
func trustedKeys(ctx context.Context, client kubernetes.Interface, namespace string, log logrus.FieldLogger) (*signing.Verifier, error) {
	cm, err := client.CoreV1().ConfigMaps(namespace).Get(ctx, names.AgentConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the trusted keys (ConfigMap %s/%s): %w", namespace, names.AgentConfigMap, err)
	}
	v, err := signing.ParseTrustedKeys([]byte(cm.Data[names.AgentTrustedKeysKey]))
	if err != nil {
		err = fmt.Errorf("ConfigMap %s/%s, key %s: %w", namespace, names.AgentConfigMap, names.AgentTrustedKeysKey, err)
		log.WithError(err).Error("Cannot read the trusted keys: no Bundle is deployed until they are fixed")
		return signing.Refusing(err), nil
	}
	if v != nil {
		log.WithField("keys", v.Keys()).Info("Deploying only Bundles signed by a trusted key")
	}
	return v, nil
}

// obtainIdentity returns the cluster's identity: it registers when a bootstrap Secret
// is present (it is deleted once registration succeeds, so its presence asks for a
// registration), and otherwise uses the stored identity. Failures are logged once per
// attempt and retried with backoff; it returns nil only when ctx ends. When the
// registration fails and the agent has an identity that still works (a move to a hub
// it cannot reach yet, a token refused), it returns that identity with the failure as
// pending: the cluster stays with its hub, and the registration is tried again later.
func obtainIdentity(ctx context.Context, d registration.Downstream, bootstrapAdded <-chan struct{}, log logrus.FieldLogger) (cred *registration.Credential, pending error) {
	backoff := wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 5 * time.Minute}
	var lastRefusal string
	for {
		cred, err := tryIdentity(ctx, d, log)
		if cred != nil {
			return cred, nil
		}
		if stored := usableIdentity(ctx, d); stored != nil && err != nil {
			log.WithError(err).Warn("Cannot register with the bootstrap Secret; carrying on with the identity the agent has (Cluster " +
				stored.ClusterNamespace + "/" + stored.ClusterName + " of " + stored.APIServerURL + ") and trying again later")
			return stored, err
		}
		delay := backoff.Step()
		switch {
		case needsAPerson(err):
			// Asking again soon would be refused again: a person must act first (the
			// message says what), and a new bootstrap Secret retries at once.
			if err.Error() != lastRefusal {
				log.Error(err.Error())
				lastRefusal = err.Error()
			}
			delay = refusedRetry
		case err != nil:
			log.WithError(err).Error("Cannot obtain the cluster identity; will retry")
		}
		select {
		case <-ctx.Done():
			return nil, nil
		case <-bootstrapAdded:
			backoff = wait.Backoff{Duration: time.Second, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 5 * time.Minute}
		case <-time.After(delay):
		}
	}
}

// needsAPerson says whether err is a failure that asking again soon would meet
// again: a refusal, or an identity that cannot be recovered.
func needsAPerson(err error) bool {
	var (
		refused *registration.RefusedError
		final   *registration.ErrNoRecovery
	)
	return errors.As(err, &refused) || errors.As(err, &final)
}

// usableIdentity is the stored identity, if there is one the agent can go on with
// while a bootstrap Secret waits: bound to its key and not expired.
func usableIdentity(ctx context.Context, d registration.Downstream) *registration.Credential {
	values, err := d.Bootstrap(ctx)
	if err != nil || values == nil {
		return nil
	}
	cred, err := d.Identity(ctx)
	if err != nil || cred == nil || cred.KeyUnbound || cred.Expired(time.Now()) {
		return nil
	}
	return cred
}

// refusedRetry is how long an agent whose registration the hub refused waits before
// asking again, unless a new bootstrap Secret arrives first.
const refusedRetry = 15 * time.Minute

func tryIdentity(ctx context.Context, d registration.Downstream, log logrus.FieldLogger) (*registration.Credential, error) {
	values, err := d.Bootstrap(ctx)
	if err != nil {
		return nil, err
	}
	if values != nil {
		return registration.Register(ctx, d, *values, log)
	}
	cred, err := d.Identity(ctx)
	if err != nil {
		return nil, err
	}
	if cred == nil {
		return nil, errNoIdentity(d.Namespace)
	}
	if cred.KeyUnbound {
		return claimFleetIdentity(ctx, d, *cred, log)
	}
	if cred.Expired(time.Now()) {
		// Expired while the agent was stopped or offline: its key may bring it back.
		return registration.Recover(ctx, d, *cred, log)
	}
	return cred, nil
}

// claimFleetIdentity carries on as the Cluster Fleet's agent registered, which this
// agent replaced (the agent bundle upgrades Fleet's fleet-agent release in place):
// it binds its key to the Cluster and keeps the identity the hub gives it for that.
// Where the hub will not, it works with Fleet's agent's credential, as Fleet's agent
// did, and tries again with the next session.
func claimFleetIdentity(ctx context.Context, d registration.Downstream, cred registration.Credential, log logrus.FieldLogger) (*registration.Credential, error) {
	log.WithField("cluster", cred.ClusterNamespace+"/"+cred.ClusterName).Info("Found the identity of Fleet's agent; binding this agent's key to its Cluster")
	claimed, err := registration.Claim(ctx, d, cred, log)
	var noClaim *registration.ErrNoClaim
	if errors.As(err, &noClaim) {
		log.Warn(noClaim.Why)
		if cred.Expired(time.Now()) {
			return nil, &registration.ErrNoRecovery{Why: cred.ExpiredAdvice()}
		}
		return &cred, nil
	}
	return claimed, err
}

type identityError string

func (e identityError) Error() string { return string(e) }

func errNoIdentity(namespace string) error {
	return identityError("no identity (Secret " + namespace + "/" + names.AgentIdentitySecret + ") and no registration values (Secret " +
		namespace + "/" + names.AgentBootstrapSecret + "): install the fleet-agent chart with the values.yaml of a ClusterRegistrationToken")
}

// runSession works as the cluster identity cred until ctx ends: it renews the token
// and checks in with the hub.
func runSession(ctx context.Context, cfg Config, d registration.Downstream, cred registration.Credential, log logrus.FieldLogger) error {
	log = log.WithField("cluster", cred.ClusterNamespace+"/"+cred.ClusterName)
	hubConfig, auth, err := d.HubClient(ctx, cred)
	if err != nil {
		return err
	}
	hubKube, err := kubernetes.NewForConfig(hubConfig)
	if err != nil {
		return err
	}
	hubFleet, err := versioned.NewForConfig(hubConfig)
	if err != nil {
		return err
	}
	settings, err := d.Settings(ctx)
	if err != nil {
		log.WithError(err).Warn("Using default agent settings")
		settings = registration.AgentSettings{CheckinInterval: registration.DefaultCheckinInterval, MonitorInterval: registration.DefaultMonitorInterval}
	}
	verifier, err := trustedKeys(ctx, cfg.Downstream, cfg.Namespace, log)
	if err != nil {
		return err
	}

	renewer := &registration.Renewer{Downstream: d, Hub: hubKube, HubConfig: hubConfig, Auth: auth, Log: log}
	go renewer.Run(ctx, cred)

	if ctx.Err() != nil {
		return nil
	}
	deployments, err := startDeployer(ctx, cfg, cred, hubConfig, hubFleet, settings, verifier, log)
	if err != nil {
		return err
	}
	// However the session ends, Helm operations under way finish first.
	defer deployments.Wait()
	cfg.setReady(true)
	defer cfg.setReady(false)

	version := ""
	if v, err := cfg.Downstream.Discovery().ServerVersion(); err == nil {
		version = v.GitVersion
	}
	checkin := &Checkin{Hub: hubFleet, Leases: hubKube.CoordinationV1(), Credential: cred, Namespace: cfg.Namespace, Version: cfg.Version, Log: log,
		Nodes: WatchNodes(ctx, cfg.Downstream), KubernetesVersion: version}
	checkin.Run(ctx, settings.CheckinInterval)
	return nil
}

// startDeployer starts deploying the cluster's BundleDeployments, read from its
// per-cluster namespace on the hub with the cluster's identity.
func startDeployer(ctx context.Context, cfg Config, cred registration.Credential, hubConfig *rest.Config, hubFleet versioned.Interface,
	settings registration.AgentSettings, verifier *signing.Verifier, log logrus.FieldLogger) (*deployer.Deployer, error) {
	factory, err := fleetcontrollers.NewFactoryFromConfigWithOptions(hubConfig, &fleetcontrollers.FactoryOptions{Namespace: cred.DeploymentNamespace})
	if err != nil {
		return nil, err
	}
	dep := &deployer.Deployer{
		Deployments:     factory.Fleet().V1alpha1().BundleDeployment(),
		Hub:             hubFleet,
		Downstream:      cfg.DownstreamConfig,
		DownstreamKube:  cfg.Downstream,
		AgentNamespace:  cfg.Namespace,
		MonitorInterval: settings.MonitorInterval,
		MaxContentSize:  settings.MaxBundleSize,
		ClusterName:     cred.ClusterName,
		HubURL:          cred.APIServerURL,
		Log:             log,
		Verifier:        verifier,
	}
	dep.Register(ctx)
	// In the background: lasso's start-up health check retries until the hub answers
	// and does not give up when ctx ends, so it must not hold up the session's end.
	go func() {
		if ctx.Err() != nil {
			return
		}
		if err := factory.Start(ctx, 4); err != nil {
			if ctx.Err() == nil {
				log.WithError(err).Error("Cannot watch the cluster's BundleDeployments")
			}
			return
		}
		if !cache.WaitForCacheSync(ctx.Done(), factory.Fleet().V1alpha1().BundleDeployment().Informer().HasSynced) {
			return
		}
		if err := dep.Cleanup(); err != nil {
			log.WithError(err).Warn("Cannot remove releases of deleted BundleDeployments")
		}
	}()
	return dep, nil
}

// watchBootstrap signals each time the bootstrap Secret is created, or its values
// change (helm upgrade of a Secret the hub refused, which the agent keeps).
func watchBootstrap(ctx context.Context, client kubernetes.Interface, namespace string) <-chan struct{} {
	added := make(chan struct{}, 1)
	signal := func() {
		select {
		case added <- struct{}{}:
		default:
		}
	}
	factory := informers.NewSharedInformerFactoryWithOptions(client, 10*time.Minute,
		informers.WithNamespace(namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", names.AgentBootstrapSecret).String()
		}))
	informer := factory.Core().V1().Secrets().Informer()
	_, _ = informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj interface{}) {
			// Secrets listed at start-up are handled by obtainIdentity itself.
			if _, ok := obj.(*corev1.Secret); ok && informer.HasSynced() {
				signal()
			}
		},
		UpdateFunc: func(oldObj, newObj interface{}) {
			before, ok1 := oldObj.(*corev1.Secret)
			after, ok2 := newObj.(*corev1.Secret)
			if ok1 && ok2 && !reflect.DeepEqual(before.Data, after.Data) {
				signal()
			}
		},
	})
	factory.Start(ctx.Done())
	return added
}
