// Package target decides which Clusters a Bundle deploys to and with which options:
// targets are tried in order and the first that matches a cluster gives it its
// options; targetRestrictions, when present, must also match. It is pure: the bundle
// controller feeds it from its caches.
package target

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Target is one cluster a Bundle deploys to.
type Target struct {
	Cluster *fleet.Cluster
	// TargetName names the Bundle target that matched.
	TargetName string
	// Options are the Bundle's options with the matching target's overrides.
	Options fleet.BundleDeploymentOptions
}

// criteria is what a target or a restriction selects by. Every field that is set
// must match; a criteria with no field set matches no cluster.
type criteria struct {
	clusterName          string
	clusterSelector      *metav1.LabelSelector
	clusterGroup         string
	clusterGroupSelector *metav1.LabelSelector
}

func (c criteria) empty() bool {
	return c.clusterName == "" && c.clusterSelector == nil && c.clusterGroup == "" && c.clusterGroupSelector == nil
}

// matcher evaluates criteria against clusters of one workspace.
type matcher struct {
	groups []*fleet.ClusterGroup
}

func (m matcher) match(c criteria, cluster *fleet.Cluster) (bool, error) {
	if c.empty() {
		return false, nil
	}
	if c.clusterName != "" && c.clusterName != cluster.Name {
		return false, nil
	}
	if c.clusterSelector != nil {
		ok, err := selects(c.clusterSelector, cluster.Labels)
		if err != nil || !ok {
			return false, err
		}
	}
	if c.clusterGroup != "" || c.clusterGroupSelector != nil {
		inGroup := false
		for _, g := range m.groups {
			if c.clusterGroup != "" && g.Name != c.clusterGroup {
				continue
			}
			if c.clusterGroupSelector != nil {
				ok, err := selects(c.clusterGroupSelector, g.Labels)
				if err != nil {
					return false, err
				}
				if !ok {
					continue
				}
			}
			member, err := InGroup(g, cluster)
			if err != nil {
				return false, err
			}
			if member {
				inGroup = true
				break
			}
		}
		if !inGroup {
			return false, nil
		}
	}
	return true, nil
}

// InGroup says whether cluster belongs to group: an empty selector takes every
// Cluster of the group's namespace, a missing one none.
func InGroup(group *fleet.ClusterGroup, cluster *fleet.Cluster) (bool, error) {
	if group.Namespace != cluster.Namespace || group.Spec.Selector == nil {
		return false, nil
	}
	ok, err := selects(group.Spec.Selector, cluster.Labels)
	if err != nil {
		return false, fmt.Errorf("ClusterGroup %s: %w", group.Name, err)
	}
	return ok, nil
}

func selects(selector *metav1.LabelSelector, set map[string]string) (bool, error) {
	s, err := metav1.LabelSelectorAsSelector(selector)
	if err != nil {
		return false, fmt.Errorf("invalid selector: %w", err)
	}
	return s.Matches(labels.Set(set)), nil
}

// Clusters returns the clusters bundle deploys to, in the order given, each with its
// options. An invalid selector is an error that names the target.
func Clusters(bundle *fleet.Bundle, clusters []*fleet.Cluster, groups []*fleet.ClusterGroup) ([]Target, error) {
	m := matcher{groups: groups}
	var out []Target
	for _, cluster := range clusters {
		if cluster.Namespace != bundle.Namespace || cluster.DeletionTimestamp != nil {
			continue
		}
		t, ok, err := m.first(bundle, cluster)
		if err != nil {
			return nil, err
		}
		if !ok {
			continue
		}
		allowed, err := m.allowed(bundle, cluster)
		if err != nil {
			return nil, err
		}
		if allowed {
			out = append(out, t)
		}
	}
	return out, nil
}

// first is the target that gives cluster its options: the first that matches, or with
// targetCustomizationMode AllMatches every one that does, their options merged in
// order (a doNotDeploy in any of them keeps the cluster out).
func (m matcher) first(bundle *fleet.Bundle, cluster *fleet.Cluster) (Target, bool, error) {
	all := bundle.Spec.TargetCustomizationMode == fleet.TargetCustomizationModeAllMatches
	var (
		out     Target
		matched []string
	)
	for i, t := range bundle.Spec.Targets {
		ok, err := m.match(criteria{t.ClusterName, t.ClusterSelector, t.ClusterGroup, t.ClusterGroupSelector}, cluster)
		if err != nil {
			return Target{}, false, fmt.Errorf("target %s: %w", TargetName(i, t.Name), err)
		}
		if !ok {
			continue
		}
		if t.DoNotDeploy {
			return Target{}, false, nil
		}
		if len(matched) == 0 {
			out = Target{Cluster: cluster, Options: bundle.Spec.BundleDeploymentOptions}
		}
		out.Options = Merge(out.Options, t.BundleDeploymentOptions)
		matched = append(matched, TargetName(i, t.Name))
		if !all {
			break
		}
	}
	if len(matched) == 0 {
		return Target{}, false, nil
	}
	out.TargetName = strings.Join(matched, ",")
	return out, true, nil
}

