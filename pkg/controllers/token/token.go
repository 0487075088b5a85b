// Package token is the ClusterRegistrationToken controller: for each token a
// ServiceAccount that may only create registration requests in the token's namespace,
// and a Secret named like the token whose "values" key is the fleet-agent chart's
// values.yaml. At expiry the token is deleted, and with it (by owner references) its
// ServiceAccount, which revokes the credential at once.
package token

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/record"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/metrics"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// minTokenLifetime is the shortest token the TokenRequest API issues.
const minTokenLifetime = 10 * time.Minute

// Settings are what tokens hand out.
type Settings struct {
	// APIServerURL and APIServerCA tell agents how to reach the hub.
	APIServerURL string
	APIServerCA  []byte
	// NoTTLLifetime is the credential lifetime of a token without TTL.
	NoTTLLifetime time.Duration
}

type handler struct {
	settings Settings
	tokens   fleetcontrollers.ClusterRegistrationTokenController
	kube     kubernetes.Interface
	events   record.EventRecorder
	now      func() time.Time
}

// Register starts handling ClusterRegistrationTokens.
func Register(ctx context.Context, settings Settings, tokens fleetcontrollers.ClusterRegistrationTokenController, kube kubernetes.Interface, events record.EventRecorder) {
	h := &handler{settings: settings, tokens: tokens, kube: kube, events: events, now: time.Now}
	tokens.OnChange(ctx, "cluster-registration-token", h.onChange)
}

// revoke deletes the ServiceAccount of the deleted token key. Owner references would
// remove it too, but only once the garbage collector gets to it; this revokes the
// credential at once. (A finalizer would do it even with the hub down, but adding one
// rewrites the user's spec; the garbage collector covers that case.)
func (h *handler) revoke(key string) error {
	namespace, name, found := strings.Cut(key, "/")
	if !found {
		return nil
	}
	sa := names.TokenServiceAccount(name)
	err := h.kube.CoreV1().ServiceAccounts(namespace).Delete(context.Background(), sa, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("revoking token %s: deleting ServiceAccount %s: %w", key, sa, err)
	}
	revoked := err == nil
	pickup := names.CredentialPickupBinding(namespace, name)
	err = h.kube.RbacV1().RoleBindings(names.RegistrationNamespace).Delete(context.Background(), pickup, metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("revoking token %s: deleting RoleBinding %s/%s: %w", key, names.RegistrationNamespace, pickup, err)
	}
	if revoked {
		logrus.WithField("token", key).Info("Revoked the registration token")
	}
	return nil
}

// Expiry is when a token created at created with ttl ends; zero for none.
func Expiry(created time.Time, ttl *metav1.Duration) time.Time {
	if ttl == nil || ttl.Duration <= 0 {
		return time.Time{}
	}
	return created.Add(ttl.Duration)
}

// CredentialLifetime is how long the ServiceAccount token handed out lasts: as long as
// the token (users keep values.yaml and reuse it until then), at least what the
// TokenRequest API allows; deleting the token revokes it earlier.
func CredentialLifetime(created, now time.Time, ttl *metav1.Duration, noTTL time.Duration) time.Duration {
	expires := Expiry(created, ttl)
	if expires.IsZero() {
		return noTTL
	}
	if left := expires.Sub(now); left > minTokenLifetime {
		return left.Round(time.Second)
	}
	return minTokenLifetime
}

func (h *handler) onChange(key string, token *fleet.ClusterRegistrationToken) (*fleet.ClusterRegistrationToken, error) {
	if token == nil {
		return nil, h.revoke(key)
	}
	if token.DeletionTimestamp != nil {
		return token, nil
	}
	log := logrus.WithField("token", token.Namespace+"/"+token.Name)
	ctx := context.Background()

	expires := Expiry(token.CreationTimestamp.Time, token.Spec.TTL)
	if !expires.IsZero() && !h.now().Before(expires) {
		// Deleting the token deletes its ServiceAccount (owner reference), which
		// invalidates every credential issued for it.
		err := h.tokens.Delete(token.Namespace, token.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &token.UID}})
		if err != nil && !apierrors.IsNotFound(err) {
			return token, fmt.Errorf("deleting expired token: %w", err)
		}
		h.events.Eventf(token, corev1.EventTypeNormal, "Expired", "Token expired at %s and was deleted; its credential no longer works", expires.UTC().Format(time.RFC3339))
		log.WithField("expired", expires.UTC().Format(time.RFC3339)).Info("Deleted the expired registration token")
		metrics.TokensExpired.Inc()
		return token, nil
	}

	sa, err := h.ensureServiceAccount(ctx, token)
	if err != nil {
		return token, err
	}
	for _, binding := range []*rbacv1.RoleBinding{
		registration.TokenRoleBinding(token.Namespace, sa.Name),
		registration.CredentialPickup(names.RegistrationNamespace, token.Namespace, token.Name),
	} {
		if err := h.ensureRoleBinding(ctx, token, binding); err != nil {
			return token, err
		}
	}
	if err := h.ensureValuesSecret(ctx, token, sa, log); err != nil {
		return token, err
	}

	status := token.Status.DeepCopy()
	status.SecretName = token.Name
	if expires.IsZero() {
		status.Expires = nil
	} else {
		status.Expires = &metav1.Time{Time: expires}
	}
	conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
	if !equality.Semantic.DeepEqual(*status, token.Status) {
		updated := token.DeepCopy()
		updated.Status = *status
		if token, err = h.tokens.UpdateStatus(updated); err != nil {
			return token, err
		}
	}
	if !expires.IsZero() {
		// Come back at expiry; a hub restart in between resyncs and catches up.
		h.tokens.EnqueueAfter(token.Namespace, token.Name, expires.Sub(h.now())+time.Second)
	}
	return token, nil
}

