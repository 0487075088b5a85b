package migrate

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	"github.com/flotilla/flotilla/pkg/agentchart"
	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/controllers/agentbundle"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// Hub is one side of a migration.
type Hub struct {
	Kube    kubernetes.Interface
	Dynamic dynamic.Interface
}

// Options shape a migration.
type Options struct {
	// DryRun reports what would move and what cannot, changing nothing on either hub:
	// every object is created on the Flotilla hub with a server-side dry run, so its
	// validation and admission policies judge it.
	DryRun bool
	// AgentTokenTTL is the lifetime of the token bound to each moved Cluster, which
	// its agent registers with on the Flotilla hub.
	AgentTokenTTL time.Duration
	// Wait bounds the wait for the Flotilla hub to write a token's values.
	Wait time.Duration
}

// Run moves what the Fleet hub from has to the Flotilla hub to, reporting each step.
// An object that cannot move is reported, not an error; errors are the hubs' being
// unreachable.
func Run(ctx context.Context, from, to Hub, opts Options, report func(Step)) error {
	now := time.Now()
	for _, resource := range slices.Sorted(maps.Keys(notServed)) {
		why := notServed[resource]
		list, err := from.Dynamic.Resource(gvr(resource)).List(ctx, metav1.ListOptions{})
		if apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return fmt.Errorf("listing %s on the Fleet hub: %w", resource, err)
		}
		for _, obj := range list.Items {
			report(Step{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: Cannot, Reason: why})
		}
	}

	m := &migration{from: from, to: to, opts: opts, report: report, namespaces: map[string]bool{}}
	var agents []*unstructured.Unstructured
	for _, resource := range copied {
		list, err := from.Dynamic.Resource(gvr(resource)).List(ctx, metav1.ListOptions{})
		if err != nil {
			return fmt.Errorf("listing %s on the Fleet hub: %w", resource, err)
		}
		for i := range list.Items {
			obj := &list.Items[i]
			action, reason := Decide(resource, obj, now)
			if action == Copy {
				if action, reason, err = m.copy(ctx, resource, obj, now); err != nil {
					return err
				}
			}
			report(Step{Kind: obj.GetKind(), Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: action, Reason: reason})
			if resource != "clusters" || (action != Copy && action != Exists) {
				continue
			}
			switch {
			case Imported(obj):
				report(ImportedAgentStep(obj))
			case MovesAgent(obj):
				agents = append(agents, obj)
			}
		}
	}
	for _, cluster := range agents {
		if err := m.moveAgent(ctx, cluster); err != nil {
			return err
		}
	}
	return nil
}

type migration struct {
	from, to   Hub
	opts       Options
	report     func(Step)
	namespaces map[string]bool
}

func (m *migration) createOptions() metav1.CreateOptions {
	if m.opts.DryRun {
		return metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}}
	}
	return metav1.CreateOptions{}
}

// ensureNamespace makes the workspace ns on the Flotilla hub, and says whether it
// exists there (a dry run cannot create it, nor check objects in it).
func (m *migration) ensureNamespace(ctx context.Context, ns string) (bool, error) {
	if exists, seen := m.namespaces[ns]; seen {
		return exists, nil
	}
	_, err := m.to.Kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	switch {
	case err == nil:
		m.namespaces[ns] = true
		return true, nil
	case !apierrors.IsNotFound(err):
		return false, fmt.Errorf("reading namespace %s on the Flotilla hub: %w", ns, err)
	}
	_, err = m.to.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, m.createOptions())
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("creating namespace %s on the Flotilla hub: %w", ns, err)
	}
	m.report(Step{Kind: "Namespace", Name: ns, Action: Copy})
	m.namespaces[ns] = !m.opts.DryRun
	return !m.opts.DryRun, nil
}

