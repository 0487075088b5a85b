package controlplane

import (
	"context"
	"fmt"
	"strings"

	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/serviceaccount"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/client-go/kubernetes"
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
type identityAuthorizer struct {
	agent, contents, recovery []rbacv1.PolicyRule
	// rbac decides a credential watch as the get it amounts to.
	rbac authorizer.Authorizer
}

func newIdentityAuthorizer(rbac authorizer.Authorizer) (*identityAuthorizer, error) {
	roles, err := registration.ClusterRoles()
	if err != nil {
		return nil, err
	}
	a := &identityAuthorizer{rbac: rbac}
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
	if isCredentialWatch(attrs) {
		get := authorizer.AttributesRecord{
			User: attrs.GetUser(), Verb: "get", Namespace: attrs.GetNamespace(), APIGroup: attrs.GetAPIGroup(),
			APIVersion: attrs.GetAPIVersion(), Resource: attrs.GetResource(), Name: attrs.GetName(), ResourceRequest: true,
		}
		decision, reason, err := a.rbac.Authorize(ctx, get)
		if decision != authorizer.DecisionAllow {
			return authorizer.DecisionNoOpinion, "", err
		}
		return authorizer.DecisionAllow, "a watch of one credential Secret, as its get: " + reason, nil
	}
	namespace, name, err := serviceaccount.SplitUsername(attrs.GetUser().GetName())
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
	allowed := false
	switch attrs.GetNamespace() {
	case namespace:
		allowed = rbac.RulesAllow(attrs, a.agent...)
	case "":
		allowed = rbac.RulesAllow(attrs, a.contents...)
	default:
		// Its own Cluster in its workspace: the Cluster whose per-cluster namespace
		// the identity lives in.
		cluster := attrs.GetName()
		allowed = cluster != "" && names.IsClusterNamespaceOf(namespace, attrs.GetNamespace(), cluster) &&
			rbac.RulesAllow(attrs, registration.ClusterStatusRules(cluster)...)
	}
	if !allowed {
		return authorizer.DecisionNoOpinion, "", nil
	}
	return authorizer.DecisionAllow, IdentityAuthorizerReason + " of namespace " + namespace, nil
}

// isCredentialWatch says whether attrs watch or list one Secret, by name, in the
// registration namespace.
func isCredentialWatch(attrs authorizer.Attributes) bool {
	return (attrs.GetVerb() == "watch" || attrs.GetVerb() == "list") && attrs.GetName() != "" &&
		attrs.GetNamespace() == names.RegistrationNamespace && attrs.GetAPIGroup() == "" &&
		attrs.GetResource() == "secrets" && attrs.GetSubresource() == ""
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
