package controlplane

import (
	"context"
	"fmt"
	"slices"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
	corelisters "k8s.io/client-go/listers/core/v1"
	"k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac"

	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// IdentityAuthorizerReason starts the reason the identity authorizer gives when it
// allows a request; the hub looks for it to learn that its API server authorizes
// cluster identities without RBAC objects.
const IdentityAuthorizerReason = "flotilla cluster identity"

// identityAuthorizer allows a cluster identity (ServiceAccount
// names.AgentIdentityServiceAccount in a per-cluster namespace) exactly what the RBAC
// the hub would otherwise create for it allows (registration.ClusterIdentity), from
// the request alone: in its own namespace what the flotilla-agent ClusterRole allows;
// Contents by name; in a workspace, its own Cluster, the one whose per-cluster
// namespace is the identity's. It keeps no state, so it is never behind the hub, and it
// costs every request the same however many clusters there are, where one RoleBinding,
// Role, RoleBinding and ClusterRoleBinding per cluster would cost four writes per
// registration and a ClusterRoleBinding to scan for every request. Like the Node
// authorizer for kubelets, it trusts the namespace of a ServiceAccount it names: only
// the hub creates ServiceAccounts in per-cluster namespaces. It has no opinion on
// anything else, which RBAC then decides.
//
// It also lets anyone watch (or list) one Secret of the registration namespace, named
// by a field selector, if RBAC lets them get it: so a waiting agent watches for its
// credential, one request answered the moment the hub grants, instead of polling.
// A watch of the named Secret tells no more than a get of it.
//
// A cluster identity may also be an x509 client certificate the hub signed for the
// agent's key (names.ClusterUser, names.ClusterRecoveryUser, with the key's
// fingerprint in names.AgentKeyGroup). Such a certificate is honoured only while its
// per-cluster namespace exists, is not being deleted, and names that key
// (names.AgentKeyAnnotation): deleting the Cluster (and so its namespace), binding
// it to another key, or removing the annotation revokes every certificate the hub
// signed for it, at once, although each lasts until it expires.
type identityAuthorizer struct {
	agent, contents, recovery []rbacv1.PolicyRule
	// certAgent are the agent rules for a certificate identity, which has no
	// ServiceAccount and so mints no tokens.
	certAgent []rbacv1.PolicyRule
	// rbac decides a named watch as the get it amounts to.
	rbac authorizer.Authorizer
	// namespaces are the API server's own cache of namespaces.
	namespaces corelisters.NamespaceLister
}

func newIdentityAuthorizer(rbac authorizer.Authorizer, namespaces corelisters.NamespaceLister) (*identityAuthorizer, error) {
	roles, err := registration.ClusterRoles()
	if err != nil {
		return nil, err
	}
	a := &identityAuthorizer{rbac: rbac, namespaces: namespaces}
	for _, role := range roles {
		switch role.Name {
		case names.AgentClusterRole:
			a.agent = role.Rules
		case names.AgentContentsClusterRole:
			a.contents = role.Rules
		case names.AgentRecoveryClusterRole:
			a.recovery = role.Rules
		}
	}
	for _, rule := range a.agent {
		if !slices.Contains(rule.Resources, "serviceaccounts") && !slices.Contains(rule.Resources, "serviceaccounts/token") {
			a.certAgent = append(a.certAgent, rule)
		}
	}
	if a.agent == nil || a.contents == nil || a.recovery == nil {
		return nil, fmt.Errorf("the ClusterRoles %s, %s and %s are missing from the registration manifests",
			names.AgentClusterRole, names.AgentContentsClusterRole, names.AgentRecoveryClusterRole)
	}
	return a, nil
}

// Authorize implements authorizer.Authorizer.
func (a *identityAuthorizer) Authorize(ctx context.Context, attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if attrs.GetUser() == nil || !attrs.IsResourceRequest() {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if isNamedWatch(attrs) {
		get := authorizer.AttributesRecord{
			User: attrs.GetUser(), Verb: "get", Namespace: attrs.GetNamespace(), APIGroup: attrs.GetAPIGroup(),
			APIVersion: attrs.GetAPIVersion(), Resource: attrs.GetResource(), Name: attrs.GetName(), ResourceRequest: true,
		}
		decision, reason, err := a.authorizeIdentity(get)
		if decision != authorizer.DecisionAllow {
			decision, reason, err = a.rbac.Authorize(ctx, get)
		}
		if decision != authorizer.DecisionAllow {
			return authorizer.DecisionNoOpinion, "", err
		}
		return authorizer.DecisionAllow, "a watch of one " + attrs.GetResource() + " object, as its get: " + reason, nil
	}
	return a.authorizeIdentity(attrs)
}

// authorizeIdentity decides what a cluster identity may do.
func (a *identityAuthorizer) authorizeIdentity(attrs authorizer.Attributes) (authorizer.Decision, string, error) {
	if namespace, recovery, ok := names.ClusterUserOf(attrs.GetUser().GetName()); ok {
		return a.authorizeCertificate(attrs, namespace, recovery)
	}
	namespace, name, err := serviceaccount.SplitUsername(attrs.GetUser().GetName())
	if err == nil && readsOwnToken(attrs, namespace, name) {
		return authorizer.DecisionAllow, "a registration token reads its own ClusterRegistrationToken", nil
	}
	if err != nil || !names.IsClusterNamespace(namespace) {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if name == names.AgentRecoveryServiceAccount {
		// A recovery ServiceAccount: its own per-cluster namespace only.
		if attrs.GetNamespace() != namespace || !rbac.RulesAllow(attrs, a.recovery...) {
			return authorizer.DecisionNoOpinion, "", nil
		}
		return authorizer.DecisionAllow, IdentityAuthorizerReason + " (recovery) of namespace " + namespace, nil
	}
	if name != names.AgentIdentityServiceAccount {
		return authorizer.DecisionNoOpinion, "", nil
	}
	if !a.allowsAgent(attrs, namespace, a.agent) {
		return authorizer.DecisionNoOpinion, "", nil
	}
	return authorizer.DecisionAllow, IdentityAuthorizerReason + " of namespace " + namespace, nil
}

// allowsAgent says whether the cluster identity of namespace may do attrs, with
// agent the rules of its own namespace.
func (a *identityAuthorizer) allowsAgent(attrs authorizer.Attributes, namespace string, agent []rbacv1.PolicyRule) bool {
	switch attrs.GetNamespace() {
	case namespace:
		return rbac.RulesAllow(attrs, agent...)
	case "":
		return rbac.RulesAllow(attrs, a.contents...)
	default:
		// Its own Cluster in its workspace: the Cluster whose per-cluster namespace
		// the identity lives in.
		cluster := attrs.GetName()
		return cluster != "" && names.IsClusterNamespaceOf(namespace, attrs.GetNamespace(), cluster) &&
			rbac.RulesAllow(attrs, registration.ClusterStatusRules(cluster)...)
	}
}

// authorizeCertificate decides for a certificate identity of the cluster whose
// per-cluster namespace is namespace: what its ServiceAccount would be allowed, while
// that namespace stands and names the key the certificate was signed for.
func (a *identityAuthorizer) authorizeCertificate(attrs authorizer.Attributes, namespace string, recovery bool) (authorizer.Decision, string, error) {
	if why := a.revoked(namespace, names.AgentKeyOf(attrs.GetUser().GetGroups())); why != "" {
		return authorizer.DecisionNoOpinion, why, nil
	}
	if recovery {
		if attrs.GetNamespace() != namespace || !rbac.RulesAllow(attrs, a.recovery...) {
			return authorizer.DecisionNoOpinion, "", nil
		}
		return authorizer.DecisionAllow, IdentityAuthorizerReason + " (recovery certificate) of namespace " + namespace, nil
	}
	if !a.allowsAgent(attrs, namespace, a.certAgent) {
		return authorizer.DecisionNoOpinion, "", nil
	}
	return authorizer.DecisionAllow, IdentityAuthorizerReason + " (certificate) of namespace " + namespace, nil
}

// revoked says why the certificates for key of the cluster of namespace no longer
// count, or "" while they do.
func (a *identityAuthorizer) revoked(namespace, key string) string {
	ns, err := a.namespaces.Get(namespace)
	switch {
	case err != nil:
		return "the cluster's namespace " + namespace + " does not exist (its Cluster was deleted)"
	case ns.DeletionTimestamp != nil:
		return "the cluster's namespace " + namespace + " is being deleted"
	case key == "" || ns.Annotations[names.AgentKeyAnnotation] != key:
		return "the certificate's key is not the one namespace " + namespace + " names (the Cluster was bound to another key, or its identity revoked)"
	}
	return ""
}

// readsOwnToken says whether attrs get, by ServiceAccount serviceAccount of
// namespace, the ClusterRegistrationToken whose ServiceAccount it is: so an agent's
// preflight can tell an expired or used-up token before registering. The token's
// values stay in its Secret, which this does not open.
func readsOwnToken(attrs authorizer.Attributes, namespace, serviceAccount string) bool {
	return attrs.GetVerb() == "get" && attrs.GetAPIGroup() == "fleet.cattle.io" && attrs.GetResource() == "clusterregistrationtokens" &&
		attrs.GetSubresource() == "" && attrs.GetNamespace() == namespace && attrs.GetName() != "" &&
		names.TokenServiceAccount(attrs.GetName()) == serviceAccount
}

// isNamedWatch says whether attrs watch or list, by name, one Secret of the
// registration namespace or one ClusterRegistrationRequest: what an agent waiting
// for its answer watches.
func isNamedWatch(attrs authorizer.Attributes) bool {
	if (attrs.GetVerb() != "watch" && attrs.GetVerb() != "list") || attrs.GetName() == "" || attrs.GetSubresource() != "" {
		return false
	}
	secret := attrs.GetNamespace() == names.RegistrationNamespace && attrs.GetAPIGroup() == "" && attrs.GetResource() == "secrets"
	request := attrs.GetNamespace() != "" && attrs.GetAPIGroup() == "fleet.cattle.io" && attrs.GetResource() == "clusterregistrationrequests"
	return secret || request
}

// AuthorizesClusterIdentities asks the API server, with a SubjectAccessReview,
// whether it authorizes cluster identities itself: whether a cluster identity that no
// RBAC object names may list the BundleDeployments of its namespace, allowed by the
// identity authorizer. It is so on Flotilla's own control planes; on any other
// cluster the hub creates RBAC objects for each identity.
func AuthorizesClusterIdentities(ctx context.Context, kube kubernetes.Interface) (bool, error) {
	namespace := names.ClusterNamespace("flotilla-probe", "probe")
	review, err := kube.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{
		Spec: authorizationv1.SubjectAccessReviewSpec{
			User:   serviceaccount.MakeUsername(namespace, names.AgentIdentityServiceAccount),
			Groups: append(serviceaccount.MakeGroupNames(namespace), user.AllAuthenticated),
			ResourceAttributes: &authorizationv1.ResourceAttributes{
				Namespace: namespace, Verb: "list", Group: "fleet.cattle.io", Resource: "bundledeployments",
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("asking the API server how it authorizes cluster identities: %w", err)
	}
	return review.Status.Allowed && strings.HasPrefix(review.Status.Reason, IdentityAuthorizerReason), nil
}
