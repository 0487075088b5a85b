package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=fleet,path=gitreporestrictions
// +kubebuilder:printcolumn:name="Default-ServiceAccount",type=string,JSONPath=`.defaultServiceAccount`
// +kubebuilder:printcolumn:name="Allowed-ServiceAccounts",type=string,JSONPath=`.allowedServiceAccounts`

// GitRepoRestriction restricts what the GitRepos of its namespace may do: which
// repositories they read, which downstream service accounts and target namespaces
// their Bundles use, which Secrets they name. Several in one namespace add up: each
// list is the union of theirs, each default the first set (by name).
type GitRepoRestriction struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// DefaultServiceAccount is used by GitRepos that name none.
	// +optional
	// +nullable
	DefaultServiceAccount string `json:"defaultServiceAccount,omitempty"`
	// AllowedServiceAccounts are the service accounts GitRepos may use. When set, a
	// GitRepo must end up with one of them (its own, or DefaultServiceAccount).
	// +optional
	// +nullable
	AllowedServiceAccounts []string `json:"allowedServiceAccounts,omitempty"`
	// AllowedRepoPatterns are the repositories GitRepos may read: each is a URL, or
	// a regular expression the whole URL must match.
	// +optional
	// +nullable
	AllowedRepoPatterns []string `json:"allowedRepoPatterns,omitempty"`
	// DefaultClientSecretName is used by GitRepos that name no clientSecretName.
	// +optional
	// +nullable
	DefaultClientSecretName string `json:"defaultClientSecretName,omitempty"`
	// AllowedClientSecretNames are the Secrets GitRepos may name as clientSecretName.
	// +optional
	// +nullable
	AllowedClientSecretNames []string `json:"allowedClientSecretNames,omitempty"`
	// AllowedTargetNamespaces are the namespaces GitRepos may deploy to; when set, a
	// GitRepo must set targetNamespace to one of them.
	// +optional
	// +nullable
	AllowedTargetNamespaces []string `json:"allowedTargetNamespaces,omitempty"`
	// AllowedTargetNamespaceSelector is Fleet's selector of downstream namespaces
	// by label. Flotilla does not look at downstream namespaces' labels yet: when it
	// is set, a GitRepo's targetNamespace must be in AllowedTargetNamespaces.
	// +optional
	// +nullable
	AllowedTargetNamespaceSelector *metav1.LabelSelector `json:"allowedTargetNamespaceSelector,omitempty"`
}