func (m matcher) allowed(bundle *fleet.Bundle, cluster *fleet.Cluster) (bool, error) {
	if len(bundle.Spec.TargetRestrictions) == 0 {
		return true, nil
	}
	for i, r := range bundle.Spec.TargetRestrictions {
		ok, err := m.match(criteria{r.ClusterName, r.ClusterSelector, r.ClusterGroup, r.ClusterGroupSelector}, cluster)
		if err != nil {
			return false, fmt.Errorf("target restriction %s: %w", TargetName(i, r.Name), err)
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// TargetName is a target's name, or "target000", "target001", ... by position.
func TargetName(i int, name string) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("target%03d", i)
}

// SelectsByName lists the cluster names bundle's targets name; SelectsByLabels says
// whether any target or restriction depends on labels or groups, so that only such
// Bundles are looked at again when a cluster's labels or a group change.
func SelectsByName(bundle *fleet.Bundle) []string {
	var out []string
	for _, t := range bundle.Spec.Targets {
		if t.ClusterName != "" {
			out = append(out, t.ClusterName)
		}
	}
	return out
}

// SelectsByLabels: see SelectsByName.
func SelectsByLabels(bundle *fleet.Bundle) bool {
	for _, t := range bundle.Spec.Targets {
		if t.ClusterSelector != nil || t.ClusterGroup != "" || t.ClusterGroupSelector != nil {
			return true
		}
	}
	for _, r := range bundle.Spec.TargetRestrictions {
		if r.ClusterSelector != nil || r.ClusterGroup != "" || r.ClusterGroupSelector != nil {
			return true
		}
	}
	return false
}

// Merge returns base with the options target sets laid over it. Helm values are
// merged key by key (the target's win); maps of labels and annotations likewise;
// every other option the target sets replaces the base's.
func Merge(base, over fleet.BundleDeploymentOptions) fleet.BundleDeploymentOptions {
	out := *base.DeepCopy()
	over = *over.DeepCopy()
	if over.DefaultNamespace != "" {
		out.DefaultNamespace = over.DefaultNamespace
	}
	if over.TargetNamespace != "" {
		out.TargetNamespace = over.TargetNamespace
	}
	if over.Kustomize != nil {
		out.Kustomize = over.Kustomize
	}
	if over.Helm != nil {
		out.Helm = mergeHelm(out.Helm, over.Helm)
	}
	if over.ServiceAccount != "" {
		out.ServiceAccount = over.ServiceAccount
	}
	if over.ForceSyncGeneration != 0 {
		out.ForceSyncGeneration = over.ForceSyncGeneration
	}
	if over.YAML != nil {
		out.YAML = over.YAML
	}
	if over.Diff != nil {
		out.Diff = over.Diff
	}
	if over.KeepResources {
		out.KeepResources = true
	}
	if over.DeleteNamespace {
		out.DeleteNamespace = true
	}
	if len(over.IgnoreOptions.Conditions) > 0 {
		out.IgnoreOptions = over.IgnoreOptions
	}
	if over.CorrectDrift != nil {
		out.CorrectDrift = over.CorrectDrift
	}
	out.NamespaceLabels = mergeStrings(out.NamespaceLabels, over.NamespaceLabels)
	out.NamespaceAnnotations = mergeStrings(out.NamespaceAnnotations, over.NamespaceAnnotations)
	return out
}

func mergeHelm(base, over *fleet.HelmOptions) *fleet.HelmOptions {
	if base == nil {
		return over
	}
	out := *base
	values := out.Values
	// Scalars and lists: the target's replace the base's when set.
	if over.Chart != "" {
		out.Chart = over.Chart
	}
	if over.Repo != "" {
		out.Repo = over.Repo
	}
	if over.ReleaseName != "" {
		out.ReleaseName = over.ReleaseName
	}
	if over.Version != "" {
		out.Version = over.Version
	}
	if over.TimeoutSeconds != 0 {
		out.TimeoutSeconds = over.TimeoutSeconds
	}
	if len(over.ValuesFrom) > 0 {
		out.ValuesFrom = over.ValuesFrom
	}
	if len(over.ValuesFiles) > 0 {
		out.ValuesFiles = over.ValuesFiles
	}
	if over.MaxHistory != 0 {
		out.MaxHistory = over.MaxHistory
	}
	out.Force = out.Force || over.Force
	out.TakeOwnership = out.TakeOwnership || over.TakeOwnership
	out.WaitForJobs = out.WaitForJobs || over.WaitForJobs
	out.Atomic = out.Atomic || over.Atomic
	out.DisablePreProcess = out.DisablePreProcess || over.DisablePreProcess
	out.DisableDNS = out.DisableDNS || over.DisableDNS
	out.SkipSchemaValidation = out.SkipSchemaValidation || over.SkipSchemaValidation
	switch {
	case over.Values == nil:
		out.Values = values
	case values == nil:
		out.Values = over.Values
	default:
		out.Values = &fleet.GenericMap{Data: MergeValues(values.Data, over.Values.Data)}
	}
	return &out
}

// MergeValues merges Helm values: maps key by key, anything else replaced by over.
func MergeValues(base, over map[string]interface{}) map[string]interface{} {
	out := make(map[string]interface{}, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		if bm, ok := out[k].(map[string]interface{}); ok {
			if om, ok := v.(map[string]interface{}); ok {
				out[k] = MergeValues(bm, om)
				continue
			}
		}
		out[k] = v
	}
	return out
}

func mergeStrings(base, over map[string]string) map[string]string {
	if len(over) == 0 {
		return base
	}
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// ContentName is the Content name within a deployment ID.
func ContentName(deploymentID string) string {
	name, _, _ := strings.Cut(deploymentID, ":")
	return name
}

// DeploymentID is "<content name>:<hash of options>": it changes exactly when the
// resources or the options a cluster gets do.
func DeploymentID(contentName string, options fleet.BundleDeploymentOptions) (string, error) {
	raw, err := json.Marshal(options)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(raw)
	return contentName + ":" + hex.EncodeToString(sum[:]), nil
}
