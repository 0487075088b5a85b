// Package bundle is the Bundle controller: it stores a Bundle's resources once as a
// Content, writes one BundleDeployment per target cluster into that cluster's
// namespace (and removes those of clusters no longer targeted), and folds the
// BundleDeployments' states back into the Bundle's status.
package bundle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlestate"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/controllers/clusterns"
	"github.com/flotilla/flotilla/pkg/controllers/statuspatch"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/target"
)

// Cache indexes this package adds.
const (
	// ByBundle indexes BundleDeployments by "<bundle namespace>/<bundle name>".
	ByBundle = "flotilla.bundleDeploymentsByBundle"
	// ByContent indexes BundleDeployments by the Content they deploy.
	ByContent = "flotilla.bundleDeploymentsByContent"
	// ByContentsID indexes Bundles by the Content their spec.contentsId names.
	ByContentsID = "flotilla.bundlesByContentsID"
	// byTargetName indexes Bundles by "<namespace>/<cluster name>" of clusters their
	// targets name, and byLabelTargets by namespace when a target selects by labels.
	byTargetName   = "flotilla.bundlesByTargetName"
	byLabelTargets = "flotilla.bundlesByLabelTargets"
	// byDependsOn indexes Bundles with a dependsOn by namespace.
	byDependsOn = "flotilla.bundlesByDependsOn"
)

// Settings of the Bundle controller.
type Settings struct {
	// MaxSize bounds what a Bundle's resources decode to (--max-bundle-size).
	MaxSize int64
}

// Sources are what the Bundle controller reads, watches and writes.
type Sources struct {
	Bundles     fleetcontrollers.BundleController
	Deployments fleetcontrollers.BundleDeploymentController
	Contents    fleetcontrollers.ContentController
	Clusters    fleetcontrollers.ClusterController
	Groups      fleetcontrollers.ClusterGroupController
	Policies    fleetcontrollers.PolicyController
	// Secrets reads the values Secrets of Bundles with spec.valuesHash.
	Secrets typedcorev1.SecretsGetter
	Events  record.EventRecorder
}

type handler struct {
	settings    Settings
	bundles     fleetcontrollers.BundleController
	deployments fleetcontrollers.BundleDeploymentController
	contents    fleetcontrollers.ContentController
	clusters    fleetcontrollers.ClusterCache
	groups      fleetcontrollers.ClusterGroupCache
	policies    fleetcontrollers.PolicyCache
	events      record.EventRecorder
	// secrets reads the values Secrets of Bundles with spec.valuesHash.
	secrets typedcorev1.SecretsGetter

	// seen remembers what of each cluster targeting depends on, so that a heartbeat
	// (a status change) does not make every Bundle of the workspace look again.
	mu   sync.Mutex
	seen map[string]string
	// graph remembers, by "<namespace>/<name>", what of each Bundle the dependsOn of
	// others can select (its labels) and its own dependsOn, so that the Bundles with a
	// dependsOn look for cycles again only when that changes.
	graph map[string]string
	// patches spaces the Bundles' status patches (see statuspatch.Limiter).
	patches statuspatch.Limiter
	// written is each Bundle's status as last patched, until the cache shows it.
	written statuspatch.Written[fleet.BundleStatus]
	// measured is, by "<namespace>/<name>", what each Bundle's inline resources were
	// found to be (a measurement): decoding them to measure them and encoding them
	// to name their Content are the costly part of a reconcile, and a Bundle is
	// reconciled again with every change of a cluster it selects by labels.
	measured sync.Map
}

// measurement is what a Bundle's inline resources were found to be, at one
// generation of one Bundle object.
type measurement struct {
	uid          types.UID
	generation   int64
	name, sha256 string
	// err is the refusal of resources the hub does not store.
	err error
}

// holdsFor says whether m still says what bundle's resources are: they change only
// with its generation (which the API server counts from 1).
func (m measurement) holdsFor(bundle *fleet.Bundle) bool {
	return bundle.Generation > 0 && m.uid == bundle.UID && m.generation == bundle.Generation
}

