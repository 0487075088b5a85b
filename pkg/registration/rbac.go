package registration

import (
	"bytes"
	_ "embed"
	"errors"
	"fmt"
	"io"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	"github.com/flotilla/flotilla/pkg/names"
)

//go:embed manifests/clusterroles.yaml
var clusterRolesYAML []byte

// ClusterRoles are the shared ClusterRoles of the upstream identities, read from
// manifests/clusterroles.yaml. The hub keeps them in place on every start.
func ClusterRoles() ([]*rbacv1.ClusterRole, error) {
	decoder := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(clusterRolesYAML), 4096)
	var roles []*rbacv1.ClusterRole
	for {
		role := &rbacv1.ClusterRole{}
		if err := decoder.Decode(role); err != nil {
			if errors.Is(err, io.EOF) {
				return roles, nil
			}
			return nil, fmt.Errorf("manifests/clusterroles.yaml: %w", err)
		}
		if role.Name != "" {
			roles = append(roles, role)
		}
	}
}

func managedLabels(extra map[string]string) map[string]string {
	labels := map[string]string{names.ManagedLabel: "true"}
	for k, v := range extra {
		labels[k] = v
	}
	return labels
}

func serviceAccountSubject(namespace, name string) []rbacv1.Subject {
	return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: namespace, Name: name}}
}

func clusterRoleRef(name string) rbacv1.RoleRef {
	return rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}
}

// TokenRoleBinding lets a registration token's ServiceAccount create requests in the
// token's workspace.
func TokenRoleBinding(workspace, serviceAccount string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: serviceAccount, Namespace: workspace, Labels: managedLabels(nil)},
		RoleRef:    clusterRoleRef(names.RegistrationClusterRole),
		Subjects:   serviceAccountSubject(workspace, serviceAccount),
	}
}

// CredentialPickup lets a registration token's ServiceAccount get, by name, the
// credential Secrets of the registration namespace: those granted to its requests,
// whose names only their agents know (see names.CredentialSecret).
func CredentialPickup(registrationNamespace, workspace, token string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{
			Name: names.CredentialPickupBinding(workspace, token), Namespace: registrationNamespace,
			Labels: managedLabels(map[string]string{names.RegistrationTokenLabel: token, names.ClusterNamespaceLabel: workspace}),
		},
		RoleRef:  clusterRoleRef(names.CredentialPickupClusterRole),
		Subjects: serviceAccountSubject(workspace, names.TokenServiceAccount(token)),
	}
}

// ClusterIdentityRBAC is everything a cluster identity may do, and nothing more:
// in its per-cluster namespace what the flotilla-agent ClusterRole allows; in its
// workspace, get and patch the status of its own Cluster; Contents by name. Its
// recovery ServiceAccount may do what flotilla-agent-recovery allows in the
// per-cluster namespace.
type ClusterIdentityRBAC struct {
	AgentBinding    *rbacv1.RoleBinding
	RecoveryBinding *rbacv1.RoleBinding
	StatusRole      *rbacv1.Role
	StatusBinding   *rbacv1.RoleBinding
	ContentsBinding *rbacv1.ClusterRoleBinding
}

// ClusterIdentity builds the RBAC of the identity of Cluster workspace/cluster whose
// ServiceAccount lives in clusterNamespace.
func ClusterIdentity(workspace, cluster, clusterNamespace string) ClusterIdentityRBAC {
	labels := managedLabels(map[string]string{names.ClusterLabel: cluster, names.ClusterNamespaceLabel: workspace})
	subject := serviceAccountSubject(clusterNamespace, names.AgentIdentityServiceAccount)
	statusRole := names.ClusterStatusRole(cluster)
	return ClusterIdentityRBAC{
		AgentBinding: &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: names.AgentClusterRole, Namespace: clusterNamespace, Labels: labels},
			RoleRef:    clusterRoleRef(names.AgentClusterRole),
			Subjects:   subject,
		},
		RecoveryBinding: &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: names.AgentRecoveryClusterRole, Namespace: clusterNamespace, Labels: labels},
			RoleRef:    clusterRoleRef(names.AgentRecoveryClusterRole),
			Subjects:   serviceAccountSubject(clusterNamespace, names.AgentRecoveryServiceAccount),
		},
		StatusRole: &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: statusRole, Namespace: workspace, Labels: labels},
			Rules:      ClusterStatusRules(cluster),
		},
		StatusBinding: &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: statusRole, Namespace: workspace, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: statusRole},
			Subjects:   subject,
		},
		ContentsBinding: &rbacv1.ClusterRoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: names.ContentsBinding(clusterNamespace), Labels: labels},
			RoleRef:    clusterRoleRef(names.AgentContentsClusterRole),
			Subjects:   subject,
		},
	}
}

// ClusterStatusRules are what a cluster identity may do in its workspace: get its own
// Cluster, and get and patch that Cluster's status.
func ClusterStatusRules(cluster string) []rbacv1.PolicyRule {
	return []rbacv1.PolicyRule{
		{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"clusters"}, ResourceNames: []string{cluster}, Verbs: []string{"get"}},
		{APIGroups: []string{"fleet.cattle.io"}, Resources: []string{"clusters/status"}, ResourceNames: []string{cluster}, Verbs: []string{"get", "patch"}},
	}
}
