package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Namespaced,categories=fleet
// +kubebuilder:printcolumn:name="Require-ServiceAccount",type=boolean,JSONPath=`.requireServiceAccount`
// +kubebuilder:printcolumn:name="Allowed-ServiceAccounts",type=string,JSONPath=`.allowedServiceAccounts`

// Policy restricts what the Bundles of its namespace (a workspace) may do, as
// Fleet's Policy does: the hub deploys no Bundle that breaks it, and says why in the
// Bundle's Processed condition. Several Policies of a namespace add up: each
// requirement of any applies, and a service account is allowed when any lists it.
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// RequireServiceAccount refuses a Bundle that would deploy to any cluster without
	// a serviceAccount, i.e. with the agent's own rights.
	// +optional
	RequireServiceAccount bool `json:"requireServiceAccount,omitempty"`

	// AllowedServiceAccounts, when set, are the only serviceAccounts a Bundle may
	// name (in its spec or any target).
	// +optional
	// +nullable
	AllowedServiceAccounts []string `json:"allowedServiceAccounts,omitempty"`
}