// Register starts handling Bundles, and watches Clusters, ClusterGroups, Policies and
// BundleDeployments for changes that affect them.
func Register(ctx context.Context, settings Settings, src Sources) {
	if settings.MaxSize <= 0 {
		settings.MaxSize = content.DefaultMaxSize
	}
	bundles, deployments, contents, clusters, groups := src.Bundles, src.Deployments, src.Contents, src.Clusters, src.Groups
	h := &handler{settings: settings, bundles: bundles, deployments: deployments, contents: contents, clusters: clusters.Cache(), groups: groups.Cache(),
		policies: src.Policies.Cache(), secrets: src.Secrets, events: src.Events, seen: map[string]string{}, graph: map[string]string{},
		patches: statuspatch.Limiter{First: statuspatch.NewObjectWait}}
	AddIndexers(deployments.Cache())
	bundles.Cache().AddIndexer(byTargetName, func(b *fleet.Bundle) ([]string, error) {
		var keys []string
		for _, name := range target.SelectsByName(b) {
			keys = append(keys, b.Namespace+"/"+name)
		}
		return keys, nil
	})
	bundles.Cache().AddIndexer(byLabelTargets, func(b *fleet.Bundle) ([]string, error) {
		if target.SelectsByLabels(b) {
			return []string{b.Namespace}, nil
		}
		return nil, nil
	})
	bundles.Cache().AddIndexer(byDependsOn, func(b *fleet.Bundle) ([]string, error) {
		if len(b.Spec.DependsOn) == 0 {
			return nil, nil
		}
		return []string{b.Namespace}, nil
	})
	bundles.Cache().AddIndexer(ByContentsID, func(b *fleet.Bundle) ([]string, error) {
		if b.Spec.ContentsID == "" {
			return nil, nil
		}
		return []string{b.Spec.ContentsID}, nil
	})
	contents.OnChange(ctx, "bundle-contents", func(name string, c *fleet.Content) (*fleet.Content, error) {
		if c == nil {
			return nil, nil
		}
		// Bundles waiting for this Content can now deploy; the others are unaffected
		// (a Content changes only its reference count).
		waiting, err := bundles.Cache().GetByIndex(ByContentsID, name)
		if err != nil {
			return c, err
		}
		for _, b := range waiting {
			if cond := conditions.Get(b.Status.Conditions, fleet.ConditionProcessed); cond != nil && cond.Reason == reasonContentNotFound {
				bundles.Enqueue(b.Namespace, b.Name)
			}
		}
		return c, nil
	})
	bundles.OnChange(ctx, "bundle", h.onChange)
	bundles.OnRemove(ctx, names.BundleCleanup, h.onRemove)
	src.Policies.OnChange(ctx, "bundle-policies", func(key string, p *fleet.Policy) (*fleet.Policy, error) {
		// Every Bundle of the namespace may now be allowed, or not.
		namespace, _, _ := strings.Cut(key, "/")
		list, err := bundles.Cache().List(namespace, labels.Everything())
		for _, b := range list {
			bundles.Enqueue(b.Namespace, b.Name)
		}
		return p, err
	})
	clusters.OnChange(ctx, "bundle-targets-cluster", h.onClusterChange)
	groups.OnChange(ctx, "bundle-targets-group", h.onGroupChange)
	deployments.OnChange(ctx, "bundle-status", h.onDeploymentChange)
}

// AddIndexers adds the ByBundle and ByContent indexes to a BundleDeployment cache.
func AddIndexers(cache fleetcontrollers.BundleDeploymentCache) {
	cache.AddIndexer(ByBundle, func(bd *fleet.BundleDeployment) ([]string, error) {
		ns, name := bd.Labels[names.BundleNamespaceLabel], bd.Labels[names.BundleNameLabel]
		if ns == "" || name == "" {
			return nil, nil
		}
		return []string{ns + "/" + name}, nil
	})
	cache.AddIndexer(ByContent, func(bd *fleet.BundleDeployment) ([]string, error) {
		return []string{target.ContentName(bd.Spec.DeploymentID)}, nil
	})
}

