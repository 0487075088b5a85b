// Package crds installs or updates the fleet.cattle.io CustomResourceDefinitions that
// the hub binary embeds, and waits until the API server serves them.
package crds

import (
	"context"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/sirupsen/logrus"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"

	"github.com/flotilla/flotilla/charts"
)

// Embedded returns the CRDs the hub binary carries, sorted by file name.
func Embedded() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := fs.ReadDir(charts.HubCRDs, charts.HubCRDDir)
	if err != nil {
		return nil, err
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, e := range entries {
		data, err := fs.ReadFile(charts.HubCRDs, path.Join(charts.HubCRDDir, e.Name()))
		if err != nil {
			return nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(data, crd); err != nil {
			return nil, fmt.Errorf("embedded CRD %s: %w", e.Name(), err)
		}
		out = append(out, crd)
	}
	return out, nil
}

// Apply creates each embedded CRD or updates it to the embedded version, then waits
// until all are Established. Running it on every start keeps an existing cluster's
// CRDs at the hub's version.
func Apply(ctx context.Context, cfg *rest.Config) error {
	want, err := Embedded()
	if err != nil {
		return err
	}
	client, err := clientset.NewForConfig(cfg)
	if err != nil {
		return err
	}
	crdClient := client.ApiextensionsV1().CustomResourceDefinitions()
	for _, crd := range want {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			existing, err := crdClient.Get(ctx, crd.Name, metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				_, err = crdClient.Create(ctx, crd, metav1.CreateOptions{})
				if err == nil {
					logrus.WithField("crd", crd.Name).Info("Installed CRD")
				}
				return err
			}
			if err != nil {
				return err
			}
			updated := existing.DeepCopy()
			updated.Spec = crd.Spec
			updated.Labels = crd.Labels
			updated.Annotations = crd.Annotations
			_, err = crdClient.Update(ctx, updated, metav1.UpdateOptions{})
			return err
		})
		if err != nil {
			return fmt.Errorf("installing CRD %s: %w", crd.Name, err)
		}
	}
	for _, crd := range want {
		err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			got, err := crdClient.Get(ctx, crd.Name, metav1.GetOptions{})
			if err != nil {
				return false, err
			}
			for _, cond := range got.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					return true, nil
				}
			}
			return false, nil
		})
		if err != nil {
			return fmt.Errorf("waiting for CRD %s to be established: %w", crd.Name, err)
		}
	}
	return nil
}
