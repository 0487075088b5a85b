// Package cachetrim keeps the hub's informer caches small. With a thousand clusters
// the caches hold a thousand agent bundles, each carrying the whole agent chart, and
// every object's managedFields, which the hub never reads.
package cachetrim

import (
	"fmt"
	"unique"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// Transform is an informer transform: it drops an object's managedFields (writes
// from the cached copy leave them nil, which the API server reads as "unchanged"),
// and makes the files of Bundles share one copy of each distinct text, so that the
// agent bundles of all clusters hold the agent chart once.
func Transform(obj any) (any, error) {
	if accessor, ok := obj.(metav1.Object); ok {
		accessor.SetManagedFields(nil)
	}
	if bundle, ok := obj.(*fleet.Bundle); ok {
		for i := range bundle.Spec.Resources {
			r := &bundle.Spec.Resources[i]
			r.Name = unique.Make(r.Name).Value()
			r.Content = unique.Make(r.Content).Value()
		}
	}
	return obj, nil
}

// Apply sets Transform on informers, before they start.
func Apply(informers ...cache.SharedIndexInformer) error {
	for _, informer := range informers {
		if err := informer.SetTransform(Transform); err != nil {
			return fmt.Errorf("trimming an informer cache: %w", err)
		}
	}
	return nil
}