func (h *handler) onChange(key string, bundle *fleet.Bundle) (*fleet.Bundle, error) {
	h.noteDependencies(key, bundle)
	if bundle == nil {
		h.patches.Forget(key)
		h.written.Forget(key)
		return nil, nil
	}
	if bundle.DeletionTimestamp != nil {
		return bundle, nil
	}
	log := logrus.WithField("bundle", bundle.Namespace+"/"+bundle.Name)
	base := h.written.Base(key, bundle.ResourceVersion, bundle.Status)
	status := base.DeepCopy()
	deployments, plan, err := h.deploy(bundle, status, log)
	var refused *refusal
	switch {
	case errors.As(err, &refused):
		// Bad input: say so where the user looks and wait for the Bundle to change.
		if refused.reason == reasonValuesSecretNotFound || refused.reason == reasonValuesSecretMismatch {
			h.bundles.EnqueueAfter(bundle.Namespace, bundle.Name, valuesRetry)
		}
		if conditions.Set(&status.Conditions, fleet.ConditionProcessed, corev1.ConditionFalse, refused.reason, refused.Error()) {
			h.events.Event(bundle, corev1.EventTypeWarning, refused.reason, refused.Error())
		}
		log.WithError(err).Warn("Bundle not deployed")
		// At once: the user is waiting to learn what is wrong.
		return h.updateStatus(bundle, base, status, false)
	case err != nil:
		return bundle, err
	}
	conditions.Set(&status.Conditions, fleet.ConditionProcessed, corev1.ConditionTrue, "", "")
	summarize(status, deployments)
	if h.rolledOut(bundle, status, plan) && plan.NotCreated > 0 {
		// maxNew held some clusters back: their turn comes in the next pass.
		h.bundles.EnqueueAfter(bundle.Namespace, bundle.Name, time.Second)
	}
	status.ObservedGeneration = bundle.Generation
	return h.updateStatus(bundle, base, status, true)
}

// updateStatus patches the Bundle's status from base (see statuspatch.Written) to
// status; limited, at most once a Debounce (see statuspatch.Limiter), except when it
// becomes Ready.
func (h *handler) updateStatus(bundle *fleet.Bundle, base fleet.BundleStatus, status *fleet.BundleStatus, limited bool) (*fleet.Bundle, error) {
	if equality.Semantic.DeepEqual(*status, base) {
		return bundle, nil
	}
	key := bundle.Namespace + "/" + bundle.Name
	wait := h.patches.Wait(key, base.Conditions, status.Conditions)
	if limited && wait > 0 {
		h.bundles.EnqueueAfter(bundle.Namespace, bundle.Name, wait)
		return bundle, nil
	}
	patch, err := statuspatch.For(base, status)
	if err != nil || patch == nil {
		return bundle, err
	}
	updated, err := h.bundles.Patch(bundle.Namespace, bundle.Name, types.MergePatchType, patch, "status")
	if err != nil {
		return bundle, err
	}
	h.written.Remember(key, bundle.ResourceVersion, *status)
	return updated, nil
}

// refusal is a Bundle the hub cannot deploy as written.
type refusal struct {
	reason string
	err    error
}

func (r *refusal) Error() string { return r.err.Error() }

// deploymentWriters is how many of a Bundle's BundleDeployments are written at once.
const deploymentWriters = 16

// reasonContentNotFound is the Processed reason of a Bundle whose contentsId names a
// Content that does not exist.
const reasonContentNotFound = "ContentNotFound"

// reasonContentTooLarge is the Processed reason of a Bundle whose resources decode
// to more than --max-bundle-size.
const reasonContentTooLarge = "ContentTooLarge"

// reasonInvalidTemplate is the Processed reason of a Bundle whose ${ } templated Helm
// values cannot be resolved for a cluster it targets.
const reasonInvalidTemplate = "InvalidTemplate"

// contentRef is the Content a Bundle deploys.
type contentRef struct {
	name, sha256 string
	// inline is set when the Bundle gives its resources inline: the hub stores them
	// as the Content.
	inline *content.Encoded
}

