package bundle

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/target"
)

// contentGrace is how long an unreferenced Content is kept: a Bundle writes its
// Content before the BundleDeployments that refer to it.
const contentGrace = time.Minute

// recountAfter batches the recounts of a Content's references: while a thousand
// clusters register, their agent bundles' BundleDeployments all refer to one Content,
// and its referenceCount, which only informs, is written every recountAfter at most.
const recountAfter = 10 * time.Second

type contentHandler struct {
	contents    fleetcontrollers.ContentController
	deployments fleetcontrollers.BundleDeploymentCache
	bundles     fleetcontrollers.BundleCache
	now         func() time.Time
}

// RegisterContents keeps each Content's reference count and deletes Contents that no
// BundleDeployment has used, and no Bundle's contentsId has named, for contentGrace.
// The deployments cache must carry the ByContent index (AddIndexers) and the bundles
// cache the ByContentsID index (Register).
func RegisterContents(ctx context.Context, contents fleetcontrollers.ContentController, deployments fleetcontrollers.BundleDeploymentController,
	bundles fleetcontrollers.BundleCache) {
	h := &contentHandler{contents: contents, deployments: deployments.Cache(), bundles: bundles, now: time.Now}
	contents.OnChange(ctx, "content-gc", h.onChange)
	// References change as BundleDeployments do; batch the recounts.
	deployments.OnChange(ctx, "content-references", func(_ string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
		if bd != nil {
			if name := target.ContentName(bd.Spec.DeploymentID); name != "" {
				contents.EnqueueAfter(name, recountAfter)
			}
		}
		return bd, nil
	})
}

func (h *contentHandler) onChange(_ string, c *fleet.Content) (*fleet.Content, error) {
	if c == nil || c.DeletionTimestamp != nil || c.Labels[names.ManagedLabel] != "true" {
		return c, nil
	}
	refs, err := h.deployments.GetByIndex(ByContent, c.Name)
	if err != nil {
		return c, err
	}
	named, err := h.bundles.GetByIndex(ByContentsID, c.Name)
	if err != nil {
		return c, err
	}
	if len(refs) == 0 && len(named) == 0 {
		if age := h.now().Sub(c.CreationTimestamp.Time); age < contentGrace {
			h.contents.EnqueueAfter(c.Name, contentGrace-age+time.Second)
			return c, nil
		}
		err := h.contents.Delete(c.Name, &metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &c.ResourceVersion}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			return c, err
		}
		logrus.WithField("content", c.Name).Info("Deleted a Content no BundleDeployment uses")
		return c, nil
	}
	if c.Status.ReferenceCount == len(refs) {
		return c, nil
	}
	updated := c.DeepCopy()
	updated.Status.ReferenceCount = len(refs)
	return h.contents.UpdateStatus(updated)
}

// EnsureContent creates the Content of encoded unless the cache already has it.
func EnsureContent(contents fleetcontrollers.ContentController, encoded content.Encoded) error {
	if _, err := contents.Cache().Get(encoded.Name); err == nil {
		return nil
	}
	data, err := encoded.Gzip()
	if err != nil {
		return fmt.Errorf("compressing Content %s: %w", encoded.Name, err)
	}
	_, err = contents.Create(&fleet.Content{
		ObjectMeta: metav1.ObjectMeta{Name: encoded.Name, Labels: map[string]string{names.ManagedLabel: "true"}},
		Content:    data,
		SHA256Sum:  encoded.SHA256,
	})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating Content %s: %w", encoded.Name, err)
	}
	return nil
}
