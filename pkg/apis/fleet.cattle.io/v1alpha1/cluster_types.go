package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=fleet,shortName=fc;fleetcluster
// +kubebuilder:printcolumn:name="Bundles-Ready",type=string,JSONPath=`.status.display.readyBundles`
// +kubebuilder:printcolumn:name="Nodes-Ready",type=string,JSONPath=`.status.display.readyNodes`
// +kubebuilder:printcolumn:name="Sample-Node",type=string,JSONPath=`.status.display.sampleNode`
// +kubebuilder:printcolumn:name="Last-Seen",type=string,JSONPath=`.status.agent.lastSeen`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// Cluster is a downstream Kubernetes cluster registered with the hub. Bundles target
// Clusters by name, label or group. A Cluster is created by the hub when an agent
// registers with a token, or by a user (with spec.clientID for agents to claim it, or
// with spec.kubeConfigSecret for the hub to deploy the agent itself).
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the user asks of this cluster.
	Spec ClusterSpec `json:"spec,omitempty"`
	// Status is what the hub and the cluster's agent report.
	Status ClusterStatus `json:"status,omitempty"`
}

// ClusterSpec is the desired state of a Cluster.
type ClusterSpec struct {
	// Paused, if true, stops the BundleDeployments of this cluster from being updated.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// ClientID is the unique, hard to guess string an agent presents to join this
	// Cluster. Set it to have an agent installed with the same clientID claim this
	// Cluster; left empty, the hub fills it in when it deploys the agent itself.
	// +optional
	// +nullable
	ClientID string `json:"clientID,omitempty"`

	// KubeConfigSecret is the name of a Secret holding a kubeconfig for the downstream
	// cluster under the key "value" (the Cluster API <cluster>-kubeconfig format). When
	// set, the hub deploys the agent into that cluster itself. Optional keys
	// "apiServerURL" and "apiServerCA" override what the agent is told about the hub.
	// +optional
	// +nullable
	KubeConfigSecret string `json:"kubeConfigSecret,omitempty"`

	// KubeConfigSecretNamespace is the namespace of KubeConfigSecret. Empty means the
	// Cluster's own namespace; other namespaces must be allowed by the hub's settings.
	// +optional
	// +nullable
	KubeConfigSecretNamespace string `json:"kubeConfigSecretNamespace,omitempty"`

	// RedeployAgentGeneration forces the hub to deploy the agent again when raised: the
	// agent's release and downstream identity are removed and the agent registers anew.
	// Only used with KubeConfigSecret.
	// +optional
	RedeployAgentGeneration int64 `json:"redeployAgentGeneration,omitempty"`

	// AgentEnvVars are extra environment variables for the agent's Deployment.
	// +optional
	// +nullable
	AgentEnvVars []corev1.EnvVar `json:"agentEnvVars,omitempty"`

	// AgentNamespace is the downstream namespace of the agent; defaults to cattle-fleet-system.
	// +optional
	// +nullable
	AgentNamespace string `json:"agentNamespace,omitempty"`

	// PrivateRepoURL prefixes the agent's image name, for clusters that pull images
	// from a private registry.
	// +optional
	// +nullable
	PrivateRepoURL string `json:"privateRepoURL,omitempty"`

	// TemplateValues are cluster-specific values that bundles can use when their Helm
	// values are templated.
	// +optional
	// +nullable
	TemplateValues *GenericMap `json:"templateValues,omitempty"`

	// AgentTolerations are extra tolerations for the agent's Deployment.
	// +optional
	// +nullable
	AgentTolerations []corev1.Toleration `json:"agentTolerations,omitempty"`

	// AgentAffinity replaces the default affinity of the agent's Deployment.
	// +optional
	// +nullable
	AgentAffinity *corev1.Affinity `json:"agentAffinity,omitempty"`

	// AgentResources sets the resource requests and limits of the agent's Deployment.
	// +optional
	// +nullable
	AgentResources *corev1.ResourceRequirements `json:"agentResources,omitempty"`

	// HostNetwork runs the agent's Pod in the host network, for clusters whose bundles
	// install the network itself.
	// +optional
	// +nullable
	HostNetwork *bool `json:"hostNetwork,omitempty"`
}

// ClusterStatus is the observed state of a Cluster.
type ClusterStatus struct {
	// Conditions: Ready (Unknown when the agent is offline), Imported (for clusters
	// the hub deploys the agent to) and Processed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []Condition `json:"conditions,omitempty"`

	// Namespace is the per-cluster namespace on the hub that holds this cluster's
	// BundleDeployments and its identity; the agent can read nothing else.
	// +optional
	Namespace string `json:"namespace,omitempty"`

	// Summary counts this cluster's BundleDeployments by state.
	// +optional
	Summary BundleSummary `json:"summary,omitempty"`

	// AgentDeployedGeneration is the spec.redeployAgentGeneration of the last
	// successful agent deployment by the hub.
	// +optional
	// +nullable
	AgentDeployedGeneration *int64 `json:"agentDeployedGeneration,omitempty"`

	// AgentConfigHash is a hash of the agent settings (env vars, tolerations,
	// affinity, resources, private repo URL) when the hub last deployed the agent;
	// later changes reach the agent through its agent bundle, as an upgrade.
	// +optional
	AgentConfigHash string `json:"agentConfigHash,omitempty"`

	// APIServerURL is the hub URL the agent was last told to use.
	// +optional
	// +nullable
	APIServerURL string `json:"apiServerURL,omitempty"`

	// Display is what `kubectl get clusters.fleet.cattle.io` prints.
	// +optional
	Display ClusterDisplay `json:"display,omitempty"`

	// Agent is what the cluster's agent last reported about itself and its nodes.
	// +optional
	Agent AgentStatus `json:"agent,omitempty"`
}