// contentOf resolves the Content of bundle: its inline resources, or the existing
// Content that spec.contentsId names (as every agent bundle does, so that the agent
// chart is stored once rather than in each of them).
func (h *handler) contentOf(bundle *fleet.Bundle) (contentRef, error) {
	id := bundle.Spec.ContentsID
	if id == "" {
		key := bundle.Namespace + "/" + bundle.Name
		if v, ok := h.measured.Load(key); ok {
			if m := v.(measurement); m.holdsFor(bundle) {
				if m.err != nil {
					return contentRef{}, m.err
				}
				// Stored already: nothing to encode again.
				if _, err := h.contents.Cache().Get(m.name); err == nil {
					return contentRef{name: m.name, sha256: m.sha256}, nil
				}
			}
		}
		ref, err := measure(bundle, h.settings.MaxSize)
		m := measurement{uid: bundle.UID, generation: bundle.Generation, name: ref.name, sha256: ref.sha256, err: err}
		h.measured.Store(key, m)
		return ref, err
	}
	if len(bundle.Spec.Resources) > 0 {
		return contentRef{}, &refusal{"InvalidResources", fmt.Errorf("spec.resources and spec.contentsId are both set: give the resources inline or name the Content %q that holds them, not both", id)}
	}
	c, err := h.contents.Cache().Get(id)
	if apierrors.IsNotFound(err) {
		// The cache may not show a Content created a moment ago.
		c, err = h.contents.Get(id, metav1.GetOptions{})
	}
	switch {
	case apierrors.IsNotFound(err):
		// Looked at again when the Content is created (see Register).
		return contentRef{}, &refusal{reasonContentNotFound, fmt.Errorf("spec.contentsId names the Content %q, which does not exist", id)}
	case err != nil:
		return contentRef{}, err
	}
	return contentRef{name: c.Name, sha256: c.SHA256Sum}, nil
}

// measure decodes bundle's inline resources once, as a stream, to measure them (what
// the agents decode), and encodes them for their Content.
func measure(bundle *fleet.Bundle, maxSize int64) (contentRef, error) {
	if _, err := content.Size(bundle.Spec.Resources, maxSize); err != nil {
		var tooLarge *content.TooLargeError
		if errors.As(err, &tooLarge) {
			return contentRef{}, &refusal{reasonContentTooLarge, err}
		}
		return contentRef{}, &refusal{"InvalidResources", err}
	}
	encoded, err := content.Encode(bundle.Spec.Resources)
	if err != nil {
		return contentRef{}, &refusal{"InvalidResources", err}
	}
	return contentRef{name: encoded.Name, sha256: encoded.SHA256, inline: &encoded}, nil
}

// withValues puts back the values of a Bundle that keeps them in a Secret.
func (h *handler) withValues(bundle *fleet.Bundle) (*fleet.Bundle, error) {
	if bundle.Spec.ValuesHash == "" {
		return bundle, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	secret, err := h.secrets.Secrets(bundle.Namespace).Get(ctx, bundle.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		secret = nil
	case err != nil:
		return nil, fmt.Errorf("reading the values Secret %s/%s: %w", bundle.Namespace, bundle.Name, err)
	}
	return withValues(bundle, secret)
}

// rolledOut sets the RolledOut condition and the Rollout column from plan, records
// an event when the rollout starts to wait, and says whether it waits.
func (h *handler) rolledOut(bundle *fleet.Bundle, status *fleet.BundleStatus, plan target.Plan) bool {
	status.NewlyCreated = plan.NewlyCreated
	status.Unavailable = plan.Unavailable
	status.UnavailablePartitions = plan.UnavailablePartitions
	status.MaxUnavailable = plan.MaxUnavailable
	status.MaxUnavailablePartitions = plan.MaxUnavailablePartitions
	status.PartitionStatus = plan.Partitions
	if missing := plan.Targets - status.Summary.DesiredReady; missing > 0 {
		// Clusters that maxNew left without a BundleDeployment yet.
		status.Summary.DesiredReady += missing
		status.Summary.Pending += missing
		status.Display.ReadyClusters = fmt.Sprintf("%d/%d", status.Summary.Ready, status.Summary.DesiredReady)
		if status.Display.State == "" || bundlestate.Worse(fleet.Pending, fleet.BundleState(status.Display.State)) {
			status.Display.State = string(fleet.Pending)
		}
		if conditions.IsTrue(status.Conditions, fleet.ConditionReady) {
			conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, string(fleet.Pending),
				fmt.Sprintf("Pending(%d) [clusters without a BundleDeployment yet: maxNew is reached]", missing))
		}
	}
	if plan.Done() {
		status.Display.Rollout = ""
		conditions.Set(&status.Conditions, fleet.ConditionRolledOut, corev1.ConditionTrue, "", "")
		return false
	}
	reason, word := fleet.RolloutWaiting, "waiting"
	if plan.Released+plan.Paused == plan.Targets {
		reason, word = fleet.RolloutPaused, "paused"
	}
	status.Display.Rollout = fmt.Sprintf("%d/%d released, %s", plan.Released, plan.Targets, word)
	before := conditions.Get(status.Conditions, fleet.ConditionRolledOut)
	wasWaiting := before != nil && before.Reason == reason
	conditions.Set(&status.Conditions, fleet.ConditionRolledOut, corev1.ConditionFalse, reason, plan.Waiting)
	if !wasWaiting && reason == fleet.RolloutWaiting {
		h.events.Event(bundle, corev1.EventTypeNormal, "RolloutWaiting", plan.Waiting)
	}
	return true
}

