// Package charts embeds Flotilla's Helm charts, so the hub binary carries the CRDs
// it installs (and, later, the agent chart it deploys) without reading the source tree.
package charts

import "embed"

// HubCRDs holds the CRD manifests of the hub chart, under fleet-like/hub/crds/.
//
//go:embed fleet-like/hub/crds/*.yaml
var HubCRDs embed.FS

// HubCRDDir is the directory of the CRD manifests within HubCRDs.
const HubCRDDir = "fleet-like/hub/crds"

// AgentChart holds the fleet-agent chart, under fleet-like/agent/: the one chart used by
// `helm install`, by the hub's push deployment and by the agent bundle.
//
//go:embed all:fleet-like/agent
var AgentChart embed.FS

// AgentChartDir is the directory of the agent chart within AgentChart.
const AgentChartDir = "fleet-like/agent"
