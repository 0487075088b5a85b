package registration

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
)

// Downstream is where an agent keeps its configuration and identity: its namespace
// in the downstream cluster.
type Downstream struct {
	Client    kubernetes.Interface
	Namespace string
	// HubProxy is how the agent reaches the hub; the zero value means through
	// the environment's proxy, if any.
	HubProxy HubProxy
}

// AgentSettings are read from the downstream fleet-agent ConfigMap.
type AgentSettings struct {
	// ClientID, when empty, defaults to the UID of the kube-system namespace.
	ClientID string
	// Labels are asked for on a Cluster the hub creates.
	Labels map[string]string
	// CheckinInterval is how often the agent reports to the hub.
	CheckinInterval time.Duration
	// MonitorInterval is how often deployed bundles are checked for readiness and drift.
	MonitorInterval time.Duration
	// MaxBundleSize bounds what a Bundle's resources decode to; 0 means the default.
	MaxBundleSize int64
}

// ConfigMap keys of the downstream fleet-agent ConfigMap.
const (
	cmClientID        = "clientID"
	cmLabels          = "labels"
	cmCheckinInterval = "checkinInterval"
	cmMonitorInterval = "monitorInterval"
	cmMaxBundleSize   = "maxBundleSize"
)

// DefaultMonitorInterval is how often deployed bundles are checked when not told otherwise.
const DefaultMonitorInterval = 30 * time.Second

// DefaultCheckinInterval is how often an agent reports when not told otherwise.
const DefaultCheckinInterval = 30 * time.Second

// Settings reads the fleet-agent ConfigMap; a missing ConfigMap means defaults.
func (d Downstream) Settings(ctx context.Context) (AgentSettings, error) {
	s := AgentSettings{CheckinInterval: DefaultCheckinInterval, MonitorInterval: DefaultMonitorInterval}
	cm, err := d.Client.CoreV1().ConfigMaps(d.Namespace).Get(ctx, names.AgentConfigMap, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return s, nil
	}
	if err != nil {
		return s, fmt.Errorf("reading ConfigMap %s/%s: %w", d.Namespace, names.AgentConfigMap, err)
	}
	s.ClientID = cm.Data[cmClientID]
	if raw := cm.Data[cmLabels]; raw != "" && raw != "null" {
		if err := json.Unmarshal([]byte(raw), &s.Labels); err != nil {
			return s, fmt.Errorf("ConfigMap %s/%s: labels is not a JSON object: %w", d.Namespace, names.AgentConfigMap, err)
		}
	}
	for key, into := range map[string]*time.Duration{cmCheckinInterval: &s.CheckinInterval, cmMonitorInterval: &s.MonitorInterval} {
		raw := cm.Data[key]
		if raw == "" {
			continue
		}
		interval, err := time.ParseDuration(raw)
		if err != nil || interval <= 0 {
			return s, fmt.Errorf("ConfigMap %s/%s: %s %q is not a positive duration", d.Namespace, names.AgentConfigMap, key, raw)
		}
		*into = interval
	}
	if raw := cm.Data[cmMaxBundleSize]; raw != "" {
		size, err := strconv.ParseInt(raw, 10, 64)
		if err != nil || size < 0 {
			return s, fmt.Errorf("ConfigMap %s/%s: %s %q is not a number of bytes", d.Namespace, names.AgentConfigMap, cmMaxBundleSize, raw)
		}
		s.MaxBundleSize = size
	}
	return s, nil
}

// ClientID is the configured clientID, or the UID of the downstream kube-system
// namespace, which is stable for the life of the cluster.
func (d Downstream) ClientID(ctx context.Context, settings AgentSettings) (string, error) {
	if settings.ClientID != "" {
		return settings.ClientID, nil
	}
	ns, err := d.Client.CoreV1().Namespaces().Get(ctx, "kube-system", metav1.GetOptions{})
	if err != nil {
		return "", fmt.Errorf("reading the kube-system namespace for the default clientID: %w", err)
	}
	return string(ns.UID), nil
}

