package bundle

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/target"
)

// reasonInvalidDependsOn is the Processed reason of a Bundle whose dependsOn cannot
// be met: a reference selecting nothing by construction, or a cycle.
const reasonInvalidDependsOn = "InvalidDependsOn"

// checkDependsOn refuses the dependsOn of bundle that can never be met: a reference
// with neither name nor selector, an invalid selector, or a cycle through the Bundles
// of its namespace (all, bundle among them), which would keep each Bundle of the
// cycle waiting for the others forever. The cycle is named in order.
func checkDependsOn(bundle *fleet.Bundle, all []*fleet.Bundle) error {
	if len(bundle.Spec.DependsOn) == 0 {
		return nil
	}
	for i, ref := range bundle.Spec.DependsOn {
		if _, err := target.DependencySelector(ref, bundle.Namespace); err != nil {
			return fmt.Errorf("spec.dependsOn[%d]: %w", i, err)
		}
	}
	byName := map[string]*fleet.Bundle{bundle.Name: bundle}
	for _, b := range all {
		if b.Namespace == bundle.Namespace && b.Name != bundle.Name && b.DeletionTimestamp == nil {
			byName[b.Name] = b
		}
	}
	sorted := slices.Sorted(maps.Keys(byName))
	labelSets := make(map[string]labels.Set, len(byName))
	for name, b := range byName {
		labelSets[name] = bundleLabels(b)
	}
	// dependencies of a Bundle: the Bundles its references select. A selector does not
	// select the Bundle itself (agents do not wait for it); a name does.
	dependencies := func(b *fleet.Bundle) []string {
		var out []string
		for _, ref := range b.Spec.DependsOn {
			selector, err := target.DependencySelector(ref, bundle.Namespace)
			if err != nil {
				continue
			}
			for _, name := range sorted {
				if (name != b.Name || ref.Name == b.Name) && selector.Matches(labelSets[name]) {
					out = append(out, name)
				}
			}
		}
		return out
	}
	// A depth-first search from bundle for a path back to it.
	visited := map[string]bool{}
	var path []string
	var find func(name string) bool
	find = func(name string) bool {
		for _, dep := range dependencies(byName[name]) {
			if dep == bundle.Name {
				path = append(path, dep)
				return true
			}
			if visited[dep] {
				continue
			}
			visited[dep] = true
			if find(dep) {
				path = append(path, dep)
				return true
			}
		}
		return false
	}
	if find(bundle.Name) {
		path = append(path, bundle.Name)
		slices.Reverse(path)
		return &cycleError{path: path}
	}
	return nil
}

// cycleError is a dependsOn cycle, from the Bundle refused back to it.
type cycleError struct{ path []string }

func (e *cycleError) Error() string {
	return fmt.Sprintf("spec.dependsOn makes a cycle: %s; no Bundle of it could ever deploy", strings.Join(e.path, " → "))
}

// bundleLabels are the labels agents match dependsOn against: those of the Bundle's
// BundleDeployments, which carry the Bundle's own labels but reserved ones, and the
// Bundle's name and namespace.
func bundleLabels(b *fleet.Bundle) labels.Set {
	set := labels.Set{}
	for k, v := range b.Labels {
		if !names.Reserved(k) {
			set[k] = v
		}
	}
	set[names.BundleNameLabel] = b.Name
	set[names.BundleNamespaceLabel] = b.Namespace
	return set
}