func ownedBy(token *fleet.ClusterRegistrationToken) []metav1.OwnerReference {
	return []metav1.OwnerReference{*metav1.NewControllerRef(token, fleet.SchemeGroupVersion.WithKind("ClusterRegistrationToken"))}
}

func (h *handler) ensureServiceAccount(ctx context.Context, token *fleet.ClusterRegistrationToken) (*corev1.ServiceAccount, error) {
	name := names.TokenServiceAccount(token.Name)
	sas := h.kube.CoreV1().ServiceAccounts(token.Namespace)
	sa, err := sas.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		sa, err = sas.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: token.Namespace, OwnerReferences: ownedBy(token),
			Labels: map[string]string{names.ManagedLabel: "true", names.RegistrationTokenLabel: token.Name},
		}}, metav1.CreateOptions{})
	}
	if err != nil {
		return nil, fmt.Errorf("ServiceAccount %s/%s: %w", token.Namespace, name, err)
	}
	if !metav1.IsControlledBy(sa, token) {
		return nil, fmt.Errorf("ServiceAccount %s/%s exists and does not belong to this token", token.Namespace, name)
	}
	return sa, nil
}

// ensureRoleBinding creates binding unless it exists. A binding in the token's own
// namespace is owned by the token; the one in the registration namespace cannot be
// (owner references do not cross namespaces) and revoke deletes it.
func (h *handler) ensureRoleBinding(ctx context.Context, token *fleet.ClusterRegistrationToken, binding *rbacv1.RoleBinding) error {
	bindings := h.kube.RbacV1().RoleBindings(binding.Namespace)
	// Read before writing: a token is reconciled again at expiry and on resyncs.
	_, err := bindings.Get(ctx, binding.Name, metav1.GetOptions{})
	if err == nil {
		return nil
	}
	if binding.Namespace == token.Namespace {
		binding.OwnerReferences = ownedBy(token)
	}
	if apierrors.IsNotFound(err) {
		_, err = bindings.Create(ctx, binding, metav1.CreateOptions{})
	}
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("RoleBinding %s/%s: %w", binding.Namespace, binding.Name, err)
	}
	return nil
}

// saUIDAnnotation records which ServiceAccount the values Secret's token belongs to,
// so a recreated ServiceAccount (whose UID changed, invalidating old tokens) gets a
// new one.
const saUIDAnnotation = "fleet.cattle.io/service-account-uid"

func (h *handler) ensureValuesSecret(ctx context.Context, token *fleet.ClusterRegistrationToken, sa *corev1.ServiceAccount, log logrus.FieldLogger) error {
	secrets := h.kube.CoreV1().Secrets(token.Namespace)
	existing, err := secrets.Get(ctx, token.Name, metav1.GetOptions{})
	found := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if found {
		if !metav1.IsControlledBy(existing, token) {
			return fmt.Errorf("Secret %s/%s exists and does not belong to this token", token.Namespace, token.Name)
		}
		if existing.Annotations[saUIDAnnotation] == string(sa.UID) {
			return nil
		}
	}

	lifetime := int64(CredentialLifetime(token.CreationTimestamp.Time, h.now(), token.Spec.TTL, h.settings.NoTTLLifetime).Seconds())
	tr, err := h.kube.CoreV1().ServiceAccounts(token.Namespace).CreateToken(ctx, sa.Name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &lifetime},
	}, metav1.CreateOptions{})
	if err != nil {
		return fmt.Errorf("requesting a token for ServiceAccount %s/%s: %w", token.Namespace, sa.Name, err)
	}
	secret, err := ValuesSecret(token, registration.Values{
		Token:                       tr.Status.Token,
		TokenName:                   token.Name,
		APIServerURL:                h.settings.APIServerURL,
		APIServerCA:                 string(h.settings.APIServerCA),
		ClusterNamespace:            token.Namespace,
		SystemRegistrationNamespace: names.RegistrationNamespace,
	})
	if err != nil {
		return err
	}
	secret.Annotations = map[string]string{saUIDAnnotation: string(sa.UID)}
	if !found {
		_, err = secrets.Create(ctx, secret, metav1.CreateOptions{})
	} else {
		existing.Data, existing.Annotations = secret.Data, secret.Annotations
		_, err = secrets.Update(ctx, existing, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s/%s: %w", token.Namespace, token.Name, err)
	}
	log.WithField("secret", token.Name).Info("Wrote the registration values")
	return nil
}

// ValuesSecret is the Secret named like token that holds values as a values.yaml.
func ValuesSecret(token *fleet.ClusterRegistrationToken, values registration.Values) (*corev1.Secret, error) {
	data, err := values.YAML()
	if err != nil {
		return nil, err
	}
	labels := map[string]string{names.ManagedLabel: "true", names.RegistrationTokenLabel: token.Name}
	if cluster := token.Labels[names.ClusterLabel]; cluster != "" {
		// A token minted for one Cluster: its Secret leads back to that Cluster.
		labels[names.ClusterLabel] = cluster
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{
			Name: token.Name, Namespace: token.Namespace, OwnerReferences: ownedBy(token), Labels: labels,
		},
		Type: names.RegistrationValuesSecretType,
		Data: map[string][]byte{registration.ValuesKey: data},
	}, nil
}
