// Package cachetrim keeps the hub's informer caches small: with a thousand clusters
// they hold thousands of objects, and every object's managedFields, which the hub
// never reads, can be the larger part of it.
package cachetrim

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"
)

// Transform is an informer transform: it drops an object's managedFields (writes
// from the cached copy leave them nil, which the API server reads as "unchanged").
func Transform(obj any) (any, error) {
	if accessor, ok := obj.(metav1.Object); ok {
		accessor.SetManagedFields(nil)
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