// Bootstrap returns the registration values of the fleet-agent-bootstrap Secret, or
// nil if there is none.
func (d Downstream) Bootstrap(ctx context.Context) (*Values, error) {
	secret, err := d.Client.CoreV1().Secrets(d.Namespace).Get(ctx, names.AgentBootstrapSecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", d.Namespace, names.AgentBootstrapSecret, err)
	}
	values := ValuesFromSecretData(secret.Data)
	return &values, nil
}

// Identity returns the credential stored in the fleet-agent Secret, or nil if there
// is none.
func (d Downstream) Identity(ctx context.Context) (*Credential, error) {
	secret, err := d.Client.CoreV1().Secrets(d.Namespace).Get(ctx, names.AgentIdentitySecret, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading Secret %s/%s: %w", d.Namespace, names.AgentIdentitySecret, err)
	}
	if isFleetIdentity(secret.Data) {
		// Left by Fleet's agent, which this agent replaced.
		cred, err := credentialFromFleetIdentity(secret.Data)
		if err != nil {
			return nil, fmt.Errorf("Secret %s/%s: %w", d.Namespace, names.AgentIdentitySecret, err)
		}
		return &cred, nil
	}
	if len(secret.Data[credToken]) == 0 && len(secret.Data[credCertificate]) == 0 {
		// Only the agent's key, kept from a registration that has not finished.
		return nil, nil
	}
	cred, err := CredentialFromSecretData(secret.Data)
	if err != nil {
		return nil, fmt.Errorf("Secret %s/%s: %w", d.Namespace, names.AgentIdentitySecret, err)
	}
	return &cred, nil
}

// agentKeyField is the key of the identity Secret that holds the agent's private key.
const agentKeyField = "agentKey"

// Key returns the agent's key from its identity Secret, making and storing one
// first if there is none. It is stored before any request is sent with it, so a
// registration cut short is retried with the key the hub may already have recorded.
func (d Downstream) Key(ctx context.Context) (AgentKey, error) {
	secrets := d.Client.CoreV1().Secrets(d.Namespace)
	for attempt := 0; ; attempt++ {
		secret, err := secrets.Get(ctx, names.AgentIdentitySecret, metav1.GetOptions{})
		found := err == nil
		if err != nil && !apierrors.IsNotFound(err) {
			return AgentKey{}, fmt.Errorf("reading Secret %s/%s: %w", d.Namespace, names.AgentIdentitySecret, err)
		}
		if found && len(secret.Data[agentKeyField]) > 0 {
			key, err := ParseAgentKey(secret.Data[agentKeyField])
			if err != nil {
				return AgentKey{}, fmt.Errorf("Secret %s/%s: %w; delete the Secret to make a new key, then allow the cluster to register again on the hub (docs/registration.md)",
					d.Namespace, names.AgentIdentitySecret, err)
			}
			return key, nil
		}
		key, err := NewAgentKey()
		if err != nil {
			return AgentKey{}, err
		}
		if !found {
			_, err = secrets.Create(ctx, &corev1.Secret{
				ObjectMeta: metav1.ObjectMeta{Name: names.AgentIdentitySecret, Namespace: d.Namespace},
				Type:       names.IdentitySecretType,
				Data:       map[string][]byte{agentKeyField: key.PEM()},
			}, metav1.CreateOptions{})
		} else {
			if secret.Data == nil {
				secret.Data = map[string][]byte{}
			}
			secret.Data[agentKeyField] = key.PEM()
			// With the read resourceVersion: two agents at once keep one key.
			_, err = secrets.Update(ctx, secret, metav1.UpdateOptions{})
		}
		switch {
		case err == nil:
			return key, nil
		case (apierrors.IsAlreadyExists(err) || apierrors.IsConflict(err)) && attempt < 3:
			continue
		default:
			return AgentKey{}, fmt.Errorf("storing the agent key in Secret %s/%s: %w", d.Namespace, names.AgentIdentitySecret, err)
		}
	}
}

