// Package migrate moves a running Fleet hub's objects to a Flotilla hub (hub
// migrate --from): workspaces, ClusterGroups, Clusters, GitRepos and their
// credentials, GitRepoRestrictions, Bundles made by `fleet apply` with their values,
// and ClusterRegistrationTokens; and it moves each registered cluster's agent without
// a person touching the cluster: through the Fleet hub, which deploys Flotilla's agent
// chart over Fleet's agent with the values of a Flotilla token bound to that Cluster.
// The decisions are pure functions (this file); migrate.go talks to the two hubs.
package migrate

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// Action is what the migration does with one object.
type Action string

const (
	// Copy creates the object on the Flotilla hub.
	Copy Action = "copy"
	// Exists leaves an object of that name on the Flotilla hub as it is.
	Exists Action = "exists"
	// Skip leaves the object behind, as Flotilla makes its own (a GitRepo's Bundles,
	// agent bundles) or it is Fleet's bookkeeping.
	Skip Action = "skip"
	// Cannot leaves the object behind, with what a person may do instead.
	Cannot Action = "cannot"
	// MoveAgent re-points the cluster's agent to the Flotilla hub.
	MoveAgent Action = "move agent"
)

// Step is one line of the migration's report.
type Step struct {
	Kind, Namespace, Name string
	Action                Action
	Reason                string
}

func (s Step) String() string {
	name := s.Name
	if s.Namespace != "" {
		name = s.Namespace + "/" + s.Name
	}
	line := fmt.Sprintf("%-11s %-26s %s", s.Action, s.Kind, name)
	if s.Reason != "" {
		line += ": " + s.Reason
	}
	return line
}

// Kinds the migration copies, in the order it copies them: what later kinds name
// (ClusterGroups before the Bundles that target them, Clusters before their agents).
var copied = []string{"clustergroups", "clusters", "gitreporestrictions", "gitrepos", "bundles", "clusterregistrationtokens"}

// Kinds of Fleet that Flotilla does not serve: listed, with what to do instead.
var notServed = map[string]string{
	"bundlenamespacemappings": "Flotilla has no BundleNamespaceMapping: target the Bundles from their own workspace",
	"helmops":                 "Flotilla has no HelmOp: put the chart in a fleet.yaml folder (helm.repo, helm.chart) and hub apply or a GitRepo",
	"imagescans":              "Flotilla does not scan images",
	"schedules":               "Flotilla has no Schedule",
}

func gvr(resource string) schema.GroupVersionResource {
	return fleet.SchemeGroupVersion.WithResource(resource)
}

// fleetSystemNamespaces hold Fleet's own machinery, never a workspace.
var fleetSystemNamespaces = map[string]bool{
	"cattle-fleet-system": true, "cattle-fleet-clusters-system": true, "cattle-fleet-local-system": true,
	"kube-system": true, "kube-public": true, "kube-node-lease": true,
}

// IsWorkspace says whether Fleet namespace ns may be a workspace: not Fleet's system
// namespaces nor a per-cluster namespace (cluster-<workspace>-<cluster>-<hash>).
func IsWorkspace(ns string) bool {
	return !fleetSystemNamespaces[ns] && !strings.HasPrefix(ns, "cluster-")
}

// NonManagedAgentLabel on a Fleet Cluster makes Fleet stop deploying its agent bundle
// there: the migration sets it on the Clusters whose agents it moves.
const NonManagedAgentLabel = "fleet.cattle.io/non-managed-agent"

// MigrationBundle is the name of the Bundle on the Fleet hub that moves the agent of
// cluster: it begins with fleet-agent, which Fleet's agent never uninstalls.
func MigrationBundle(cluster string) string {
	return names.Limit("fleet-agent-to-flotilla-"+cluster, 63)
}

// Decide says what the migration does with obj, a Fleet object of resource, and why.
func Decide(resource string, obj *unstructured.Unstructured, now time.Time) (Action, string) {
	if !IsWorkspace(obj.GetNamespace()) {
		return Skip, "Fleet's own namespace"
	}
	labels := obj.GetLabels()
	switch resource {
	case "clusters":
		if obj.GetNamespace() == "fleet-local" && obj.GetName() == "local" {
			return Cannot, "the Fleet hub's own cluster stays with Fleet; register it with a Flotilla token if it should be managed"
		}
		if ns, _, _ := unstructured.NestedString(obj.Object, "spec", "kubeConfigSecretNamespace"); Imported(obj) && ns != "" && ns != obj.GetNamespace() {
			return Cannot, "its kubeconfig Secret is in namespace " + ns + ": copy it to the Flotilla hub, start the hub with --kubeconfig-secret-namespaces " + ns + " and annotate the Secret " + names.AllowedWorkspacesAnnotation + " (docs/import.md), then run hub migrate again"
		}
	case "bundles":
		switch {
		case labels["fleet.cattle.io/repo-name"] != "":
			return Skip, "made by GitRepo " + labels["fleet.cattle.io/repo-name"] + ", which makes it again on the Flotilla hub"
		case labels["fleet.cattle.io/fleet-helm-name"] != "":
			return Cannot, "made by HelmOp " + labels["fleet.cattle.io/fleet-helm-name"] + ", which Flotilla does not serve"
		case strings.HasPrefix(obj.GetName(), "fleet-agent-to-flotilla-"):
			return Skip, "made by hub migrate to move a cluster's agent"
		case strings.HasPrefix(obj.GetName(), "fleet-agent-"):
			return Skip, "an agent bundle: the Flotilla hub keeps its own for each Cluster"
		}
		if id, _, _ := unstructured.NestedString(obj.Object, "spec", "contentsId"); id != "" {
			return Cannot, "its resources are in Fleet's storage (spec.contentsId " + id + "), not in the Bundle: apply its folder again with hub apply or fleet apply"
		}
	case "clusterregistrationtokens":
		if len(obj.GetOwnerReferences()) > 0 {
			return Skip, "made by Fleet for a Cluster it imports"
		}
		if left, ok := remainingTTL(obj, now); ok && left <= 0 {
			return Skip, "expired"
		}
	}
	return Copy, ""
}