// deploy writes the Content and the BundleDeployments, and returns the latter and
// the rollout's pass.
func (h *handler) deploy(bundle *fleet.Bundle, status *fleet.BundleStatus, log logrus.FieldLogger) ([]*fleet.BundleDeployment, target.Plan, error) {
	var plan target.Plan
	policies, err := h.policies.List(bundle.Namespace, labels.Everything())
	if err != nil {
		return nil, plan, err
	}
	if err := violatesPolicy(bundle, policies); err != nil {
		return nil, plan, &refusal{reasonPolicyViolation, err}
	}
	if len(bundle.Spec.DependsOn) > 0 {
		all, err := h.bundles.Cache().List(bundle.Namespace, labels.Everything())
		if err != nil {
			return nil, plan, err
		}
		if err := checkDependsOn(bundle, all); err != nil {
			var cycle *cycleError
			if before := conditions.Get(status.Conditions, fleet.ConditionProcessed); errors.As(err, &cycle) && (before == nil || before.Message != err.Error()) {
				// Every Bundle of the cycle is refused, not only the one that closed it;
				// once, so that the Bundles of a cycle do not wake each other forever.
				for _, name := range cycle.path {
					if name != bundle.Name {
						h.bundles.Enqueue(bundle.Namespace, name)
					}
				}
			}
			return nil, plan, &refusal{reasonInvalidDependsOn, err}
		}
	}
	bundle, err = h.withValues(bundle)
	if err != nil {
		return nil, plan, err
	}
	ref, err := h.contentOf(bundle)
	if err != nil {
		return nil, plan, err
	}
	clusters, err := h.clusters.List(bundle.Namespace, labels.Everything())
	if err != nil {
		return nil, plan, err
	}
	groups, err := h.groups.List(bundle.Namespace, labels.Everything())
	if err != nil {
		return nil, plan, err
	}
	targets, err := target.Clusters(bundle, clusters, groups)
	if err != nil {
		return nil, plan, &refusal{"InvalidTargets", err}
	}
	if len(targets) > 0 && ref.inline != nil {
		if err := EnsureContent(h.contents, *ref.inline); err != nil {
			return nil, plan, err
		}
	}
	if old := status.ResourcesSHA256Sum; old != "" && old != ref.sha256 {
		// The old Content may now be unused.
		h.contents.EnqueueAfter(names.Content(old), contentGrace)
	}
	status.ResourcesSHA256Sum = ref.sha256

	existing, err := h.deployments.Cache().GetByIndex(ByBundle, bundle.Namespace+"/"+bundle.Name)
	if err != nil {
		return nil, plan, err
	}
	byNamespace := make(map[string]*fleet.BundleDeployment, len(existing))
	for _, bd := range existing {
		byNamespace[bd.Namespace] = bd
	}
	wants := make([]*fleet.BundleDeployment, len(targets))
	haves := make([]*fleet.BundleDeployment, len(targets))
	staged := make([]target.Staged, len(targets))
	for i, t := range targets {
		templated, err := target.Template(t.Options, t.Cluster)
		if err != nil {
			return nil, plan, &refusal{reasonInvalidTemplate, fmt.Errorf("for Cluster %s: %w", t.Cluster.Name, err)}
		}
		t.Options = templated
		want, err := desired(bundle, t, ref.name)
		if err != nil {
			return nil, plan, &refusal{"InvalidOptions", err}
		}
		wants[i], haves[i] = want, byNamespace[want.Namespace]
		delete(byNamespace, want.Namespace)
		staged[i] = target.Staged{Target: t, DeploymentID: want.Spec.StagedDeploymentID, Deployment: haves[i], Paused: want.Spec.Paused}
	}
	plan, err = target.Rollout(bundle.Spec.RolloutStrategy, groups, staged)
	if err != nil {
		return nil, plan, &refusal{"InvalidRolloutStrategy", err}
	}
	for i, d := range plan.Decisions {
		switch {
		case haves[i] == nil && !d.Create:
			wants[i] = nil
		case d.Release:
		case haves[i] != nil:
			// Staged only: the cluster keeps what it has until the rollout reaches it,
			// with the signature of what it has.
			wants[i].Spec.Options, wants[i].Spec.DeploymentID = haves[i].Spec.Options, haves[i].Spec.DeploymentID
			if sig := haves[i].Annotations[names.SignatureAnnotation]; sig != "" {
				metav1.SetMetaDataAnnotation(&wants[i].ObjectMeta, names.SignatureAnnotation, sig)
			} else {
				delete(wants[i].Annotations, names.SignatureAnnotation)
			}
		default:
			wants[i].Spec.Options, wants[i].Spec.DeploymentID = fleet.BundleDeploymentOptions{}, ""
		}
	}
	// Written side by side: one after the other, a Bundle's thousand targets took a
	// thousand round trips to the API server.
	written := make([]*fleet.BundleDeployment, len(targets))
	writeErrs := make([]error, len(targets))
	workqueue.ParallelizeUntil(context.Background(), deploymentWriters, len(targets), func(i int) {
		if wants[i] != nil {
			written[i], writeErrs[i] = h.write(wants[i], haves[i])
		}
	})
	var (
		out  []*fleet.BundleDeployment
		errs []error
	)
	for i := range targets {
		switch {
		case wants[i] == nil:
		case writeErrs[i] == nil:
			out = append(out, written[i])
		case haves[i] != nil:
			out = append(out, haves[i])
		}
		errs = append(errs, writeErrs[i])
	}
	for _, stale := range byNamespace {
		err := h.deployments.Delete(stale.Namespace, stale.Name, &metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting BundleDeployment %s/%s: %w", stale.Namespace, stale.Name, err))
			continue
		}
		log.WithField("clusterNamespace", stale.Namespace).Info("Cluster no longer targeted; removed its BundleDeployment")
	}
	return out, plan, errors.Join(errs...)
}

