package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=fleet,shortName=crt
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.secretName`
// +kubebuilder:printcolumn:name="TTL",type=string,JSONPath=`.spec.ttl`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expires`
// +kubebuilder:printcolumn:name="Max-Registrations",type=integer,JSONPath=`.spec.maxRegistrations`,priority=1
// +kubebuilder:printcolumn:name="Require-Approval",type=boolean,JSONPath=`.spec.requireApproval`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 240",message="a token's name is at most 240 characters: its ServiceAccount is <name>-registration"

// ClusterRegistrationToken lets agents register clusters into its namespace. The hub
// answers it with a Secret of the same name whose "values" key is the values.yaml for
// the fleet-agent chart. The token, and every credential issued for it, ends when its
// TTL does.
type ClusterRegistrationToken struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec sets how long the token lasts.
	Spec ClusterRegistrationTokenSpec `json:"spec,omitempty"`
	// Status names the values Secret and when the token expires.
	Status ClusterRegistrationTokenStatus `json:"status,omitempty"`
}

// ClusterRegistrationTokenSpec is the desired state of a token.
type ClusterRegistrationTokenSpec struct {
	// TTL is how long the token is valid after its creation, as a duration such as
	// "240h" or "90m". A value <= 0 or no value means the token does not expire by
	// itself (it still ends when deleted).
	// +optional
	// +nullable
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="self.matches('^[-+]?(0|(([0-9]+(\\\\.[0-9]*)?|\\\\.[0-9]+)(ns|us|µs|μs|ms|s|m|h))+)$')",message="must be a duration such as 240h, 90m or 1h30m"
	TTL *metav1.Duration `json:"ttl,omitempty"`
	// MaxRegistrations, when set, is how many clusters the token may register: once
	// that many clientIDs have registered with it, requests for further clusters are
	// refused (RegistrationLimitReached). A cluster registering again counts once. 1
	// makes a single-use token. Unset means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=10000
	MaxRegistrations *int32 `json:"maxRegistrations,omitempty"`
	// RequireApproval makes a cluster new to the workspace wait for a hub admin
	// before it registers with this token: its request waits with Ready=Unknown
	// (AwaitingApproval) until an admin approves or refuses it (`hub cluster
	// approve|refuse NAME`, or the annotation fleet.cattle.io/approval=approved|refused
	// on the request). Clusters that exist already register again without waiting.
	// +optional
	RequireApproval bool `json:"requireApproval,omitempty"`
}

// ClusterRegistrationTokenStatus is the observed state of a token.
type ClusterRegistrationTokenStatus struct {
	// Expires is when the token and its credential end; empty for a token without TTL.
	// +optional
	// +nullable
	Expires *metav1.Time `json:"expires,omitempty"`
	// SecretName is the Secret holding the agent chart's values.yaml under "values".
	// +optional
	// +nullable
	SecretName string `json:"secretName,omitempty"`
	// RegisteredClients are the clusters a token with maxRegistrations has registered,
	// as hashes of their clientIDs (written by the hub's request controller).
	// +optional
	// +kubebuilder:validation:MaxItems=10000
	RegisteredClients []string `json:"registeredClients,omitempty"`
	// RefusedClients are the clusters a hub admin refused, as hashes of their
	// clientIDs: their requests with this token are refused at once (written by the
	// hub's request controller).
	// +optional
	// +kubebuilder:validation:MaxItems=10000
	RefusedClients []string `json:"refusedClients,omitempty"`
	// Conditions: Ready once the values Secret exists.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []Condition `json:"conditions,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=fleet,shortName=crr
// +kubebuilder:printcolumn:name="Client-ID",type=string,JSONPath=`.spec.clientID`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.clusterName`
// +kubebuilder:printcolumn:name="Granted",type=boolean,JSONPath=`.status.granted`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterRegistrationRequest is an agent's request to register its cluster, created
// with a registration token's credential. Fleet calls it ClusterRegistration. The hub
// grants it by finding or creating the Cluster with the same clientID and handing the
// agent a credential for that Cluster alone.
type ClusterRegistrationRequest struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the agent asks for.
	Spec ClusterRegistrationRequestSpec `json:"spec,omitempty"`
	// Status is the hub's answer.
	Status ClusterRegistrationRequestStatus `json:"status,omitempty"`
}