// StoreIdentity writes cred to the fleet-agent Secret, creating or replacing it, and
// keeps the agent's key there.
func (d Downstream) StoreIdentity(ctx context.Context, cred Credential) error {
	secrets := d.Client.CoreV1().Secrets(d.Namespace)
	desired := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: names.AgentIdentitySecret, Namespace: d.Namespace},
		Type:       names.IdentitySecretType,
		Data:       cred.SecretData(),
	}
	existing, err := secrets.Get(ctx, names.AgentIdentitySecret, metav1.GetOptions{})
	if err == nil && len(existing.Data[agentKeyField]) > 0 {
		desired.Data[agentKeyField] = existing.Data[agentKeyField]
	}
	switch {
	case apierrors.IsNotFound(err):
		_, err = secrets.Create(ctx, desired, metav1.CreateOptions{})
	case err == nil && existing.Type != desired.Type && len(existing.Data[agentKeyField]) == 0:
		// A Secret's type cannot change: replace one left by something else. One that
		// holds the agent's key (Fleet's agent's, once this agent put its key there) is
		// updated in place, so that the key is never out of the cluster.
		if err = secrets.Delete(ctx, existing.Name, metav1.DeleteOptions{}); err == nil {
			_, err = secrets.Create(ctx, desired, metav1.CreateOptions{})
		}
	case err == nil:
		existing.Data = desired.Data
		_, err = secrets.Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("storing the identity in Secret %s/%s: %w", d.Namespace, names.AgentIdentitySecret, err)
	}
	return nil
}

// Register registers the downstream cluster with the hub using values and returns
// the granted credential, already stored in the fleet-agent Secret, with the bootstrap
// Secret deleted. It makes one attempt: the caller retries with backoff.
func Register(ctx context.Context, d Downstream, values Values, log logrus.FieldLogger) (*Credential, error) {
	if err := values.Validate(); err != nil {
		return nil, fmt.Errorf("Secret %s/%s: %w", d.Namespace, names.AgentBootstrapSecret, err)
	}
	// The chart creates the ConfigMap right after the bootstrap Secret; registering
	// before it is there would use the wrong clientID and labels.
	if _, err := d.Client.CoreV1().ConfigMaps(d.Namespace).Get(ctx, names.AgentConfigMap, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s, which the fleet-agent chart creates with the bootstrap Secret: %w", d.Namespace, names.AgentConfigMap, err)
	}
	settings, err := d.Settings(ctx)
	if err != nil {
		return nil, err
	}
	clientID, err := d.ClientID(ctx, settings)
	if err != nil {
		return nil, err
	}
	hub, err := d.tokenExchange(values.APIServerURL, values.APIServerCA, values.Token, values.SystemRegistrationNamespace)
	if err != nil {
		return nil, err
	}
	caPEM, err := DecodeCA(values.APIServerCA)
	if err != nil {
		return nil, err
	}
	key, err := d.Key(ctx)
	if err != nil {
		return nil, err
	}
	request, opener, err := NewRequest(values.ClusterNamespace, values.TokenName, clientID, settings.Labels, key)
	if err != nil {
		return nil, err
	}
	created, err := hub.fleet.FleetV1alpha1().ClusterRegistrationRequests(values.ClusterNamespace).Create(ctx, request, metav1.CreateOptions{})
	if apierrors.IsUnauthorized(err) {
		return nil, fmt.Errorf("the hub at %s refused registration token %q (401 Unauthorized): the ClusterRegistrationToken has expired or been deleted; "+
			"create a new token in namespace %s and install the chart again with its values.yaml", values.APIServerURL, values.TokenName, values.ClusterNamespace)
	}
	if err != nil {
		return nil, Explain(fmt.Sprintf("creating a ClusterRegistrationRequest in namespace %s with token %q", values.ClusterNamespace, values.TokenName), values.APIServerURL, err)
	}
	log = log.WithFields(logrus.Fields{"request": values.ClusterNamespace + "/" + created.Name, "clientID": clientID})
	log.Info("Sent the registration request; waiting for the hub to grant it")

	cred, err := hub.answer(ctx, request, opener, key, Credential{APIServerURL: values.APIServerURL, APIServerCA: caPEM, ClusterNamespace: values.ClusterNamespace, ClientID: clientID}, log)
	if err != nil {
		return nil, err
	}
	cred.ClientID = clientID
	if err := d.StoreIdentity(ctx, cred); err != nil {
		return nil, err
	}
	// The registration token is forgotten once the identity is stored.
	err = d.Client.CoreV1().Secrets(d.Namespace).Delete(ctx, names.AgentBootstrapSecret, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("deleting the bootstrap Secret %s/%s: %w", d.Namespace, names.AgentBootstrapSecret, err)
	}
	hub.pickedUp(ctx, request, cred, log)
	log.WithField("cluster", cred.ClusterNamespace+"/"+cred.ClusterName).Info("Registered")
	return &cred, nil
}