// remainingTTL is how long a ClusterRegistrationToken has left at now, by the expiry
// its status gives; false when it gives none (no ttl, or not yet seen by Fleet).
func remainingTTL(obj *unstructured.Unstructured, now time.Time) (time.Duration, bool) {
	raw, _, _ := unstructured.NestedString(obj.Object, "status", "expires")
	if raw == "" {
		return 0, false
	}
	expires, err := time.Parse(time.RFC3339, raw)
	if err != nil {
		return 0, false
	}
	return expires.Sub(now).Truncate(time.Second), true
}

// droppedMetadata are labels and annotations prefixes of Fleet's bookkeeping, which
// the copy leaves behind.
var droppedMetadata = []string{"fleet.cattle.io/", "objectset.rio.cattle.io/", "kubectl.kubernetes.io/last-applied-configuration", "meta.helm.sh/"}

// filtered is m without Fleet's bookkeeping.
func filtered(m map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		keep := true
		for _, p := range droppedMetadata {
			if strings.HasPrefix(k, p) {
				keep = false
			}
		}
		if keep {
			out[k] = v
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// CopyOf is obj as it is created on the Flotilla hub: its name, namespace, user's
// labels and annotations, and spec; no status, owner, finalizer or server fields. A
// ClusterRegistrationToken's ttl counts from its creation, so a copy gets what is
// left of the original's.
func CopyOf(obj *unstructured.Unstructured, now time.Time) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": obj.GetAPIVersion(),
		"kind":       obj.GetKind(),
	}}
	out.SetName(obj.GetName())
	out.SetNamespace(obj.GetNamespace())
	out.SetLabels(filtered(obj.GetLabels()))
	out.SetAnnotations(filtered(obj.GetAnnotations()))
	if spec, ok := obj.Object["spec"]; ok {
		out.Object["spec"] = runtime.DeepCopyJSONValue(spec)
	}
	if obj.GetKind() == "ClusterRegistrationToken" {
		if left, ok := remainingTTL(obj, now); ok && left > 0 {
			_ = unstructured.SetNestedField(out.Object, left.String(), "spec", "ttl")
		}
	}
	return out
}

// SecretsOf are the Secrets in obj's namespace that obj names and that move with it:
// a Bundle's values behind spec.valuesHash (named after the Bundle, as fleet apply
// writes them), a GitRepo's Git and Helm credentials.
func SecretsOf(resource string, obj *unstructured.Unstructured) []string {
	var out []string
	switch resource {
	case "clusters":
		if Imported(obj) {
			out = append(out, kubeConfigSecret(obj))
		}
	case "bundles":
		if hash, _, _ := unstructured.NestedString(obj.Object, "spec", "valuesHash"); hash != "" {
			out = append(out, obj.GetName())
		}
	case "gitrepos":
		for _, field := range []string{"clientSecretName", "helmSecretName", "helmSecretNameForPaths"} {
			if name, _, _ := unstructured.NestedString(obj.Object, "spec", field); name != "" {
				out = append(out, name)
			}
		}
	}
	return out
}

func kubeConfigSecret(cluster *unstructured.Unstructured) string {
	name, _, _ := unstructured.NestedString(cluster.Object, "spec", "kubeConfigSecret")
	return name
}

// Imported says whether cluster is one the hub imports with a kubeconfig Secret
// (spec.kubeConfigSecret): the Flotilla hub then replaces Fleet's agent itself.
func Imported(cluster *unstructured.Unstructured) bool {
	return kubeConfigSecret(cluster) != ""
}

// ImportedAgentStep is the report of an imported cluster's agent: moved by the
// Flotilla hub, with the kubeconfig Secret copied beside the Cluster.
func ImportedAgentStep(cluster *unstructured.Unstructured) Step {
	return Step{Kind: "Cluster", Namespace: cluster.GetNamespace(), Name: cluster.GetName(), Action: MoveAgent,
		Reason: "imported with kubeconfig Secret " + kubeConfigSecret(cluster) + ": the Flotilla hub deploys its agent there, replacing Fleet's release fleet-agent-" + cluster.GetName()}
}

// MovesAgent says whether the migration re-points cluster's agent through the Fleet
// hub: a Cluster an agent registered (it has a clientID and reported to Fleet) and
// that is not imported.
func MovesAgent(cluster *unstructured.Unstructured) bool {
	if Imported(cluster) {
		return false
	}
	clientID, _, _ := unstructured.NestedString(cluster.Object, "spec", "clientID")
	ns, _, _ := unstructured.NestedString(cluster.Object, "status", "agent", "namespace")
	lastSeen, _, _ := unstructured.NestedString(cluster.Object, "status", "agent", "lastSeen")
	return clientID != "" && (ns != "" || lastSeen != "")
}
