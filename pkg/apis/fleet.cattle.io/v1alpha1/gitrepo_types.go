package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +genclient
// +k8s:deepcopy-gen:interfaces=k8s.io/apimachinery/pkg/runtime.Object
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,categories=fleet,path=gitrepos
// +kubebuilder:printcolumn:name="Repo",type=string,JSONPath=`.spec.repo`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.status.commit`
// +kubebuilder:printcolumn:name="BundleDeployments-Ready",type=string,JSONPath=`.status.display.readyBundleDeployments`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`

// GitRepo is a Git repository whose folders the hub turns into Bundles, following
// new commits of a branch (or staying at one revision).
type GitRepo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the repository, what to read from it and where it goes.
	Spec GitRepoSpec `json:"spec,omitempty"`
	// Status is the commit deployed and the state of its Bundles.
	Status GitRepoStatus `json:"status,omitempty"`
}

// GitRepoSpec is what a GitRepo reads and where its Bundles go.
type GitRepoSpec struct {
	// Repo is the repository's URL: https://, http://, ssh:// or user@host:path.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=2048
	Repo string `json:"repo"`
	// Branch is followed: each new commit is deployed. Default "master", as Fleet's.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Branch string `json:"branch,omitempty"`
	// Revision, a commit or tag, is deployed instead of following a branch.
	// +optional
	// +kubebuilder:validation:MaxLength=255
	Revision string `json:"revision,omitempty"`
	// Paths are the folders of the repository to read, as `fleet apply` reads each
	// (globs allowed); default the repository's root.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Paths []string `json:"paths,omitempty"`
	// Targets are added to every Bundle's targets (unless its fleet.yaml has
	// overrideTargets). None means the Bundles' own.
	// +optional
	Targets []GitTarget `json:"targets,omitempty"`
	// TargetNamespace puts every object of every Bundle in this namespace.
	// +optional
	TargetNamespace string `json:"targetNamespace,omitempty"`
	// ServiceAccount is the downstream ServiceAccount the Bundles are deployed as.
	// +optional
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// KeepResources keeps the deployed objects when a Bundle goes away.
	// +optional
	KeepResources bool `json:"keepResources,omitempty"`
	// CorrectDrift puts objects changed downstream back.
	// +optional
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`
	// Paused makes Bundles that are not deployed to clusters until unpaused.
	// +optional
	Paused bool `json:"paused,omitempty"`
	// ForceSyncGeneration: raising it fetches and deploys again.
	// +optional
	ForceSyncGeneration int64 `json:"forceSyncGeneration,omitempty"`
	// PollingInterval is how often the branch is looked at for a new commit;
	// default 15s.
	// +optional
	PollingInterval *metav1.Duration `json:"pollingInterval,omitempty"`
	// DisablePolling stops looking for new commits (a webhook still triggers).
	// +optional
	DisablePolling bool `json:"disablePolling,omitempty"`
	// ClientSecretName is a Secret in the GitRepo's namespace with the credential
	// for the repository: kubernetes.io/basic-auth (username, password), or for SSH
	// kubernetes.io/ssh-auth (ssh-privatekey, and known_hosts, required).
	// +optional
	ClientSecretName string `json:"clientSecretName,omitempty"`
	// HelmSecretName is a Secret in the GitRepo's namespace with the credential for
	// the chart repositories that fleet.yaml files name: username, password, and
	// cacerts (a PEM CA), each optional. The credential goes only to repositories
	// HelmRepoURLRegex matches.
	// +optional
	HelmSecretName string `json:"helmSecretName,omitempty"`
	// HelmRepoURLRegex names the chart repositories HelmSecretName's credential may
	// be sent to: it must match a chart's URL from its start through its host and
	// port. Without it the credential is sent nowhere (a fleet.yaml can name any
	// server).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	HelmRepoURLRegex string `json:"helmRepoURLRegex,omitempty"`
	// WebhookSecret is a Secret in the GitRepo's namespace holding the secret its
	// push events are signed with, under the provider's key (github, gitlab, gitea,
	// bitbucket); without it, the hub's gitjob-webhook Secret's.
	// +optional
	WebhookSecret string `json:"webhookSecret,omitempty"`
	// Bundles, when set, are the only folders read, each as one Bundle (no search
	// below it); Paths is then not used.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	Bundles []BundlePath `json:"bundles,omitempty"`
	// CABundle is the PEM CA of the repository's server, if not a trusted one.
	// +optional
	CABundle []byte `json:"caBundle,omitempty"`
	// InsecureSkipTLSverify does not check the server's certificate.
	// +optional
	InsecureSkipTLSverify bool `json:"insecureSkipTLSVerify,omitempty"`
}

// BundlePath is one folder of a GitRepo read as one Bundle.
type BundlePath struct {
	// Base is the folder, relative to the repository's root.
	// +optional
	Base string `json:"base,omitempty"`
	// Options is the file in Base to read instead of fleet.yaml (e.g.
	// fleet-prod.yaml); the Bundle's name ends with its name, without extension.
	// +optional
	// +nullable
	Options string `json:"options,omitempty"`
}

// GitTarget is a cluster, or clusters, the GitRepo's Bundles go to.
type GitTarget struct {
	// Name of the target.
	// +optional
	Name string `json:"name,omitempty"`
	// ClusterName is a Cluster of the GitRepo's namespace.
	// +optional
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector matches Clusters by label.
	// +optional
	// +nullable
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup is a ClusterGroup of the GitRepo's namespace.
	// +optional
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector matches ClusterGroups by label.
	// +optional
	// +nullable
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// GitRepoStatus is the commit a GitRepo deployed and the state of its Bundles.
type GitRepoStatus struct {
	// ObservedGeneration is the generation of the spec last acted on.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration"`
	// UpdateGeneration is the forceSyncGeneration last acted on.
	// +optional
	UpdateGeneration int64 `json:"updateGeneration,omitempty"`
	// Commit is the commit whose Bundles were last written.
	// +optional
	Commit string `json:"commit,omitempty"`
	// WebhookCommit is the commit the last verified push event named; a commit
	// other than Commit makes the hub look at the repository at once.
	// +optional
	WebhookCommit string `json:"webhookCommit,omitempty"`
	// LastWebhookTime is when the last verified push event came.
	// +optional
	LastWebhookTime metav1.Time `json:"lastWebhookTime,omitempty"`
	// LastPollingTime is when the repository was last looked at.
	// +optional
	LastPollingTime metav1.Time `json:"lastPollingTriggered,omitempty"`
	// Conditions: Ready (its Bundles are), Accepted (the last fetch and read worked;
	// False with the reason they did not).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []Condition `json:"conditions,omitempty"`
	// Summary counts the BundleDeployments of its Bundles by state.
	// +optional
	Summary BundleSummary `json:"summary,omitempty"`
	// Display is what `kubectl get gitrepos` prints.
	// +optional
	Display GitRepoDisplay `json:"display,omitempty"`
}

// GitRepoDisplay holds the printed summary of a GitRepo.
type GitRepoDisplay struct {
	// ReadyBundleDeployments is "ready/desired" over the GitRepo's Bundles.
	// +optional
	ReadyBundleDeployments string `json:"readyBundleDeployments,omitempty"`
	// State is the worst state of its BundleDeployments.
	// +optional
	State string `json:"state,omitempty"`
	// Message explains State.
	// +optional
	Message string `json:"message,omitempty"`
	// Error is true when the last fetch or read failed.
	// +optional
	Error bool `json:"error,omitempty"`
}