// answer is what the hub left for a request under its credential Secret's name: the
// credential, sealed to the request's one-time key, or why it refused the request.
type answer struct {
	sealed  []byte
	refusal *RefusedError
}

// RefusedError is the hub's refusal of a registration request, with the reason and
// what a person can do about it.
type RefusedError struct{ Reason, Message string }

func (e *RefusedError) Error() string {
	return fmt.Sprintf("the hub refused the registration (%s): %s", e.Reason, e.Message)
}

// Keys of the Secret the hub answers a request with.
const (
	// AnswerSealed holds the credential, sealed to the request's encryption key.
	AnswerSealed = "sealed"
	// AnswerRefusedReason and AnswerRefusedMessage say why a request was refused.
	AnswerRefusedReason  = "refusedReason"
	AnswerRefusedMessage = "refusedMessage"
)

// NewRequest is a request from the cluster with clientID to register into workspace
// with token, asking for clusterLabels, signed with key, and the one-time key that
// opens the answer. A recovery request names no token and is made in the cluster's
// per-cluster namespace.
func NewRequest(workspace, token, clientID string, clusterLabels map[string]string, key AgentKey) (*fleet.ClusterRegistrationRequest, *Opener, error) {
	opener, err := NewOpener()
	if err != nil {
		return nil, nil, err
	}
	clientRandom, err := randomString()
	if err != nil {
		return nil, nil, err
	}
	var labels map[string]string
	if token != "" {
		labels = map[string]string{names.RegistrationTokenLabel: token}
	}
	request := &fleet.ClusterRegistrationRequest{
		ObjectMeta: metav1.ObjectMeta{
			Name:      names.RegistrationRequest(clientID, clientRandom),
			Namespace: workspace,
			Labels:    labels,
		},
		Spec: fleet.ClusterRegistrationRequestSpec{
			ClientID: clientID, ClientRandom: clientRandom, ClusterLabels: clusterLabels,
			EncryptionKey: opener.PublicKey(), SignedAt: ptr.To(metav1.NewMicroTime(time.Now())),
		},
	}
	if err := key.Sign(request); err != nil {
		return nil, nil, err
	}
	return request, opener, nil
}

// OpenAnswer reads the hub's answer to the request of clientID and clientRandom from
// its Secret's data: the credential, opened with opener, or a *RefusedError.
func OpenAnswer(data map[string][]byte, opener *Opener, clientID, clientRandom string) (Credential, error) {
	a, err := answerFromSecretData(data)
	if err != nil {
		return Credential{}, err
	}
	return a.open(opener, clientID, clientRandom)
}

func (a *answer) open(opener *Opener, clientID, clientRandom string) (Credential, error) {
	if a.refusal != nil {
		return Credential{}, a.refusal
	}
	return opener.Open(clientID, clientRandom, a.sealed)
}

// exchange is an agent's conversation with the hub about one request: clients that
// authenticate with a registration token or as the cluster (its identity or recovery
// certificate, or its recovery token), and the namespace where the hub leaves a
// sealed token credential, on hubs that hand out tokens.
type exchange struct {
	fleet     versioned.Interface
	kube      kubernetes.Interface
	url       string
	answersIn string
}

func newExchange(cfg *rest.Config, answersIn string) (*exchange, error) {
	fleetClient, err := versioned.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &exchange{fleet: fleetClient, kube: kube, url: cfg.Host, answersIn: answersIn}, nil
}

// tokenExchange is an exchange authenticating with token.
func (d Downstream) tokenExchange(url, ca, token, answersIn string) (*exchange, error) {
	cfg, err := d.hubConfig(url, ca, token)
	if err != nil {
		return nil, err
	}
	return newExchange(cfg, answersIn)
}