// write creates want, or updates have to match it; it leaves the status alone.
func (h *handler) write(want, have *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
	if have == nil {
		bd, err := h.deployments.Create(want)
		if apierrors.IsAlreadyExists(err) {
			// The cache is behind; the next reconcile sees it.
			return nil, fmt.Errorf("BundleDeployment %s/%s exists but is not in the cache yet", want.Namespace, want.Name)
		}
		if err != nil {
			return nil, fmt.Errorf("creating BundleDeployment %s/%s: %w", want.Namespace, want.Name, err)
		}
		return bd, nil
	}
	labels := deploymentLabels(want.Labels, have.Labels)
	signature := want.Annotations[names.SignatureAnnotation]
	if equality.Semantic.DeepEqual(have.Spec, want.Spec) && maps.Equal(labels, have.Labels) && have.Annotations[names.SignatureAnnotation] == signature {
		return have, nil
	}
	updated := have.DeepCopy()
	updated.Spec = want.Spec
	updated.Labels = labels
	if signature == "" {
		delete(updated.Annotations, names.SignatureAnnotation)
	} else {
		metav1.SetMetaDataAnnotation(&updated.ObjectMeta, names.SignatureAnnotation, signature)
	}
	bd, err := h.deployments.Update(updated)
	if err != nil {
		return nil, fmt.Errorf("updating BundleDeployment %s/%s: %w", want.Namespace, want.Name, err)
	}
	return bd, nil
}

