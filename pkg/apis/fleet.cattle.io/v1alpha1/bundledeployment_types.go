package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=fleet,shortName=bd
// +kubebuilder:printcolumn:name="Deployed",type=string,JSONPath=`.status.display.deployed`
// +kubebuilder:printcolumn:name="Monitored",type=string,JSONPath=`.status.display.monitored`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// BundleDeployment is one Bundle for one cluster, written by the hub into the
// cluster's namespace. The cluster's agent installs it and reports its state here.
type BundleDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is what the agent deploys.
	Spec BundleDeploymentSpec `json:"spec,omitempty"`
	// Status is what the agent reports.
	Status BundleDeploymentStatus `json:"status,omitempty"`
}

// BundleDeploymentOptions are how a Bundle is deployed on a cluster.
type BundleDeploymentOptions struct {
	// DefaultNamespace is the namespace of resources that do not name one.
	// +optional
	// +nullable
	DefaultNamespace string `json:"defaultNamespace,omitempty"`

	// TargetNamespace, if set, puts every resource into this namespace; a
	// cluster-scoped resource then fails the deployment.
	// +optional
	// +nullable
	TargetNamespace string `json:"namespace,omitempty"`

	// Kustomize options, such as the directory holding kustomization.yaml.
	// +optional
	// +nullable
	Kustomize *KustomizeOptions `json:"kustomize,omitempty"`

	// Helm options: release name, values and chart settings.
	// +optional
	// +nullable
	Helm *HelmOptions `json:"helm,omitempty"`

	// ServiceAccount is a ServiceAccount of the agent's namespace downstream that the
	// agent impersonates to deploy, so the Bundle gets only that account's rights.
	// +optional
	// +nullable
	ServiceAccount string `json:"serviceAccount,omitempty"`

	// ForceSyncGeneration, when raised, redeploys even without a change.
	// +optional
	ForceSyncGeneration int64 `json:"forceSyncGeneration,omitempty"`

	// YAML overlay options for plain manifests.
	// +optional
	// +nullable
	YAML *YAMLOptions `json:"yaml,omitempty"`

	// Diff options: fields to ignore when looking for modified objects.
	// +optional
	// +nullable
	Diff *DiffOptions `json:"diff,omitempty"`

	// KeepResources keeps the deployed objects when the deployment is removed.
	// +optional
	KeepResources bool `json:"keepResources,omitempty"`

	// DeleteNamespace deletes the namespace the agent created for the release when
	// the deployment is removed (unless KeepResources).
	// +optional
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`

	// IgnoreOptions lists object conditions to ignore when judging readiness.
	// +optional
	IgnoreOptions `json:"ignore,omitempty"`

	// CorrectDrift puts back downstream objects that were changed or deleted.
	// +optional
	// +nullable
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`

	// NamespaceLabels are added to the namespace the agent creates.
	// +optional
	// +nullable
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`

	// NamespaceAnnotations are added to the namespace the agent creates.
	// +optional
	// +nullable
	NamespaceAnnotations map[string]string `json:"namespaceAnnotations,omitempty"`
}

// KustomizeOptions for a deployment.
type KustomizeOptions struct {
	// Dir is the folder holding kustomization.yaml.
	// +optional
	// +nullable
	Dir string `json:"dir,omitempty"`
}

// YAMLOptions for plain manifests.
type YAMLOptions struct {
	// Overlays name folders under overlays/ whose files replace or patch the base files.
	// +optional
	// +nullable
	Overlays []string `json:"overlays,omitempty"`
}

// DiffOptions tune how modified objects are detected.
type DiffOptions struct {
	// ComparePatches remove fields from the comparison for matching objects.
	// +optional
	// +nullable
	ComparePatches []ComparePatch `json:"comparePatches,omitempty"`
}

// ComparePatch selects an object and the fields to ignore in it.
type ComparePatch struct {
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
	// Operations are JSON patch operations (usually "remove") applied before comparing.
	// +optional
	// +nullable
	Operations []Operation `json:"operations,omitempty"`
	// JSONPointers are paths whose differences are ignored.
	// +optional
	// +nullable
	JSONPointers []string `json:"jsonPointers,omitempty"`
}

// Operation is one JSON patch operation.
type Operation struct {
	// Op is usually "remove".
	// +optional
	// +nullable
	Op string `json:"op,omitempty"`
	// Path is a JSON pointer.
	// +optional
	// +nullable
	Path string `json:"path,omitempty"`
	// Value for add or replace operations.
	// +optional
	// +nullable
	Value string `json:"value,omitempty"`
}

// IgnoreOptions list conditions to ignore.
type IgnoreOptions struct {
	// Conditions are condition fields to match (e.g. {type: Progressing}).
	// +optional
	// +nullable
	Conditions []map[string]string `json:"conditions,omitempty"`
}

// CorrectDrift controls drift correction.
type CorrectDrift struct {
	// Enabled puts back changed or deleted downstream objects.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// Force replaces objects that cannot be patched.
	// +optional
	Force bool `json:"force,omitempty"`
	// KeepFailHistory keeps failed correction attempts in the release history.
	// +optional
	KeepFailHistory bool `json:"keepFailHistory,omitempty"`
}

// HelmOptions for a deployment. ReleaseName and Values apply to every Bundle; the
// chart settings apply when the Bundle's resources are a Helm chart.
type HelmOptions struct {
	// Chart is the chart's path within the Bundle's resources, or a chart reference.
	// +optional
	// +nullable
	Chart string `json:"chart,omitempty"`
	// Repo is the Helm repository URL of Chart.
	// +optional
	// +nullable
	Repo string `json:"repo,omitempty"`
	// ReleaseName is the Helm release name; defaults to the Bundle's name.
	// +optional
	// +nullable
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ReleaseName string `json:"releaseName,omitempty"`
	// Version of the chart.
	// +optional
	// +nullable
	Version string `json:"version,omitempty"`
	// TimeoutSeconds bounds each Helm operation.
	// +optional
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// Values are the Helm values.
	// +optional
	// +nullable
	Values *GenericMap `json:"values,omitempty"`
	// ValuesFrom loads values from ConfigMaps and Secrets.
	// +optional
	// +nullable
	ValuesFrom []ValuesFrom `json:"valuesFrom,omitempty"`
	// Force replaces immutable objects on upgrade.
	// +optional
	Force bool `json:"force,omitempty"`
	// TakeOwnership lets the release adopt existing objects not made by Helm.
	// +optional
	TakeOwnership bool `json:"takeOwnership,omitempty"`
	// MaxHistory limits the stored release revisions.
	// +optional
	MaxHistory int `json:"maxHistory,omitempty"`
	// ValuesFiles are files in the Bundle's resources to read values from.
	// +optional
	// +nullable
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	// TemplateValues are values whose text is a ${ } template, resolved for each
	// cluster (unless DisablePreProcess) and read as YAML; each sets the value of its key.
	// +optional
	// +nullable
	TemplateValues map[string]string `json:"templateValues,omitempty"`
	// WaitForJobs waits for Jobs to complete, within TimeoutSeconds.
	// +optional
	WaitForJobs bool `json:"waitForJobs,omitempty"`
	// Atomic rolls back a failed upgrade.
	// +optional
	Atomic bool `json:"atomic,omitempty"`
	// DisablePreProcess turns off the ${ } templating of values and templateValues.
	// +optional
	DisablePreProcess bool `json:"disablePreProcess,omitempty"`
	// DisableDNS turns off DNS lookups in templates.
	// +optional
	DisableDNS bool `json:"disableDNS,omitempty"`
	// DisableDependencyUpdate, set in fleet.yaml, keeps hub apply from downloading the
	// charts a chart depends on that its charts/ folder lacks.
	// +optional
	DisableDependencyUpdate bool `json:"disableDependencyUpdate,omitempty"`
	// SkipSchemaValidation skips the chart's values schema.
	// +optional
	SkipSchemaValidation bool `json:"skipSchemaValidation,omitempty"`
}

// ValuesFrom names a ConfigMap or Secret key holding Helm values.
type ValuesFrom struct {
	// ConfigMapKeyRef selects a ConfigMap key.
	// +optional
	// +nullable
	ConfigMapKeyRef *ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`
	// SecretKeyRef selects a Secret key.
	// +optional
	// +nullable
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// ConfigMapKeySelector selects a key of a ConfigMap.
type ConfigMapKeySelector struct {
	// Name of the ConfigMap.
	// +optional
	Name string `json:"name,omitempty"`
	// Namespace of the ConfigMap.
	// +optional
	// +nullable
	Namespace string `json:"namespace,omitempty"`
	// Key within the ConfigMap.
	// +optional
	// +nullable
	Key string `json:"key,omitempty"`
}

// SecretKeySelector selects a key of a Secret.
type SecretKeySelector struct {
	// Name of the Secret.
	// +optional
	Name string `json:"name,omitempty"`
	// Namespace of the Secret.
	// +optional
	// +nullable
	Namespace string `json:"namespace,omitempty"`
	// Key within the Secret.
	// +optional
	// +nullable
	Key string `json:"key,omitempty"`
}

// BundleDeploymentSpec is what the agent deploys.
type BundleDeploymentSpec struct {
	// Paused, if true, stops the agent from applying changes.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// StagedOptions are options staged for the next deployment.
	// +optional
	StagedOptions BundleDeploymentOptions `json:"stagedOptions,omitempty"`
	// StagedDeploymentID is the ID of the staged deployment.
	// +optional
	// +nullable
	StagedDeploymentID string `json:"stagedDeploymentID,omitempty"`
	// Options are the options to deploy with.
	// +optional
	Options BundleDeploymentOptions `json:"options,omitempty"`
	// DeploymentID is "<content name>:<options hash>"; it changes exactly when the
	// content or the options do.
	// +optional
	// +nullable
	DeploymentID string `json:"deploymentID,omitempty"`
	// DependsOn names Bundles that must be ready first.
	// +optional
	// +nullable
	DependsOn []BundleRef `json:"dependsOn,omitempty"`
	// CorrectDrift controls drift correction.
	// +optional
	// +nullable
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`
}

// BundleDeploymentResource is an object the release deployed.
type BundleDeploymentResource struct {
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
	// CreatedAt is when the object was deployed.
	// +optional
	// +nullable
	CreatedAt metav1.Time `json:"createdAt,omitempty"`
}

// BundleDeploymentStatus is what the agent reports.
type BundleDeploymentStatus struct {
	// Conditions: Ready, Installed, Deployed and Monitored; a failed Helm operation's
	// error is the message of Deployed=False.
	// +optional
	// +nullable
	// +listType=map
	// +listMapKey=type
	Conditions []Condition `json:"conditions,omitempty"`
	// AppliedDeploymentID is the spec.deploymentID the agent last applied.
	// +optional
	// +nullable
	AppliedDeploymentID string `json:"appliedDeploymentID,omitempty"`
	// Release is "<namespace>/<release name>:<revision>" of the Helm release.
	// +optional
	// +nullable
	Release string `json:"release,omitempty"`
	// Ready is true when every deployed object is ready.
	// +optional
	Ready bool `json:"ready,omitempty"`
	// NonModified is true when no deployed object differs from the bundle.
	// +optional
	NonModified bool `json:"nonModified,omitempty"`
	// NonReadyStatus lists objects that are not ready.
	// +optional
	// +nullable
	NonReadyStatus []NonReadyStatus `json:"nonReadyStatus,omitempty"`
	// ModifiedStatus lists objects that differ from the bundle.
	// +optional
	// +nullable
	ModifiedStatus []ModifiedStatus `json:"modifiedStatus,omitempty"`
	// Display is what `kubectl get bundledeployments` prints.
	// +optional
	Display BundleDeploymentDisplay `json:"display,omitempty"`
	// SyncGeneration is the ForceSyncGeneration last applied.
	// +optional
	// +nullable
	SyncGeneration *int64 `json:"syncGeneration,omitempty"`
	// Resources lists the objects of the release.
	// +optional
	// +nullable
	Resources []BundleDeploymentResource `json:"resources,omitempty"`
}

// BundleDeploymentDisplay holds the printed summary of a BundleDeployment.
type BundleDeploymentDisplay struct {
	// Deployed is "Yes" or the deployment error.
	// +optional
	// +nullable
	Deployed string `json:"deployed,omitempty"`
	// Monitored is "Yes" or why readiness is unknown.
	// +optional
	// +nullable
	Monitored string `json:"monitored,omitempty"`
	// State is the BundleState.
	// +optional
	// +nullable
	State string `json:"state,omitempty"`
}

// +genclient
// +genclient:nonNamespaced
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=fleet,shortName=fcontent
// +kubebuilder:printcolumn:name="SHA256",type=string,JSONPath=`.sha256sum`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Content holds the resources of a Bundle once, shared by all its BundleDeployments.
// It is cluster-scoped and named by the sha256 of the resources, so identical
// resources are stored once.
type Content struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Content is the gzip-compressed JSON of the Bundle's resources.
	// +optional
	// +nullable
	Content []byte `json:"content,omitempty"`

	// SHA256Sum is the sha256 of the uncompressed Content.
	// +optional
	SHA256Sum string `json:"sha256sum,omitempty"`

	// Status reports how many BundleDeployments refer to this Content.
	// +optional
	Status ContentStatus `json:"status,omitempty"`
}

// ContentStatus is the observed state of a Content.
type ContentStatus struct {
	// ReferenceCount is the number of BundleDeployments using this Content.
	// +optional
	ReferenceCount int `json:"referenceCount,omitempty"`
}