// answer waits for the hub's answer to request, which was created in the namespace
// of base's Cluster (its workspace, or its per-cluster namespace), and returns the
// credential it grants, filled in from base: certificates for key in the request's
// status, or a token credential sealed to opener's key in a Secret. A refusal is a
// *RefusedError.
func (x *exchange) answer(ctx context.Context, request *fleet.ClusterRegistrationRequest, opener *Opener, key AgentKey, base Credential, log logrus.FieldLogger) (Credential, error) {
	answered, err := waitForAnswer(ctx, x.fleet, x.url, request, log)
	if err != nil {
		return Credential{}, err
	}
	if c := Refusal(answered); c != nil {
		return Credential{}, c
	}
	if identity := answered.Status.Identity; identity != nil {
		cred, err := CredentialFromIdentity(identity, key, base)
		if err != nil {
			return Credential{}, fmt.Errorf("ClusterRegistrationRequest %s/%s from the hub: %w", request.Namespace, request.Name, err)
		}
		cred.ClusterName = answered.Status.ClusterName
		return cred, nil
	}
	// A hub that hands out tokens: the credential is sealed in a Secret.
	name := names.CredentialSecret(request.Spec.ClientID, request.Spec.ClientRandom)
	secret, err := x.kube.CoreV1().Secrets(x.answersIn).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return Credential{}, Explain("reading the credential the hub granted", x.url, err)
	}
	cred, err := OpenAnswer(secret.Data, opener, request.Spec.ClientID, request.Spec.ClientRandom)
	if err != nil {
		return Credential{}, fmt.Errorf("Secret %s/%s from the hub: %w", x.answersIn, name, err)
	}
	return cred, nil
}

// CredentialFromIdentity is the credential of identity's certificates, which must be
// for key, with the hub's address and the Cluster's names from base.
func CredentialFromIdentity(identity *fleet.ClusterIdentity, key AgentKey, base Credential) (Credential, error) {
	_, cert, err := certificateFor([]byte(identity.Certificate), key)
	if err != nil {
		return Credential{}, fmt.Errorf("status.identity.certificate: %w", err)
	}
	cred := Credential{
		Certificate:         []byte(identity.Certificate),
		Issued:              cert.NotBefore.Add(certBackdate),
		Expires:             cert.NotAfter,
		APIServerURL:        base.APIServerURL,
		APIServerCA:         base.APIServerCA,
		ClusterName:         base.ClusterName,
		ClusterNamespace:    base.ClusterNamespace,
		DeploymentNamespace: identity.DeploymentNamespace,
		ClientID:            base.ClientID,
	}
	if identity.RenewAfter != nil {
		cred.RenewAfter = identity.RenewAfter.Duration
	}
	if identity.RecoveryCertificate != "" {
		_, recovery, err := certificateFor([]byte(identity.RecoveryCertificate), key)
		if err != nil {
			return Credential{}, fmt.Errorf("status.identity.recoveryCertificate: %w", err)
		}
		cred.RecoveryCertificate = []byte(identity.RecoveryCertificate)
		cred.RecoveryExpires = recovery.NotAfter
	}
	return cred, nil
}

// Refusal is the hub's refusal of req, from its Ready condition, or nil.
func Refusal(req *fleet.ClusterRegistrationRequest) *RefusedError {
	if c := conditions.Get(req.Status.Conditions, fleet.ConditionReady); c != nil && c.Status == corev1.ConditionFalse && c.Reason != "" {
		return &RefusedError{Reason: c.Reason, Message: c.Message}
	}
	return nil
}

// ReasonAwaitingApproval is the reason of the Ready condition (Unknown) of a request
// the hub holds until a hub admin approves or refuses it.
const ReasonAwaitingApproval = "AwaitingApproval"

// AwaitingApproval says whether the hub holds req for a hub admin's approval.
func AwaitingApproval(req *fleet.ClusterRegistrationRequest) bool {
	c := conditions.Get(req.Status.Conditions, fleet.ConditionReady)
	return c != nil && c.Status == corev1.ConditionUnknown && c.Reason == ReasonAwaitingApproval
}