// ClusterDisplay holds the printed summary of a Cluster.
type ClusterDisplay struct {
	// ReadyBundles is "ready/desired" BundleDeployments, e.g. "1/1".
	// +optional
	ReadyBundles string `json:"readyBundles,omitempty"`
	// ReadyNodes is "ready/total" nodes, e.g. "3/3".
	// +optional
	ReadyNodes string `json:"readyNodes,omitempty"`
	// SampleNode is the name of one of the cluster's nodes.
	// +optional
	SampleNode string `json:"sampleNode,omitempty"`
	// State is the worst BundleDeployment state of the cluster, or WaitCheckIn
	// before its agent has reported.
	// +optional
	// +nullable
	State string `json:"state,omitempty"`
}

// AgentStatus is what an agent reports in its heartbeat.
type AgentStatus struct {
	// LastSeen is when the agent last reported this status: on its first check-in,
	// when the report changes and at least every 5 minutes. Between reports it
	// renews the Lease fleet-agent in its per-cluster namespace. A cluster seen in
	// neither for longer than the hub's offline threshold is shown as not Ready.
	// +optional
	// +nullable
	LastSeen metav1.Time `json:"lastSeen"`
	// Namespace is the downstream namespace the agent runs in.
	// +optional
	// +nullable
	Namespace string `json:"namespace"`
	// ReadyNodes is the number of downstream nodes that are Ready.
	// +optional
	ReadyNodes int `json:"readyNodes,omitempty"`
	// NonReadyNodes is the number of downstream nodes that are not Ready.
	// +optional
	NonReadyNodes int `json:"nonReadyNodes,omitempty"`
	// SampleNode is the name of one downstream node, preferably a Ready one.
	// +optional
	SampleNode string `json:"sampleNode,omitempty"`
	// AgentVersion is the version of the agent program.
	// +optional
	AgentVersion string `json:"agentVersion,omitempty"`
	// KubernetesVersion is the downstream cluster's Kubernetes version.
	// +optional
	KubernetesVersion string `json:"kubernetesVersion,omitempty"`
}

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=fleet,shortName=cg
// +kubebuilder:printcolumn:name="Clusters-Ready",type=string,JSONPath=`.status.display.readyClusters`
// +kubebuilder:printcolumn:name="Bundles-Ready",type=string,JSONPath=`.status.display.readyBundles`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// ClusterGroup selects Clusters of its namespace by label, so that Bundles can
// target the group.
type ClusterGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec selects the group's clusters.
	Spec ClusterGroupSpec `json:"spec,omitempty"`
	// Status summarises the group's clusters and their bundles.
	Status ClusterGroupStatus `json:"status,omitempty"`
}

// ClusterGroupSpec selects the Clusters of a group.
type ClusterGroupSpec struct {
	// Selector matches the labels of Clusters in the group's namespace. An empty
	// selector matches every Cluster of the namespace; a missing one matches none.
	// +optional
	// +nullable
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// ClusterGroupStatus summarises a group.
type ClusterGroupStatus struct {
	// ClusterCount is the number of Clusters in the group.
	// +optional
	ClusterCount int `json:"clusterCount"`
	// NonReadyClusterCount is the number of Clusters in the group that are not Ready.
	// +optional
	NonReadyClusterCount int `json:"nonReadyClusterCount"`
	// NonReadyClusters names up to ten of the group's Clusters that are not Ready.
	// +optional
	// +nullable
	NonReadyClusters []string `json:"nonReadyClusters,omitempty"`
	// Conditions: Ready and Processed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []Condition `json:"conditions,omitempty"`
	// Summary counts the BundleDeployments of the group's clusters by state.
	// +optional
	Summary BundleSummary `json:"summary,omitempty"`
	// Display is what `kubectl get clustergroups` prints.
	// +optional
	Display ClusterGroupDisplay `json:"display,omitempty"`
}

// ClusterGroupDisplay holds the printed summary of a ClusterGroup.
type ClusterGroupDisplay struct {
	// ReadyClusters is "ready/total" clusters.
	// +optional
	ReadyClusters string `json:"readyClusters,omitempty"`
	// ReadyBundles is "ready/desired" BundleDeployments over the group's clusters.
	// +optional
	ReadyBundles string `json:"readyBundles,omitempty"`
	// State is the worst BundleDeployment state in the group.
	// +optional
	// +nullable
	State string `json:"state,omitempty"`
}
