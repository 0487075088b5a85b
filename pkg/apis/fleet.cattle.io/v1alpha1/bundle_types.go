package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// BundleState is the state of one BundleDeployment, from best to worst: Ready,
// NotReady, Pending, OutOfSync, Modified, WaitApplied, ErrApplied.
type BundleState string

// Bundle states, as Fleet names them.
const (
	// Ready: deployed and every resource is ready.
	Ready BundleState = "Ready"
	// NotReady: deployed, but some resources are not ready.
	NotReady BundleState = "NotReady"
	// WaitApplied: written for the cluster, the agent has not deployed it yet.
	WaitApplied BundleState = "WaitApplied"
	// ErrApplied: the agent tried to deploy it and failed.
	ErrApplied BundleState = "ErrApplied"
	// OutOfSync: changed on the hub, the agent has not caught up.
	OutOfSync BundleState = "OutOfSync"
	// Pending: the hub is still processing it.
	Pending BundleState = "Pending"
	// Modified: deployed, but downstream objects differ from the bundle.
	Modified BundleState = "Modified"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=fleet,shortName=fb
// +kubebuilder:printcolumn:name="BundleDeployments-Ready",type=string,JSONPath=`.status.display.readyClusters`
// +kubebuilder:printcolumn:name="Rollout",type=string,JSONPath=`.status.display.rollout`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// Bundle is a set of Kubernetes resources (plain manifests or a Helm chart) and the
// clusters it targets. The hub writes one BundleDeployment per target cluster; each
// agent installs it as a Helm release.
type Bundle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec holds the resources, their deployment options and the targets.
	// +optional
	Spec BundleSpec `json:"spec"`
	// Status summarises the Bundle's BundleDeployments.
	// +optional
	Status BundleStatus `json:"status"`
}

// BundleSpec is the desired state of a Bundle.
type BundleSpec struct {
	BundleDeploymentOptions `json:",inline"`

	// Paused, if true, stops the Bundle's BundleDeployments from being updated.
	// +optional
	Paused bool `json:"paused,omitempty"`

	// RolloutStrategy stages a change and releases it partition by partition, while
	// the clusters and partitions that are unavailable stay within its limits.
	// +optional
	// +nullable
	RolloutStrategy *RolloutStrategy `json:"rolloutStrategy,omitempty"`

	// TargetCustomizationMode is how targets give a cluster its options: FirstMatch
	// (the default) takes the first target that matches; AllMatches merges every
	// matching target's options in order, later ones winning.
	// +optional
	// +kubebuilder:validation:Enum="";FirstMatch;AllMatches
	TargetCustomizationMode TargetCustomizationMode `json:"targetCustomizationMode,omitempty"`

	// Resources are the Bundle's files: manifests, or a Helm chart's files.
	// +optional
	// +nullable
	Resources []BundleResource `json:"resources,omitempty"`

	// Targets select the clusters to deploy to. They are evaluated in order and the
	// first match gives a cluster its options.
	// +optional
	Targets []BundleTarget `json:"targets,omitempty"`

	// TargetRestrictions, when set, is an allow-list: a cluster is deployed to only if
	// it also matches one of these.
	// +optional
	TargetRestrictions []BundleTargetRestriction `json:"targetRestrictions,omitempty"`

	// DependsOn names Bundles that must be in an accepted state (Ready by default) on
	// a cluster before this one is deployed or upgraded there.
	// +optional
	// +nullable
	DependsOn []BundleRef `json:"dependsOn,omitempty"`

	// ContentsID names the Content holding the resources when they are not inline.
	// +optional
	// +nullable
	ContentsID string `json:"contentsId,omitempty"`

	// ValuesHash is a hash of the Helm values, set by tools that write Bundles.
	// +optional
	ValuesHash string `json:"valuesHash,omitempty"`
}

// TargetCustomizationMode is how a Bundle's targets give a cluster its options.
type TargetCustomizationMode string