// answered says whether the hub has answered req.
func answered(req *fleet.ClusterRegistrationRequest) bool {
	return req.Status.Granted || Refusal(req) != nil
}

// pickedUp deletes a sealed token credential once it is stored: the hub need not
// keep it (it deletes it later itself otherwise). Certificates leave nothing to
// delete.
func (x *exchange) pickedUp(ctx context.Context, request *fleet.ClusterRegistrationRequest, cred Credential, log logrus.FieldLogger) {
	if cred.HasCertificate() {
		return
	}
	name := names.CredentialSecret(request.Spec.ClientID, request.Spec.ClientRandom)
	err := x.kube.CoreV1().Secrets(x.answersIn).Delete(ctx, name, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		log.WithError(err).Debug("Could not delete the picked-up credential Secret on the hub; the hub deletes it later")
	}
}

func answerFromSecretData(data map[string][]byte) (*answer, error) {
	if reason := string(data[AnswerRefusedReason]); reason != "" {
		return &answer{refusal: &RefusedError{Reason: reason, Message: string(data[AnswerRefusedMessage])}}, nil
	}
	if len(data[AnswerSealed]) == 0 {
		return nil, errors.New("it holds neither a sealed credential nor a refusal")
	}
	return &answer{sealed: data[AnswerSealed]}, nil
}

// waitForAnswer waits for the hub to answer req (granted, or refused in its Ready
// condition) and returns the request as answered. The hub answers at once unless it
// holds the request for a hub admin's approval: it waits at most 5 minutes for an
// answer or the hold, and then as long as the hold lasts, saying once in log what
// the admin must do. It watches the one request where the hub's API server allows
// that (Flotilla's control plane does), and polls it otherwise. The request's name
// is known only to the agent that made it (names.RegistrationRequest).
func waitForAnswer(ctx context.Context, hub versioned.Interface, url string, req *fleet.ClusterRegistrationRequest, log logrus.FieldLogger) (*fleet.ClusterRegistrationRequest, error) {
	w := &answerWait{hub: hub, url: url, namespace: req.Namespace, name: req.Name, log: log}
	for {
		waitCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		a, err := w.watch(waitCtx)
		if errors.Is(err, errWatchRefused) {
			a, err = w.poll(waitCtx)
		}
		timedOut := waitCtx.Err() != nil && ctx.Err() == nil
		cancel()
		switch {
		case err == nil:
			return a, nil
		case timedOut && w.held:
			// An admin has not answered yet; the request is still held.
		case timedOut:
			return nil, fmt.Errorf("the hub did not answer the registration within 5 minutes (last answer: %v); is the hub running its controllers?", w.lastAnswer)
		default:
			return nil, err
		}
	}
}

// errWatchRefused is a watch of the request the API server does not allow.
var errWatchRefused = errors.New("watching the registration request is not allowed")

// watchTimeout bounds each watch below HubConfig's client timeout.
const watchTimeout = 20 * time.Second

// answerWait is an agent waiting for the hub's answer to its request.
type answerWait struct {
	hub             versioned.Interface
	url             string
	namespace, name string
	// lastAnswer is the hub's last answer that was not the answer, for the message
	// when the wait ends without it.
	lastAnswer error
	// held says the hub holds the request for an admin's approval.
	held bool
	log  logrus.FieldLogger
}

// unanswered notes what the hub said of the request so far: the first time it holds
// it for approval, the agent logs what the admin must do.
func (aw *answerWait) unanswered(req *fleet.ClusterRegistrationRequest) {
	if !AwaitingApproval(req) || aw.held {
		return
	}
	aw.held = true
	c := conditions.Get(req.Status.Conditions, fleet.ConditionReady)
	aw.log.WithField("cluster", req.Namespace+"/"+req.Status.ClusterName).Warn("The hub holds the registration until a hub admin approves it: " + c.Message)
}

