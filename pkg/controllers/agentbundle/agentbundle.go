// Package agentbundle keeps, for every Cluster, the Bundle fleet-agent-<cluster>
// that deploys the cluster's own agent: the agent chart embedded in the hub (stored
// once, as the Content every agent bundle names in spec.contentsId), with the
// Cluster's agent settings as values, targeting that cluster alone. The agent deploys
// it as its existing fleet-agent release, so a cluster never has two agent releases,
// and a change of the Cluster's agent settings rolls the agent.
package agentbundle

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/flotilla/flotilla/charts"
	"github.com/flotilla/flotilla/pkg/agentchart"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/controllers/bundle"
	"github.com/flotilla/flotilla/pkg/controllers/recent"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

type handler struct {
	clusters fleetcontrollers.ClusterController
	bundles  fleetcontrollers.BundleController
	contents fleetcontrollers.ContentController
	// chart is the agent chart as one Content, which every agent bundle names: the
	// chart is stored once, not in each of a thousand Bundles that every write of
	// theirs would decode and encode again.
	chart content.Encoded
	// hub is what agents learn from the hub through their agent bundle.
	hub agentchart.Hub
	// created remembers the agent bundles created, until the cache shows them.
	created recent.Created
}

// Register starts keeping agent bundles. A Cluster change that does not touch its
// agent settings costs a cache read and a comparison, no write.
func Register(ctx context.Context, hub agentchart.Hub, clusters fleetcontrollers.ClusterController, bundles fleetcontrollers.BundleController,
	contents fleetcontrollers.ContentController) error {
	resources, err := ChartResources()
	if err != nil {
		return err
	}
	chart, err := content.Encode(resources)
	if err != nil {
		return err
	}
	h := &handler{clusters: clusters, bundles: bundles, contents: contents, chart: chart, hub: hub}
	clusters.OnChange(ctx, "agent-bundle", h.onChange)
	// An agent bundle changed or deleted by hand is put back.
	bundles.OnChange(ctx, "agent-bundle-owner", func(key string, b *fleet.Bundle) (*fleet.Bundle, error) {
		if b == nil {
			h.created.Forget(key)
			if ns, name, ok := strings.Cut(key, "/"); ok && strings.HasPrefix(name, "fleet-agent-") {
				clusters.Enqueue(ns, strings.TrimPrefix(name, "fleet-agent-"))
			}
			return b, nil
		}
		if cluster := b.Labels[names.AgentBundleLabel]; cluster != "" {
			clusters.Enqueue(b.Namespace, cluster)
		}
		return b, nil
	})
	return nil
}

// ChartResources are the agent chart's files as Bundle resources, sorted by name so
// that every agent bundle shares one Content.
func ChartResources() ([]fleet.BundleResource, error) {
	var out []fleet.BundleResource
	err := fs.WalkDir(charts.AgentChart, charts.AgentChartDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(charts.AgentChart, p)
		if err != nil {
			return err
		}
		rel := strings.TrimPrefix(p, path.Clean(charts.AgentChartDir)+"/")
		out = append(out, fleet.BundleResource{Name: rel, Content: string(data)})
		return nil
	})
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, err
}

// maxMoveValues bounds the registration values a moving Cluster carries.
const maxMoveValues = 16 << 10

// MoveValues are the registration values of the hub cluster is moving to (its
// names.MoveToAnnotation), or nil when it is not moving.
func MoveValues(cluster *fleet.Cluster) (*registration.Values, error) {
	raw := cluster.Annotations[names.MoveToAnnotation]
	if raw == "" {
		return nil, nil
	}
	if len(raw) > maxMoveValues {
		return nil, fmt.Errorf("annotation %s is %d bytes, more than the %d registration values take", names.MoveToAnnotation, len(raw), maxMoveValues)
	}
	var values registration.Values
	if err := json.Unmarshal([]byte(raw), &values); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", names.MoveToAnnotation, err)
	}
	if err := values.Validate(); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", names.MoveToAnnotation, err)
	}
	return &values, nil
}