// deploymentLabels are the labels a BundleDeployment with labels have should carry:
// want's, and have's others but for reserved ones the hub no longer sets (the Bundle
// stopped being an agent bundle, or they were copied from a Bundle before reserved
// labels were filtered).
func deploymentLabels(want, have map[string]string) map[string]string {
	out := make(map[string]string, len(have)+len(want))
	for k, v := range have {
		if !names.Reserved(k) {
			out[k] = v
		}
	}
	maps.Copy(out, want)
	return out
}

// desired is the BundleDeployment of bundle for one target cluster.
func desired(bundle *fleet.Bundle, t target.Target, contentName string) (*fleet.BundleDeployment, error) {
	id, err := target.DeploymentID(contentName, t.Options)
	if err != nil {
		return nil, err
	}
	lbls := map[string]string{}
	for k, v := range bundle.Labels {
		// The hub's own labels are its to set: a Bundle's could make its
		// BundleDeployments pass for the agent bundle, or for another Bundle's.
		if !names.Reserved(k) {
			lbls[k] = v
		}
	}
	if isAgentBundle(bundle, t.Cluster) {
		lbls[names.AgentBundleLabel] = t.Cluster.Name
	}
	lbls[names.ManagedLabel] = "true"
	lbls[names.BundleNameLabel] = bundle.Name
	lbls[names.BundleNamespaceLabel] = bundle.Namespace
	lbls[names.ClusterLabel] = t.Cluster.Name
	lbls[names.ClusterNamespaceLabel] = t.Cluster.Namespace
	var annotations map[string]string
	if sig := bundle.Annotations[names.SignatureAnnotation]; sig != "" {
		// The author's signature, for agents that deploy only signed Bundles.
		annotations = map[string]string{names.SignatureAnnotation: sig}
	}
	return &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: bundle.Name, Namespace: clusterns.Name(t.Cluster), Labels: lbls, Annotations: annotations},
		Spec: fleet.BundleDeploymentSpec{
			Paused:             bundle.Spec.Paused || t.Cluster.Spec.Paused,
			Options:            t.Options,
			DeploymentID:       id,
			StagedOptions:      t.Options,
			StagedDeploymentID: id,
			DependsOn:          bundle.Spec.DependsOn,
			CorrectDrift:       t.Options.CorrectDrift,
		},
	}, nil
}

// isAgentBundle says whether bundle is the agent bundle the hub keeps for cluster:
// named for it, labelled for it, owned by that very Cluster and targeting it alone.
// Its BundleDeployment is the one the agent deploys as its own release.
func isAgentBundle(bundle *fleet.Bundle, cluster *fleet.Cluster) bool {
	return isAgentBundleShaped(bundle) && bundle.Labels[names.AgentBundleLabel] == cluster.Name && ownedByCluster(bundle, cluster.Name, cluster.UID)
}

// summarize folds deployments into status.
func summarize(status *fleet.BundleStatus, deployments []*fleet.BundleDeployment) {
	var s bundlestate.Summary
	for _, bd := range deployments {
		s.Add(bd.Labels[names.ClusterNamespaceLabel]+"/"+bd.Labels[names.ClusterLabel], bd)
	}
	status.Summary = s.BundleSummary
	status.Unavailable = s.DesiredReady - s.Ready
	status.Display.ReadyClusters = s.ReadyString()
	status.Display.State = string(s.Worst())
	if s.AllReady() {
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, "", "")
	} else {
		conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionFalse, string(s.Worst()), s.NotReadyMessage("Cluster"))
	}
}

