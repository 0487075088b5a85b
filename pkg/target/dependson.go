package target

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
)

// DependencySelector selects, by the labels of BundleDeployments (a Bundle's own,
// less reserved ones, with its name and namespace), the Bundles of bundleNamespace
// that ref names. The hub looks for cycles with it, the agent for the dependencies
// on its cluster. A reference with neither name nor selector, or an invalid selector,
// is an error.
func DependencySelector(ref fleet.BundleRef, bundleNamespace string) (labels.Selector, error) {
	if ref.Name == "" && ref.Selector == nil {
		return nil, fmt.Errorf("neither name nor selector is set")
	}
	ls := &metav1.LabelSelector{}
	if ref.Selector != nil {
		ls = ref.Selector.DeepCopy()
	}
	if ref.Name != "" {
		ls = metav1.AddLabelToSelector(ls, names.BundleNameLabel, ref.Name)
	}
	ls = metav1.AddLabelToSelector(ls, names.BundleNamespaceLabel, bundleNamespace)
	selector, err := metav1.LabelSelectorAsSelector(ls)
	if err != nil {
		return nil, fmt.Errorf("invalid selector: %w", err)
	}
	return selector, nil
}