// Target customization modes, as Fleet names them.
const (
	// FirstMatch: the first matching target gives the cluster its options.
	TargetCustomizationModeFirstMatch TargetCustomizationMode = "FirstMatch"
	// AllMatches: every matching target's options are merged in order.
	TargetCustomizationModeAllMatches TargetCustomizationMode = "AllMatches"
)

// BundleRef refers to other Bundles of the same namespace by name or by labels.
type BundleRef struct {
	// Name of the Bundle.
	// +optional
	// +nullable
	Name string `json:"name,omitempty"`
	// Selector matching Bundle labels.
	// +optional
	// +nullable
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// AcceptedStates are the states of the dependency's BundleDeployment on the same
	// cluster that let this Bundle deploy there (default: Ready only).
	// +optional
	// +nullable
	// +kubebuilder:validation:items:Enum=Ready;NotReady;WaitApplied;ErrApplied;OutOfSync;Pending;Modified
	AcceptedStates []BundleState `json:"acceptedStates,omitempty"`
}

// BundleResource is one file of a Bundle.
type BundleResource struct {
	// Name is the file's path within the Bundle, e.g. "templates/deployment.yaml"
	// or "deployment.yaml".
	// +optional
	// +nullable
	Name string `json:"name,omitempty"`
	// Content is the file's text, or its encoded bytes.
	// +optional
	// +nullable
	Content string `json:"content,omitempty"`
	// Encoding is empty for plain text, or "base64" or "base64+gz".
	// +optional
	// +nullable
	// +kubebuilder:validation:Enum="";base64;base64+gz
	Encoding string `json:"encoding,omitempty"`
}

// RolloutStrategy controls how a Bundle change rolls out across clusters.
type RolloutStrategy struct {
	// MaxUnavailable is a number or percentage of clusters that may be unavailable
	// during an update (default 100%).
	// +optional
	// +nullable
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// MaxUnavailablePartitions is a number or percentage of partitions that may be
	// unavailable during an update (default 0).
	// +optional
	// +nullable
	MaxUnavailablePartitions *intstr.IntOrString `json:"maxUnavailablePartitions,omitempty"`
	// AutoPartitionSize is a number or percentage of clusters per automatic
	// partition (default 25%); 0 puts every cluster in one partition.
	// +optional
	// +nullable
	AutoPartitionSize *intstr.IntOrString `json:"autoPartitionSize,omitempty"`
	// AutoPartitionThreshold is how many clusters a Bundle must target before they
	// are partitioned automatically (default 200); 0 or less never partitions.
	// +optional
	// +nullable
	AutoPartitionThreshold *int `json:"autoPartitionThreshold,omitempty"`
	// MaxNew is how many BundleDeployments are created in one pass of the hub, so a
	// Bundle new to thousands of clusters reaches them in steps (Flotilla's default is
	// no limit; Fleet's is 50).
	// +optional
	// +nullable
	// +kubebuilder:validation:Minimum=1
	MaxNew *int `json:"maxNew,omitempty"`
	// Partitions define explicit partitions, rolled out in order; a cluster joins the
	// first that selects it. Clusters none selects come after them, in a partition
	// "Unmatched" (split automatically from autoPartitionThreshold of them on).
	// +optional
	// +nullable
	Partitions []Partition `json:"partitions,omitempty"`
}