// ClusterRegistrationRequestSpec is what an agent sends to register.
type ClusterRegistrationRequestSpec struct {
	// ClientID identifies the downstream cluster; by default the UID of its
	// kube-system namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClientID string `json:"clientID"`
	// ClientRandom is a fresh random string per request; with ClientID it names the
	// credential Secret the agent waits for.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ClientRandom string `json:"clientRandom"`
	// ClusterLabels become the labels of a Cluster the hub creates for this request
	// (labels under fleet.cattle.io/ and management.cattle.io/ are dropped). At most
	// 64, each with a valid label key (at most 253 characters of DNS prefix and 63 of
	// name) and a value of at most 63 characters; the hub drops values that are not
	// valid label values.
	// +optional
	// +nullable
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="keys must be label keys: an optional DNS prefix of at most 253 characters and '/', then a name of at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 63)",message="values must be label values, of at most 63 characters"
	ClusterLabels map[string]string `json:"clusterLabels,omitempty"`
	// PublicKey is the agent's public key (Ed25519, base64 of its PKIX DER). A
	// Cluster is bound to the key of its first registration; a later request for it
	// must be signed with the same key, or be made with a token bound to the Cluster.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	PublicKey string `json:"publicKey,omitempty"`
	// EncryptionKey is a one-time HPKE public key (X25519, base64)
	// the hub encrypts the granted credential to.
	// +optional
	// +kubebuilder:validation:MaxLength=2048
	EncryptionKey string `json:"encryptionKey,omitempty"`
	// SignedAt is when the agent signed the request. The hub accepts a request for
	// a registered Cluster only if it was signed after the last one it accepted.
	// +optional
	// +nullable
	SignedAt *metav1.MicroTime `json:"signedAt,omitempty"`
	// Signature is the Ed25519 signature by PublicKey over the request: its
	// workspace, token, clientID, clientRandom, clusterLabels, publicKey,
	// encryptionKey and signedAt.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	Signature string `json:"signature,omitempty"`
}

// ClusterRegistrationRequestStatus is the hub's answer to a request.
type ClusterRegistrationRequestStatus struct {
	// ClusterName is the Cluster this request registered into, or, while it awaits
	// an admin's approval, the name the Cluster will have.
	// +optional
	// +nullable
	ClusterName string `json:"clusterName,omitempty"`
	// Granted is true once the hub has given the cluster its identity: in Identity,
	// or (for Fleet's agent, and on hubs that cannot sign certificates) in a
	// credential Secret for the agent.
	// +optional
	Granted bool `json:"granted,omitempty"`
	// Identity is the cluster's identity when the hub grants an x509 client
	// certificate for the request's public key. Nothing in it is secret: the
	// certificate is of no use without the private key, which never leaves the
	// downstream cluster.
	// +optional
	Identity *ClusterIdentity `json:"identity,omitempty"`
	// Conditions: Ready, or False with the reason a request was refused.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []Condition `json:"conditions,omitempty"`
}

// ClusterIdentity is a cluster's identity on the hub: x509 client certificates for the
// agent's key, signed by a CA the hub's API server trusts.
type ClusterIdentity struct {
	// Certificate is the identity's client certificate, PEM: the cluster's user on
	// the hub, valid for the hub's --cluster-token-ttl.
	// +kubebuilder:validation:MaxLength=4096
	Certificate string `json:"certificate"`
	// RecoveryCertificate is a longer-lived client certificate for the same key that
	// may only ask, in the cluster's per-cluster namespace, for a new identity with a
	// request signed by that key; empty when the hub recovers no identities.
	// +optional
	// +kubebuilder:validation:MaxLength=4096
	RecoveryCertificate string `json:"recoveryCertificate,omitempty"`
	// DeploymentNamespace is the per-cluster namespace of the cluster's
	// BundleDeployments.
	DeploymentNamespace string `json:"deploymentNamespace"`
	// RenewAfter, when set, is how long after its issue the agent asks for the next
	// identity; otherwise half way through the certificate's lifetime.
	// +optional
	RenewAfter *metav1.Duration `json:"renewAfter,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=fleet
// +kubebuilder:printcolumn:name="Client-ID",type=string,JSONPath=`.spec.clientID`
// +kubebuilder:printcolumn:name="Cluster",type=string,JSONPath=`.status.clusterName`
// +kubebuilder:printcolumn:name="Granted",type=boolean,JSONPath=`.status.granted`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterRegistration is Fleet's agent's request to register its cluster, made with a
// registration token's credential. It carries no key: the hub grants it as it grants
// a ClusterRegistrationRequest, except that it never lets it into a Cluster bound to
// an agent's key, and answers with a credential Fleet's agent can read.
type ClusterRegistration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the agent asks for.
	Spec ClusterRegistrationSpec `json:"spec,omitempty"`
	// Status is the hub's answer.
	Status ClusterRegistrationRequestStatus `json:"status,omitempty"`
}

// ClusterRegistrationSpec is what Fleet's agent sends to register.
type ClusterRegistrationSpec struct {
	// ClientID identifies the downstream cluster; by default the UID of its
	// kube-system namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ClientID string `json:"clientID"`
	// ClientRandom is a fresh random string per request; with ClientID it names the
	// Secret the agent waits for.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=128
	ClientRandom string `json:"clientRandom"`
	// ClusterLabels become the labels of a Cluster the hub creates for this request,
	// bounded and filtered as a ClusterRegistrationRequest's are.
	// +optional
	// +nullable
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 317 && k.matches('^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$'))",message="keys must be label keys: an optional DNS prefix of at most 253 characters and '/', then a name of at most 63 characters"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 63)",message="values must be label values, of at most 63 characters"
	ClusterLabels map[string]string `json:"clusterLabels,omitempty"`
}