// Desired is the agent bundle of cluster, naming the agent chart's Content chart.
// For a Cluster moving to another hub it also carries that hub's registration
// values: deployed, they make the agent register there.
func Desired(cluster *fleet.Cluster, chart string, hub agentchart.Hub) (*fleet.Bundle, error) {
	move, err := MoveValues(cluster)
	if err != nil {
		return nil, err
	}
	values, err := agentchart.Values(cluster, move, hub)
	if err != nil {
		return nil, err
	}
	namespace := agentchart.Namespace(cluster)
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{
			Name:       names.AgentBundle(cluster.Name),
			Namespace:  cluster.Namespace,
			Labels:     map[string]string{names.ManagedLabel: "true", names.AgentBundleLabel: cluster.Name},
			Finalizers: []string{names.BundleFinalizer},
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: fleet.SchemeGroupVersion.String(), Kind: "Cluster", Name: cluster.Name, UID: cluster.UID,
			}},
		},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				DefaultNamespace: namespace,
				Helm: &fleet.HelmOptions{
					ReleaseName: names.AgentRelease,
					Values:      &fleet.GenericMap{Data: values},
					// The agent's Helm operation must end before the agent restarts.
					TimeoutSeconds: 60,
				},
			},
			ContentsID: chart,
			Targets:    []fleet.BundleTarget{{Name: "agent", ClusterName: cluster.Name}},
		},
	}, nil
}

func (h *handler) onChange(_ string, cluster *fleet.Cluster) (*fleet.Cluster, error) {
	if cluster == nil || cluster.DeletionTimestamp != nil {
		return cluster, nil
	}
	want, err := Desired(cluster, h.chart.Name, h.hub)
	if err != nil {
		return cluster, fmt.Errorf("agent bundle of Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	// The chart's Content first, so that the Bundle names one that exists (it may
	// have been deleted as unused while the hub had no cluster).
	if err := bundle.EnsureContent(h.contents, h.chart); err != nil {
		return cluster, err
	}
	key := want.Namespace + "/" + want.Name
	have, err := h.bundles.Cache().Get(want.Namespace, want.Name)
	if apierrors.IsNotFound(err) {
		if h.created.Has(key) {
			// Created a moment ago; look again should the cache never show it.
			h.clusters.EnqueueAfter(cluster.Namespace, cluster.Name, recent.Trust)
			return cluster, nil
		}
		if _, err := h.bundles.Create(want); err != nil && !apierrors.IsAlreadyExists(err) {
			return cluster, fmt.Errorf("creating agent bundle %s/%s: %w", want.Namespace, want.Name, err)
		}
		h.created.Mark(key)
		return cluster, nil
	}
	h.created.Forget(key)
	if err != nil {
		return cluster, err
	}
	if sameSpec(have.Spec, want.Spec) && have.Labels[names.AgentBundleLabel] == cluster.Name {
		return cluster, nil
	}
	updated := have.DeepCopy()
	updated.Spec = want.Spec
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	for k, v := range want.Labels {
		updated.Labels[k] = v
	}
	updated.OwnerReferences = want.OwnerReferences
	if _, err := h.bundles.Update(updated); err != nil {
		return cluster, fmt.Errorf("updating agent bundle %s/%s: %w", want.Namespace, want.Name, err)
	}
	return cluster, nil
}

// sameSpec compares Bundle specs in the form the API stores them, JSON: the Helm values
// of a Bundle read back from the API are decoded from JSON, and their Go types need not
// be those Desired builds, which DeepEqual would count as a change.
func sameSpec(a, b fleet.BundleSpec) bool {
	ja, errA := json.Marshal(a)
	jb, errB := json.Marshal(b)
	return errA == nil && errB == nil && bytes.Equal(ja, jb)
}