// Partition is a named set of clusters rolled out together.
type Partition struct {
	// Name is shown in status.
	// +optional
	// +nullable
	Name string `json:"name,omitempty"`
	// MaxUnavailable is a number or percentage of the partition's clusters that may
	// be unavailable for the partition to count as available (default: the
	// strategy's maxUnavailable).
	// +optional
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// ClusterName selects one cluster.
	// +optional
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector selects clusters by label.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup selects a ClusterGroup by name.
	// +optional
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector selects ClusterGroups by label.
	// +optional
	// +nullable
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// BundleTarget selects clusters and, for them, overrides the Bundle's options.
type BundleTarget struct {
	BundleDeploymentOptions `json:",inline"`

	// Name of the target, for display; defaults to "target000", "target001", ...
	// +optional
	Name string `json:"name,omitempty"`
	// ClusterName selects one cluster by name.
	// +optional
	// +nullable
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector selects clusters by label. Combined with a cluster group, it
	// narrows the group's clusters.
	// +optional
	// +nullable
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup selects the clusters of a ClusterGroup by the group's name.
	// +optional
	// +nullable
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector selects the clusters of ClusterGroups by the groups' labels.
	// +optional
	// +nullable
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
	// DoNotDeploy, if true, excludes the clusters this target matches.
	// +optional
	DoNotDeploy bool `json:"doNotDeploy,omitempty"`
}

// BundleTargetRestriction is an allow-list entry for a Bundle's targets.
type BundleTargetRestriction struct {
	// Name of the restriction, for display.
	// +optional
	// +nullable
	Name string `json:"name,omitempty"`
	// ClusterName allows one cluster by name.
	// +optional
	// +nullable
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector allows clusters by label.
	// +optional
	// +nullable
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup allows the clusters of a ClusterGroup.
	// +optional
	// +nullable
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector allows the clusters of ClusterGroups by the groups' labels.
	// +optional
	// +nullable
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// BundleSummary counts BundleDeployments by state.
type BundleSummary struct {
	// NotReady counts deployments whose resources are not all ready.
	// +optional
	NotReady int `json:"notReady,omitempty"`
	// WaitApplied counts deployments the agent has not applied yet.
	// +optional
	WaitApplied int `json:"waitApplied,omitempty"`
	// ErrApplied counts deployments the agent failed to apply.
	// +optional
	ErrApplied int `json:"errApplied,omitempty"`
	// OutOfSync counts deployments changed on the hub but not yet on the cluster.
	// +optional
	OutOfSync int `json:"outOfSync,omitempty"`
	// Modified counts deployments whose downstream objects differ from the bundle.
	// +optional
	Modified int `json:"modified,omitempty"`
	// Ready counts deployments that are applied and ready.
	// +optional
	Ready int `json:"ready"`
	// Pending counts deployments the hub is still processing.
	// +optional
	Pending int `json:"pending,omitempty"`
	// DesiredReady is the number of deployments that should be ready.
	// +optional
	DesiredReady int `json:"desiredReady"`
	// NonReadyResources lists up to ten deployments that are not ready, and why.
	// +optional
	// +nullable
	NonReadyResources []NonReadyResource `json:"nonReadyResources,omitempty"`
}

// NonReadyResource says why one BundleDeployment is not ready.
type NonReadyResource struct {
	// Name of the BundleDeployment (or cluster).
	// +optional
	// +nullable
	Name string `json:"name,omitempty"`
	// State of the BundleDeployment.
	// +optional
	// +nullable
	State BundleState `json:"bundleState,omitempty"`
	// Message explains the state.
	// +optional
	// +nullable
	Message string `json:"message,omitempty"`
	// ModifiedStatus lists the modified downstream objects.
	// +optional
	// +nullable
	ModifiedStatus []ModifiedStatus `json:"modifiedStatus,omitempty"`
	// NonReadyStatus lists the downstream objects that are not ready.
	// +optional
	// +nullable
	NonReadyStatus []NonReadyStatus `json:"nonReadyStatus,omitempty"`
}

// BundleStatus is the observed state of a Bundle.
type BundleStatus struct {
	// Conditions: Ready (with a message naming clusters that are not) and Processed.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []Condition `json:"conditions,omitempty"`
	// Summary counts the Bundle's BundleDeployments by state.
	// +optional
	Summary BundleSummary `json:"summary,omitempty"`
	// NewlyCreated counts the BundleDeployments created in the last pass.
	// +optional
	NewlyCreated int `json:"newlyCreated,omitempty"`
	// Unavailable counts BundleDeployments that are not ready or not yet applied.
	// +optional
	Unavailable int `json:"unavailable"`
	// UnavailablePartitions counts the partitions with more unavailable clusters
	// than their maxUnavailable.
	// +optional
	UnavailablePartitions int `json:"unavailablePartitions"`
	// MaxUnavailable is how many BundleDeployments may be unavailable while a change
	// rolls out (from the rollout strategy).
	// +optional
	MaxUnavailable int `json:"maxUnavailable"`
	// MaxUnavailablePartitions is how many partitions may be unavailable before the
	// next partition waits (from the rollout strategy).
	// +optional
	MaxUnavailablePartitions int `json:"maxUnavailablePartitions"`
	// PartitionStatus is each partition's state, in rollout order.
	// +optional
	// +nullable
	PartitionStatus []PartitionStatus `json:"partitions,omitempty"`
	// Display is what `kubectl get bundles` prints.
	// +optional
	Display BundleDisplay `json:"display,omitempty"`
	// ObservedGeneration is the generation the hub last processed.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`
	// ResourcesSHA256Sum is the sha256 of the resources, which names their Content.
	// +optional
	ResourcesSHA256Sum string `json:"resourcesSha256Sum,omitempty"`
}

// PartitionStatus is the state of one rollout partition.
type PartitionStatus struct {
	// Name of the partition.
	// +optional
	// +nullable
	Name string `json:"name,omitempty"`
	// Count is the number of clusters in the partition.
	// +optional
	Count int `json:"count,omitempty"`
	// MaxUnavailable is how many of its clusters may be unavailable.
	// +optional
	MaxUnavailable int `json:"maxUnavailable,omitempty"`
	// Unavailable counts its clusters that are unavailable or not up to date.
	// +optional
	Unavailable int `json:"unavailable,omitempty"`
	// Summary counts its BundleDeployments by state.
	// +optional
	Summary BundleSummary `json:"summary,omitempty"`
}

// BundleDisplay holds the printed summary of a Bundle.
type BundleDisplay struct {
	// ReadyClusters is "ready/desired" BundleDeployments.
	// +optional
	// +nullable
	ReadyClusters string `json:"readyClusters,omitempty"`
	// State is the worst BundleDeployment state.
	// +optional
	// +nullable
	State string `json:"state,omitempty"`
	// Rollout is empty once every cluster has the current version; else how many
	// have it, and whether the rest wait for the rollout strategy or are paused,
	// e.g. "1/3 released, waiting".
	// +optional
	// +nullable
	Rollout string `json:"rollout,omitempty"`
}

// NonReadyStatus describes a downstream object that is not ready.
type NonReadyStatus struct {
	// UID of the object.
	// +optional
	// +nullable
	UID types.UID `json:"uid,omitempty"`
	// Kind of the object.
	// +optional
	// +nullable
	Kind string `json:"kind,omitempty"`
	// APIVersion of the object.
	// +optional
	// +nullable
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace of the object.
	// +optional
	// +nullable
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	// +optional
	// +nullable
	Name string `json:"name,omitempty"`
	// Summary of the object's state.
	// +optional
	Summary ResourceSummary `json:"summary,omitempty"`
}

// ResourceSummary is the state of a downstream object.
type ResourceSummary struct {
	// State is a short word such as "in-progress" or "error".
	// +optional
	State string `json:"state,omitempty"`
	// Error is true when the object is failing.
	// +optional
	Error bool `json:"error,omitempty"`
	// Transitioning is true while the object is on its way to ready.
	// +optional
	Transitioning bool `json:"transitioning,omitempty"`
	// Message explains the state.
	// +optional
	Message []string `json:"message,omitempty"`
}

// ModifiedStatus describes a downstream object that differs from the bundle.
type ModifiedStatus struct {
	// Kind of the object.
	// +optional
	// +nullable
	Kind string `json:"kind,omitempty"`
	// APIVersion of the object.
	// +optional
	// +nullable
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace of the object.
	// +optional
	// +nullable
	Namespace string `json:"namespace,omitempty"`
	// Name of the object.
	// +optional
	// +nullable
	Name string `json:"name,omitempty"`
	// Create is true when the object is missing downstream.
	// +optional
	Create bool `json:"missing,omitempty"`
	// Delete is true when the object exists downstream but not in the bundle.
	// +optional
	Delete bool `json:"delete,omitempty"`
	// Patch is the difference between the bundle and the downstream object.
	// +optional
	// +nullable
	Patch string `json:"patch,omitempty"`
}
