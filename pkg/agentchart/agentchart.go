// Package agentchart is the fleet-agent chart as the hub uses it: loaded from the
// binary, with values built from a Cluster's agent settings. Push deployment and the
// agent bundle both go through here, so there is one definition of what an agent is.
package agentchart

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/yaml"

	"github.com/flotilla/flotilla/charts"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/helmclient"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// Load returns the fleet-agent chart embedded in the binary.
func Load() (*chart.Chart, error) {
	return helmclient.LoadChart(charts.AgentChart, charts.AgentChartDir)
}

// Namespace is the downstream namespace of cluster's agent.
func Namespace(cluster *fleet.Cluster) string {
	if cluster.Spec.AgentNamespace != "" {
		return cluster.Spec.AgentNamespace
	}
	return names.SystemNamespace
}

// Hub is what every agent learns from the hub that deploys it, whatever its Cluster.
type Hub struct {
	// MaxBundleSize is the hub's --max-bundle-size: agents decode Contents, and
	// expand chart archives, within the same limit.
	MaxBundleSize int64
	// ImageRepository and ImageTag, when set, replace the chart's agent image
	// (flotilla/agent at the chart's appVersion): changing them upgrades every agent
	// through its agent bundle.
	ImageRepository, ImageTag string
}

// settings are the parts of a Cluster's spec that shape its agent's Deployment.
type settings struct {
	Namespace      string      `json:"namespace"`
	EnvVars        interface{} `json:"env,omitempty"`
	Tolerations    interface{} `json:"tolerations,omitempty"`
	Affinity       interface{} `json:"affinity,omitempty"`
	Resources      interface{} `json:"resources,omitempty"`
	PrivateRepoURL string      `json:"privateRepoURL,omitempty"`
	HostNetwork    bool        `json:"hostNetwork,omitempty"`
}

func settingsOf(cluster *fleet.Cluster) settings {
	s := settings{Namespace: Namespace(cluster), PrivateRepoURL: cluster.Spec.PrivateRepoURL}
	if len(cluster.Spec.AgentEnvVars) > 0 {
		s.EnvVars = cluster.Spec.AgentEnvVars
	}
	if len(cluster.Spec.AgentTolerations) > 0 {
		s.Tolerations = cluster.Spec.AgentTolerations
	}
	if cluster.Spec.AgentAffinity != nil {
		s.Affinity = cluster.Spec.AgentAffinity
	}
	if cluster.Spec.AgentResources != nil {
		s.Resources = cluster.Spec.AgentResources
	}
	if cluster.Spec.HostNetwork != nil {
		s.HostNetwork = *cluster.Spec.HostNetwork
	}
	return s
}

// SettingsHash changes exactly when the agent settings of cluster do.
func SettingsHash(cluster *fleet.Cluster) string {
	data, _ := json.Marshal(settingsOf(cluster))
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])[:16]
}

// Values are the chart values for cluster's agent. reg, when not nil, adds the
// registration values (a fresh deployment registers; an upgrade keeps the identity).
func Values(cluster *fleet.Cluster, reg *registration.Values, hub Hub) (map[string]interface{}, error) {
	s := settingsOf(cluster)
	v := map[string]interface{}{
		"agentNamespace": s.Namespace,
		"clientID":       cluster.Spec.ClientID,
		"privateRepoURL": s.PrivateRepoURL,
		"hostNetwork":    s.HostNetwork,
	}
	if hub.MaxBundleSize > 0 {
		v["maxBundleSize"] = hub.MaxBundleSize
	}
	if image := imageValues(hub); len(image) > 0 {
		v["image"] = image
	}
	for key, value := range map[string]interface{}{"env": s.EnvVars, "tolerations": s.Tolerations, "affinity": s.Affinity, "resources": s.Resources} {
		if value != nil {
			v[key] = value
		}
	}
	if reg != nil {
		v["token"] = reg.Token
		v["tokenName"] = reg.TokenName
		v["apiServerURL"] = reg.APIServerURL
		v["apiServerCA"] = reg.APIServerCA
		v["clusterNamespace"] = reg.ClusterNamespace
		v["systemRegistrationNamespace"] = reg.SystemRegistrationNamespace
	}
	// Through JSON, so typed Kubernetes values become the plain maps Helm expects.
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := map[string]interface{}{}
	return out, yaml.Unmarshal(data, &out)
}

// imageValues are the chart's image values the hub sets.
func imageValues(hub Hub) map[string]string {
	image := map[string]string{}
	if hub.ImageRepository != "" {
		image["repository"] = hub.ImageRepository
	}
	if hub.ImageTag != "" {
		image["tag"] = hub.ImageTag
	}
	return image
}