// copy creates obj's copy, and the Secrets it names, on the Flotilla hub.
func (m *migration) copy(ctx context.Context, resource string, obj *unstructured.Unstructured, now time.Time) (Action, string, error) {
	exists, err := m.ensureNamespace(ctx, obj.GetNamespace())
	if err != nil {
		return "", "", err
	}
	target := m.to.Dynamic.Resource(gvr(resource)).Namespace(obj.GetNamespace())
	if exists {
		if _, err := target.Get(ctx, obj.GetName(), metav1.GetOptions{}); err == nil {
			return Exists, "already on the Flotilla hub, left as it is", nil
		} else if !apierrors.IsNotFound(err) {
			return "", "", fmt.Errorf("reading %s %s/%s on the Flotilla hub: %w", obj.GetKind(), obj.GetNamespace(), obj.GetName(), err)
		}
	}
	for _, secret := range SecretsOf(resource, obj) {
		if why := m.copySecret(ctx, obj.GetNamespace(), secret, exists); why != "" {
			return Cannot, why, nil
		}
	}
	if !exists {
		// Nothing to judge it against yet: the dry run creates no namespace.
		return Copy, "", nil
	}
	if _, err := target.Create(ctx, CopyOf(obj, now), m.createOptions()); err != nil {
		return Cannot, "the Flotilla hub refuses it: " + err.Error(), nil
	}
	return Copy, "", nil
}

// copySecret copies Secret ns/name, which a copied object names, and says why not
// when it cannot.
func (m *migration) copySecret(ctx context.Context, ns, name string, namespaceExists bool) string {
	secret, err := m.from.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return fmt.Sprintf("its Secret %s/%s cannot be read on the Fleet hub: %v", ns, name, err)
	}
	step := Step{Kind: "Secret", Namespace: ns, Name: name, Action: Copy}
	if namespaceExists {
		if _, err := m.to.Kube.CoreV1().Secrets(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
			step.Action, step.Reason = Exists, "already on the Flotilla hub, left as it is"
			m.report(step)
			return ""
		}
		copied := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: filtered(secret.Labels), Annotations: filtered(secret.Annotations)},
			Type:       secret.Type,
			Data:       secret.Data,
		}
		if _, err := m.to.Kube.CoreV1().Secrets(ns).Create(ctx, copied, m.createOptions()); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Sprintf("the Flotilla hub refuses its Secret %s/%s: %v", ns, name, err)
		}
	}
	m.report(step)
	return ""
}

// moveAgent re-points the agent of cluster (copied to the Flotilla hub) to the
// Flotilla hub: a token bound to the Cluster there; on the Fleet hub, a Bundle for
// that cluster alone that upgrades Fleet's agent's fleet-agent release to Flotilla's
// agent chart with the token's values, and the label that makes Fleet stop deploying
// its own agent bundle there. Flotilla's agent registers with the token as the same
// Cluster (same name and clientID), binding its key.
func (m *migration) moveAgent(ctx context.Context, obj *unstructured.Unstructured) error {
	step := Step{Kind: "Cluster", Namespace: obj.GetNamespace(), Name: obj.GetName(), Action: MoveAgent}
	if m.opts.DryRun {
		step.Reason = "the Fleet hub deploys Flotilla's agent over its fleet-agent release, with a token bound to the Cluster on the Flotilla hub"
		m.report(step)
		return nil
	}
	var cluster fleet.Cluster
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(obj.Object, &cluster); err != nil {
		step.Action, step.Reason = Cannot, "its spec cannot be read: "+err.Error()
		m.report(step)
		return nil
	}
	values, err := m.boundToken(ctx, &cluster)
	if err != nil {
		return err
	}
	bundle, err := migrationBundleFor(&cluster, values)
	if err != nil {
		return err
	}
	bundles := m.from.Dynamic.Resource(gvr("bundles")).Namespace(cluster.Namespace)
	if _, err := bundles.Create(ctx, bundle, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		existing, getErr := bundles.Get(ctx, bundle.GetName(), metav1.GetOptions{})
		if getErr != nil {
			return fmt.Errorf("reading Bundle %s/%s on the Fleet hub: %w", cluster.Namespace, bundle.GetName(), getErr)
		}
		existing.Object["spec"] = bundle.Object["spec"]
		if _, err := bundles.Update(ctx, existing, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("updating Bundle %s/%s on the Fleet hub: %w", cluster.Namespace, bundle.GetName(), err)
		}
	} else if err != nil {
		return fmt.Errorf("creating Bundle %s/%s on the Fleet hub: %w", cluster.Namespace, bundle.GetName(), err)
	}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": map[string]string{NonManagedAgentLabel: "true"}}})
	if _, err := m.from.Dynamic.Resource(gvr("clusters")).Namespace(cluster.Namespace).Patch(ctx, cluster.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("labelling Cluster %s/%s %s on the Fleet hub: %w", cluster.Namespace, cluster.Name, NonManagedAgentLabel, err)
	}
	step.Reason = fmt.Sprintf("Bundle %s on the Fleet hub deploys Flotilla's agent there, registering with token %s", bundle.GetName(), values.TokenName)
	m.report(step)
	return nil
}