// onRemove deletes a Bundle's BundleDeployments: they live in per-cluster namespaces,
// which owner references cannot reach.
func (h *handler) onRemove(_ string, bundle *fleet.Bundle) (*fleet.Bundle, error) {
	h.measured.Delete(bundle.Namespace + "/" + bundle.Name)
	existing, err := h.deployments.Cache().GetByIndex(ByBundle, bundle.Namespace+"/"+bundle.Name)
	if err != nil {
		return bundle, err
	}
	var errs []error
	for _, bd := range existing {
		if err := h.deployments.Delete(bd.Namespace, bd.Name, &metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, err)
		}
	}
	if bundle.Status.ResourcesSHA256Sum != "" {
		h.contents.EnqueueAfter(names.Content(bundle.Status.ResourcesSHA256Sum), contentGrace)
	}
	if bundle.Spec.ContentsID != "" {
		h.contents.EnqueueAfter(bundle.Spec.ContentsID, contentGrace)
	}
	return bundle, errors.Join(errs...)
}

// noteDependencies looks again at the Bundles of bundle's namespace that have a
// dependsOn when what dependsOn can see of bundle changed, or it is gone: a cycle
// may have opened, and its Bundles deploy again. (One that closes is found by the
// Bundle that closes it, which refuses the others.)
func (h *handler) noteDependencies(key string, bundle *fleet.Bundle) {
	fingerprint := ""
	if bundle != nil && bundle.DeletionTimestamp == nil {
		raw, _ := json.Marshal(bundle.Spec.DependsOn)
		fingerprint = labels.Set(bundle.Labels).String() + "|" + string(raw)
	}
	h.mu.Lock()
	before, known := h.graph[key]
	if fingerprint == "" {
		delete(h.graph, key)
	} else {
		h.graph[key] = fingerprint
	}
	h.mu.Unlock()
	if !known || before == fingerprint {
		// A Bundle new to the hub closes no cycle that its own look does not find.
		return
	}
	namespace, _, _ := strings.Cut(key, "/")
	dependents, err := h.bundles.Cache().GetByIndex(byDependsOn, namespace)
	if err != nil {
		return
	}
	for _, b := range dependents {
		if b.Namespace+"/"+b.Name != key {
			h.bundles.Enqueue(b.Namespace, b.Name)
		}
	}
}

// onClusterChange looks again at the Bundles a cluster's change can affect: those
// naming it, and, when its labels or pause changed, those selecting by labels.
func (h *handler) onClusterChange(key string, cluster *fleet.Cluster) (*fleet.Cluster, error) {
	var namespace, name, fingerprint string
	if cluster != nil && cluster.DeletionTimestamp == nil {
		namespace, name = cluster.Namespace, cluster.Name
		fingerprint = fmt.Sprintf("%v|%v", labels.Set(cluster.Labels).String(), cluster.Spec.Paused)
	} else {
		namespace, name, _ = strings.Cut(key, "/")
	}
	h.mu.Lock()
	before, known := h.seen[key]
	if fingerprint == "" {
		delete(h.seen, key)
	} else {
		h.seen[key] = fingerprint
	}
	h.mu.Unlock()
	if known && before == fingerprint {
		return cluster, nil
	}
	h.enqueueBundles(byTargetName, namespace+"/"+name)
	h.enqueueBundles(byLabelTargets, namespace)
	return cluster, nil
}

func (h *handler) onGroupChange(key string, group *fleet.ClusterGroup) (*fleet.ClusterGroup, error) {
	namespace, _, _ := strings.Cut(key, "/")
	h.enqueueBundles(byLabelTargets, namespace)
	return group, nil
}

func (h *handler) enqueueBundles(index, key string) {
	bundles, err := h.bundles.Cache().GetByIndex(index, key)
	if err != nil {
		return
	}
	for _, b := range bundles {
		h.bundles.Enqueue(b.Namespace, b.Name)
	}
}

// onDeploymentChange refreshes the status of the deployment's Bundle.
func (h *handler) onDeploymentChange(_ string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
	if bd == nil {
		return nil, nil
	}
	if ns, name := bd.Labels[names.BundleNamespaceLabel], bd.Labels[names.BundleNameLabel]; ns != "" && name != "" {
		h.bundles.EnqueueAfter(ns, name, statuspatch.Debounce)
	}
	return bd, nil
}