// watch watches the request by name: one request, answered the moment the hub
// answers, where polling would ask every few seconds.
func (aw *answerWait) watch(ctx context.Context) (*fleet.ClusterRegistrationRequest, error) {
	requests := aw.hub.FleetV1alpha1().ClusterRegistrationRequests(aw.namespace)
	opts := metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", aw.name).String(),
		// From the watch cache: the request as it is now is the first event.
		ResourceVersion: "0",
		TimeoutSeconds:  ptr.To(int64(watchTimeout.Seconds())),
	}
	for {
		started := time.Now()
		w, err := requests.Watch(ctx, opts)
		switch {
		case apierrors.IsForbidden(err):
			aw.lastAnswer = err
			return nil, errWatchRefused
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			return nil, Explain("waiting for the answer to the registration request", aw.url, err)
		}
		for event := range w.ResultChan() {
			req, ok := event.Object.(*fleet.ClusterRegistrationRequest)
			if event.Type == watch.Error || !ok {
				aw.lastAnswer = apierrors.FromObject(event.Object)
				continue
			}
			if event.Type == watch.Deleted && req.Name == aw.name {
				w.Stop()
				return nil, fmt.Errorf("ClusterRegistrationRequest %s/%s was deleted before the hub answered it", aw.namespace, aw.name)
			}
			if req.Name != aw.name {
				continue
			}
			if answered(req) {
				w.Stop()
				return req, nil
			}
			aw.unanswered(req)
		}
		w.Stop()
		if aw.lastAnswer == nil {
			aw.lastAnswer = fmt.Errorf("ClusterRegistrationRequest %s/%s not answered yet", aw.namespace, aw.name)
		}
		// The watch ended (its timeout, or the server closed it): start another, not
		// at once if it ended early.
		pause := time.Duration(0)
		if time.Since(started) < time.Second {
			pause = time.Second
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pause):
		}
	}
}

// poll gets the request until the hub has answered it. The wait starts at 50ms and
// backs off to 2s, so a prompt answer is picked up promptly without a fixed poll.
func (aw *answerWait) poll(ctx context.Context) (*fleet.ClusterRegistrationRequest, error) {
	backoff := wait.Backoff{Duration: 50 * time.Millisecond, Factor: 1.5, Jitter: 0.2, Steps: math.MaxInt32, Cap: 2 * time.Second}
	var got *fleet.ClusterRegistrationRequest
	// DelayFunc keeps returning the cap once reached (Backoff.Step would stop there).
	err := backoff.DelayFunc().Until(ctx, true, false, func(ctx context.Context) (bool, error) {
		// ResourceVersion "0": the API server answers from its watch cache, not etcd;
		// a poll a moment behind costs one more poll, not a quorum read per agent.
		req, err := aw.hub.FleetV1alpha1().ClusterRegistrationRequests(aw.namespace).Get(ctx, aw.name, metav1.GetOptions{ResourceVersion: "0"})
		switch {
		case apierrors.IsForbidden(err):
			aw.lastAnswer = err
			return false, nil
		case apierrors.IsNotFound(err):
			return false, fmt.Errorf("ClusterRegistrationRequest %s/%s was deleted before the hub answered it", aw.namespace, aw.name)
		case err != nil:
			return false, Explain("waiting for the answer to the registration request", aw.url, err)
		}
		if !answered(req) {
			aw.unanswered(req)
			return false, nil
		}
		got = req
		return true, nil
	})
	return got, err
}

// HubConfig is a client configuration for the hub at url, trusting ca (PEM or base64
// of PEM; empty for the system trust store), authenticating with token.
func HubConfig(url, ca, token string) (*rest.Config, error) {
	caPEM, err := DecodeCA(ca)
	if err != nil {
		return nil, err
	}
	return &rest.Config{
		Host:            url,
		BearerToken:     token,
		TLSClientConfig: rest.TLSClientConfig{CAData: caPEM},
		UserAgent:       "flotilla-agent",
		Timeout:         30 * time.Second,
	}, nil
}

// hubConfig is HubConfig through the agent's hub proxy.
func (d Downstream) hubConfig(url, ca, token string) (*rest.Config, error) {
	cfg, err := HubConfig(url, ca, token)
	if err != nil {
		return nil, err
	}
	cfg.Proxy = d.HubProxy.Func()
	return cfg, nil
}

func randomString() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}