// boundToken makes (or finds) the token bound to cluster on the Flotilla hub and
// returns its values once the hub has written them.
func (m *migration) boundToken(ctx context.Context, cluster *fleet.Cluster) (registration.Values, error) {
	name := names.Limit("migrate-"+cluster.Name, 63)
	tokens := m.to.Dynamic.Resource(gvr("clusterregistrationtokens")).Namespace(cluster.Namespace)
	token := &unstructured.Unstructured{Object: map[string]interface{}{"apiVersion": fleet.SchemeGroupVersion.String(), "kind": "ClusterRegistrationToken"}}
	token.SetName(name)
	token.SetNamespace(cluster.Namespace)
	token.SetLabels(map[string]string{names.ClusterLabel: cluster.Name})
	if m.opts.AgentTokenTTL > 0 {
		_ = unstructured.SetNestedField(token.Object, m.opts.AgentTokenTTL.String(), "spec", "ttl")
	}
	if _, err := tokens.Create(ctx, token, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return registration.Values{}, fmt.Errorf("creating ClusterRegistrationToken %s/%s on the Flotilla hub: %w", cluster.Namespace, name, err)
	}
	var values registration.Values
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, m.opts.Wait, true, func(ctx context.Context) (bool, error) {
		t, err := tokens.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		secretName, _, _ := unstructured.NestedString(t.Object, "status", "secretName")
		if secretName == "" {
			return false, nil
		}
		s, err := m.to.Kube.CoreV1().Secrets(cluster.Namespace).Get(ctx, secretName, metav1.GetOptions{})
		if err != nil || len(s.Data[registration.ValuesKey]) == 0 {
			return false, nil
		}
		return true, yaml.Unmarshal(s.Data[registration.ValuesKey], &values)
	})
	if err != nil {
		return values, fmt.Errorf("the Flotilla hub has not written the values of ClusterRegistrationToken %s/%s within %s (is it running?): %w", cluster.Namespace, name, m.opts.Wait, err)
	}
	return values, nil
}

// migrationBundleFor is the Bundle, on the Fleet hub, that deploys Flotilla's agent
// chart to cluster as its fleet-agent release, taking over the objects of Fleet's
// agent, with the registration values of a token bound to the Cluster.
func migrationBundleFor(cluster *fleet.Cluster, values registration.Values) (*unstructured.Unstructured, error) {
	chartValues, err := agentchart.Values(cluster, &values, agentchart.Hub{})
	if err != nil {
		return nil, err
	}
	resources, err := agentbundle.ChartResources()
	if err != nil {
		return nil, err
	}
	b := &fleet.Bundle{
		TypeMeta:   metav1.TypeMeta{APIVersion: fleet.SchemeGroupVersion.String(), Kind: "Bundle"},
		ObjectMeta: metav1.ObjectMeta{Name: MigrationBundle(cluster.Name), Namespace: cluster.Namespace},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				DefaultNamespace: agentchart.Namespace(cluster),
				Helm: &fleet.HelmOptions{
					ReleaseName:   names.AgentRelease,
					TakeOwnership: true,
					Values:        &fleet.GenericMap{Data: chartValues},
				},
			},
			Resources: resources,
			Targets:   []fleet.BundleTarget{{Name: "flotilla", ClusterName: cluster.Name}},
		},
	}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(b)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: obj}
	unstructured.RemoveNestedField(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	return u, nil
}
