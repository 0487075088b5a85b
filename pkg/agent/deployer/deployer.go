// Package deployer is the agent's bundle deployer: it watches the cluster's
// BundleDeployments on the hub, installs or upgrades each as a Helm release in the
// downstream cluster with the Helm SDK, reports the release's state back, puts back
// drifted objects when asked, and uninstalls releases whose BundleDeployment is gone.
package deployer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sirupsen/logrus"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/release"
	"helm.sh/helm/v3/pkg/storage/driver"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlestate"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	fleetcontrollers "github.com/flotilla/flotilla/pkg/generated/controllers/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/metrics"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
	"github.com/flotilla/flotilla/pkg/render"
	"github.com/flotilla/flotilla/pkg/signing"
	"github.com/flotilla/flotilla/pkg/target"
)

// Conditions the agent sets on a BundleDeployment.
const (
	// ConditionDeployed is False, with the error, when the last Helm operation failed.
	ConditionDeployed = bundlestate.ConditionDeployed
	// ConditionMonitored is False when the agent could not read the release's objects.
	ConditionMonitored = "Monitored"
)

// DefaultMonitorInterval is how often a deployed release's objects are looked at
// again for readiness and drift.
const DefaultMonitorInterval = registration.DefaultMonitorInterval

// Deployer deploys one cluster's BundleDeployments.
type Deployer struct {
	// Deployments are the cluster's BundleDeployments on the hub (a controller over
	// the per-cluster namespace, with the cluster's identity).
	Deployments fleetcontrollers.BundleDeploymentController
	// Hub reads Contents with the cluster's identity.
	Hub versioned.Interface
	// Downstream is the cluster the releases go to.
	Downstream     *rest.Config
	DownstreamKube kubernetes.Interface
	// AgentNamespace is the agent's own namespace: the agent bundle's release lives there.
	AgentNamespace  string
	MonitorInterval time.Duration
	Log             logrus.FieldLogger
	// MaxContentSize bounds what a Content decodes to; 0 means content.DefaultMaxSize.
	MaxContentSize int64
	// Verifier, when set, deploys only Bundles signed by a trusted key (the agent
	// bundle, the hub's own, excepted).
	Verifier *signing.Verifier
	// ClusterName is the cluster's Cluster on the hub: its agent bundle is named for it.
	ClusterName string
	// HubURL is the hub's address. Releases made for another hub's BundleDeployments
	// (a cluster moved here) are never removed for want of one here: the new hub's
	// BundleDeployment of the same Bundle takes the release over.
	HubURL string

	mu sync.Mutex
	// configs are by release namespace and ServiceAccount (see access).
	configs map[string]access
	// ledger lists the releases the agent made, and how each is removed.
	ledger *ledger
	// ops keeps Helm operations from being cut short: a stopping agent waits for them.
	ops operations
	// rechecks are when each BundleDeployment is looked at again (nextRecheck).
	rechecks map[string]recheck
}

// recheck is when a BundleDeployment's objects are looked at again: notReadyFor is
// the last wait while they were not ready at deploymentID, zero once they were.
type recheck struct {
	deploymentID string
	notReadyFor  time.Duration
}

// firstRecheck is the first wait before objects that were not ready are looked at
// again; it doubles up to the monitor interval.
const firstRecheck = time.Second

// nextRecheck decides when to look again at objects deployed at deploymentID: at the
// monitor interval once they are ready; while they are not (a rollout under way, a
// Pod that cannot start), after a second, then twice as long each time up to the
// monitor interval, so that a rollout's end is reported within about as long as it
// took rather than a monitor interval later. A new deployment starts again at a second.
func nextRecheck(prev recheck, deploymentID string, ready bool, monitor time.Duration) (recheck, time.Duration) {
	if ready {
		return recheck{deploymentID: deploymentID}, monitor
	}
	after := firstRecheck
	if prev.deploymentID == deploymentID && prev.notReadyFor > 0 {
		after = 2 * prev.notReadyFor
	}
	if after > monitor {
		after = monitor
	}
	return recheck{deploymentID: deploymentID, notReadyFor: after}, after
}

// scheduleRecheck enqueues bd again when nextRecheck says.
func (d *Deployer) scheduleRecheck(bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus) {
	key := bd.Namespace + "/" + bd.Name
	d.mu.Lock()
	if d.rechecks == nil {
		d.rechecks = map[string]recheck{}
	}
	next, after := nextRecheck(d.rechecks[key], status.AppliedDeploymentID, status.Ready, d.MonitorInterval)
	d.rechecks[key] = next
	d.mu.Unlock()
	d.Deployments.EnqueueAfter(bd.Namespace, bd.Name, after)
}

// operations counts Helm operations under way; once stopping, no new one starts.
type operations struct {
	mu       sync.Mutex
	idle     *sync.Cond
	running  int
	stopping bool
}

func (o *operations) begin() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.stopping {
		return false
	}
	o.running++
	return true
}

func (o *operations) end() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.running--
	if o.running == 0 && o.idle != nil {
		o.idle.Broadcast()
	}
}

func (o *operations) stop() {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.stopping = true
	if o.idle == nil {
		o.idle = sync.NewCond(&o.mu)
	}
	for o.running > 0 {
		o.idle.Wait()
	}
}

// errStopping: the agent is stopping, so no Helm operation starts.
var errStopping = errors.New("the agent is stopping")

// Register adds the deployer's handler. Call Cleanup once the caches have synced.
func (d *Deployer) Register(ctx context.Context) {
	if d.MonitorInterval <= 0 {
		d.MonitorInterval = DefaultMonitorInterval
	}
	d.configs = map[string]access{}
	d.rechecks = map[string]recheck{}
	d.ledger = &ledger{kube: d.DownstreamKube, namespace: d.AgentNamespace, legacy: d.legacyReleases}
	d.Deployments.OnChange(ctx, "deploy", d.onChange)
}

// Wait starts no more Helm operations and returns once none is running. The agent
// calls it before it exits, so a release is never left pending because the agent was
// stopped (for example by the upgrade of its own Deployment).
func (d *Deployer) Wait() { d.ops.stop() }

func (d *Deployer) onChange(key string, bd *fleet.BundleDeployment) (*fleet.BundleDeployment, error) {
	if bd == nil {
		d.mu.Lock()
		delete(d.rechecks, key)
		d.mu.Unlock()
		_, name, _ := strings.Cut(key, "/")
		return nil, d.uninstall(name)
	}
	if bd.DeletionTimestamp != nil || bd.Spec.DeploymentID == "" {
		return bd, nil
	}
	log := d.Log.WithField("bundleDeployment", bd.Name)
	status := bd.Status.DeepCopy()
	releaseNS, releaseName := d.release(bd)
	if !d.isAgent(bd) && releaseNS == d.AgentNamespace && releaseName == names.AgentRelease {
		// Only the agent bundle deploys the agent's own release: another Bundle naming
		// it would replace the agent (and read its identity).
		err := fmt.Errorf("the release %s/%s is the agent's own; only the cluster's agent bundle deploys it: give the Bundle another helm.releaseName or namespace", releaseNS, releaseName)
		recordDeploy(bd, status, nil, err, log)
		return d.report(bd, status)
	}
	acc, err := d.access(releaseNS, d.serviceAccount(bd))
	if err != nil {
		return bd, err
	}
	cfg := acc.helm

	// The release as it stands, read once: every decision below starts from it.
	last, lastErr := cfg.Releases.Last(releaseName)
	if d.isAgent(bd) && errors.Is(lastErr, driver.ErrReleaseNotFound) {
		// Nothing to adopt: an agent started by hand is not installed over.
		return d.report(bd, notManaged(bd, releaseNS))
	}
	// Checked before anything of bd is deployed: an installation or upgrade, or a
	// correction of drift.
	refused := d.verify(bd)
	if refused != nil {
		recordRefusal(status, refused, log)
	} else {
		clearRefusal(status)
	}
	var (
		deployErr error
		waiting   bool
	)
	if refused == nil && !bd.Spec.Paused && needsDeploy(bd, last, lastErr) {
		waiting = d.waitsForDependencies(bd, status, log)
		if !waiting {
			last, deployErr = d.deploy(acc, bd, releaseNS, releaseName, false, log)
			if errors.Is(deployErr, errStopping) {
				return bd, nil
			}
			recordDeploy(bd, status, last, deployErr, log)
		}
	}
	if !waiting {
		clearWait(bd, status)
	}
	if deployErr == nil {
		d.monitor(cfg, bd, status, last, lastErr, log)
		if drift := d.correctDrift(bd); refused == nil && !waiting && len(status.ModifiedStatus) > 0 && drift != nil && drift.Enabled && !bd.Spec.Paused {
			log.WithField("modified", bundlestate.Message(&fleet.BundleDeployment{Spec: bd.Spec, Status: *status})).Info("Correcting drift")
			before := last
			last, deployErr = d.deploy(acc, bd, releaseNS, releaseName, drift.Force, log)
			recordDeploy(bd, status, last, deployErr, log)
			if deployErr == nil {
				d.monitor(cfg, bd, status, last, nil, log)
			} else if !drift.KeepFailHistory {
				if err := dropFailedAttempt(cfg, releaseName, before); err != nil {
					log.WithError(err).Warn("Cannot remove the failed drift correction from the release's history")
				}
			}
		}
	}
	bd, err = d.report(bd, status)
	if deployErr != nil {
		// Retried by the work queue, with backoff.
		return bd, deployErr
	}
	return bd, err
}

// report writes status if it changed, and looks at bd again later (nextRecheck).
func (d *Deployer) report(bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus) (*fleet.BundleDeployment, error) {
	display(bd, status)
	if !equality.Semantic.DeepEqual(*status, bd.Status) {
		before := bundlestate.Of(bd)
		updated := bd.DeepCopy()
		updated.Status = *status
		written, err := d.Deployments.UpdateStatus(updated)
		if err != nil {
			return bd, fmt.Errorf("reporting the status of BundleDeployment %s/%s: %w", bd.Namespace, bd.Name, err)
		}
		bd = written
		d.wakeDependents(bd, before)
	}
	d.scheduleRecheck(bd, status)
	return bd, nil
}

// ReasonNoAgentRelease: the agent does not run from a fleet-agent release, so its
// agent bundle has nothing to upgrade.
const ReasonNoAgentRelease = "NoAgentRelease"

func notManaged(bd *fleet.BundleDeployment, namespace string) *fleet.BundleDeploymentStatus {
	status := bd.Status.DeepCopy()
	status.AppliedDeploymentID = bd.Spec.DeploymentID
	gen := bd.Spec.Options.ForceSyncGeneration
	status.SyncGeneration = &gen
	status.Ready, status.NonModified = true, true
	status.NonReadyStatus, status.ModifiedStatus, status.Resources = nil, nil, nil
	status.Release = ""
	msg := fmt.Sprintf("the agent does not run from a Helm release %s/%s, so there is nothing to upgrade; install the agent with the fleet-agent chart to have it managed", namespace, names.AgentRelease)
	conditions.Set(&status.Conditions, ConditionDeployed, corev1.ConditionTrue, ReasonNoAgentRelease, msg)
	conditions.Set(&status.Conditions, ConditionMonitored, corev1.ConditionTrue, ReasonNoAgentRelease, msg)
	conditions.Set(&status.Conditions, fleet.ConditionReady, corev1.ConditionTrue, ReasonNoAgentRelease, msg)
	return status
}

// release is where bd's release goes: its namespace and name. The agent bundle's is
// the agent's own release, wherever the agent runs.
func (d *Deployer) release(bd *fleet.BundleDeployment) (string, string) {
	if d.isAgent(bd) {
		return d.AgentNamespace, names.AgentRelease
	}
	return render.ReleaseNamespace(bd.Spec.Options), render.ReleaseName(bd.Spec.Options, bd.Name)
}

// isAgent says whether bd is this cluster's agent bundle, which deploys the agent's
// own release: labelled and named for this very cluster, as the hub makes it.
func (d *Deployer) isAgent(bd *fleet.BundleDeployment) bool {
	return d.ClusterName != "" && bd.Labels[names.AgentBundleLabel] == d.ClusterName && bd.Name == names.AgentBundle(d.ClusterName)
}

// needsDeploy says whether bd's release must be installed or upgraded: its
// deployment ID or forced sync generation is not applied yet, or the release (last,
// as read with err) is gone.
func needsDeploy(bd *fleet.BundleDeployment, last *release.Release, err error) bool {
	if bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID {
		return true
	}
	if gen := bd.Status.SyncGeneration; gen == nil || *gen != bd.Spec.Options.ForceSyncGeneration {
		return true
	}
	// Someone else may have installed or upgraded the release since (helm upgrade by
	// hand, the hub redeploying an imported cluster's agent): apply the bundle again.
	return err != nil || last.Info.Status != release.StatusDeployed || last.Labels[names.DeploymentIDLabel] != deploymentLabel(bd)
}

// deploymentLabel is the value of the release label recording which deployment ID
// the release holds (a hash: IDs are longer than label values may be).
func deploymentLabel(bd *fleet.BundleDeployment) string {
	return names.Hash(32, bd.Spec.DeploymentID, strconv.FormatInt(bd.Spec.Options.ForceSyncGeneration, 10))
}

// releaseLabels are the labels the agent puts on the releases it makes.
func releaseLabels(bd *fleet.BundleDeployment) map[string]string {
	return map[string]string{names.BundleDeploymentLabel: bd.Name, names.DeploymentIDLabel: deploymentLabel(bd)}
}

// recordDeploy puts the outcome of a deployment, rel or err, into status.
func recordDeploy(bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus, rel *release.Release, err error, log logrus.FieldLogger) {
	if err != nil {
		metrics.Deployments.WithLabelValues("failed").Inc()
		log.WithError(err).Warn("Deployment failed; will retry")
		conditions.Set(&status.Conditions, ConditionDeployed, corev1.ConditionFalse, "Error", err.Error())
		status.Ready = false
		return
	}
	metrics.Deployments.WithLabelValues("deployed").Inc()
	gen := bd.Spec.Options.ForceSyncGeneration
	status.SyncGeneration = &gen
	status.AppliedDeploymentID = bd.Spec.DeploymentID
	conditions.Set(&status.Conditions, ConditionDeployed, corev1.ConditionTrue, "", "")
	status.Release = fmt.Sprintf("%s/%s:%d", rel.Namespace, rel.Name, rel.Version)
	log.WithField("release", status.Release).Info("Deployed")
}

// verify says why bd may not be deployed (a *signing.RefusedError), or nil. Only an
// agent with trusted keys checks signatures; a paused bd deploys nothing anyway.
func (d *Deployer) verify(bd *fleet.BundleDeployment) *signing.RefusedError {
	if d.Verifier == nil || d.isAgent(bd) || bd.Spec.Paused {
		return nil
	}
	var refused *signing.RefusedError
	if err := d.Verifier.Verify(bd); err != nil && !errors.As(err, &refused) {
		refused = &signing.RefusedError{Reason: signing.ReasonBadSignature, Message: err.Error()}
	}
	return refused
}

// correctDrift is how bd's drift is corrected: as its options say when signatures
// are checked (the options are what is signed), else as its spec says.
func (d *Deployer) correctDrift(bd *fleet.BundleDeployment) *fleet.CorrectDrift {
	if d.Verifier != nil {
		return bd.Spec.Options.CorrectDrift
	}
	return bd.Spec.CorrectDrift
}

// clearRefusal forgets an earlier refusal once bd passes: put back to the version
// deployed, it has nothing to deploy, and would otherwise stay refused.
func clearRefusal(status *fleet.BundleDeploymentStatus) {
	if c := conditions.Get(status.Conditions, ConditionDeployed); c != nil && signing.IsRefusalReason(c.Reason) {
		conditions.Set(&status.Conditions, ConditionDeployed, corev1.ConditionTrue, "", "")
	}
}

// recordRefusal shows in status why bd is not deployed. It is not retried: a new
// signature or a new Bundle changes bd, and that is looked at.
func recordRefusal(status *fleet.BundleDeploymentStatus, refused *signing.RefusedError, log logrus.FieldLogger) {
	if c := conditions.Get(status.Conditions, ConditionDeployed); c == nil || c.Reason != refused.Reason || c.Message != refused.Message {
		metrics.Deployments.WithLabelValues("refused").Inc()
		log.WithField("reason", refused.Reason).Warn("Not deploying: " + refused.Message)
	}
	conditions.Set(&status.Conditions, ConditionDeployed, corev1.ConditionFalse, refused.Reason, refused.Message)
	status.Ready = false
}

// monitor fills status with the readiness and drift of the objects of rel (read with
// readErr).
func (d *Deployer) monitor(cfg *action.Configuration, bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus, rel *release.Release, readErr error, log logrus.FieldLogger) {
	if readErr != nil || rel == nil {
		conditions.Set(&status.Conditions, ConditionMonitored, corev1.ConditionFalse, "NoRelease", fmt.Sprintf("reading the release of %s: %v", bd.Name, readErr))
		status.Ready = false
		return
	}
	infos, err := cfg.KubeClient.Build(bytes.NewBufferString(rel.Manifest), false)
	if err == nil {
		var o observed
		if o, err = observe(infos, bd.Spec.Options.Diff, bd.Spec.Options.IgnoreOptions.Conditions); err == nil {
			d.explainNotReady(&o)
			status.NonReadyStatus, status.ModifiedStatus, status.Resources = o.nonReady, o.modified, o.resources
			status.Ready = len(o.nonReady) == 0
			status.NonModified = len(o.modified) == 0
			conditions.Set(&status.Conditions, ConditionMonitored, corev1.ConditionTrue, "", "")
			ready := corev1.ConditionTrue
			msg := ""
			if !status.Ready {
				ready = corev1.ConditionFalse
				msg = bundlestate.Message(&fleet.BundleDeployment{Spec: bd.Spec, Status: *status})
			}
			conditions.Set(&status.Conditions, fleet.ConditionReady, ready, "", msg)
			return
		}
	}
	log.WithError(err).Warn("Cannot read the release's objects")
	conditions.Set(&status.Conditions, ConditionMonitored, corev1.ConditionFalse, "Error", err.Error())
	status.Ready = false
}

func display(bd *fleet.BundleDeployment, status *fleet.BundleDeploymentStatus) {
	view := &fleet.BundleDeployment{Spec: bd.Spec, Status: *status}
	status.Display.State = string(bundlestate.Of(view))
	status.Display.Deployed = "Yes"
	if c := conditions.Get(status.Conditions, ConditionDeployed); c != nil && c.Status != corev1.ConditionTrue {
		status.Display.Deployed = c.Reason + ": " + c.Message
	}
	status.Display.Monitored = "Yes"
	if c := conditions.Get(status.Conditions, ConditionMonitored); c == nil || c.Status != corev1.ConditionTrue {
		status.Display.Monitored = "No"
	}
}

// deploy installs or upgrades bd's release. The Helm operation runs to its end even
// when the agent is asked to stop meanwhile.
func (d *Deployer) deploy(acc access, bd *fleet.BundleDeployment, ns, name string, force bool, log logrus.FieldLogger) (*release.Release, error) {
	if !d.ops.begin() {
		return nil, errStopping
	}
	defer d.ops.end()
	ctx, cancel := context.WithTimeout(context.Background(), d.timeout(bd)+30*time.Second)
	defer cancel()
	cfg := acc.helm
	if err := d.checkServiceAccount(ctx, d.serviceAccount(bd)); err != nil {
		return nil, err
	}

	c, err := d.Hub.FleetV1alpha1().Contents().Get(ctx, target.ContentName(bd.Spec.DeploymentID), metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("fetching Content %s: %w", target.ContentName(bd.Spec.DeploymentID), err)
	}
	limit := d.MaxContentSize
	if limit <= 0 {
		limit = content.DefaultMaxSize
	}
	resources, err := content.Resources(c, limit)
	if err != nil {
		return nil, err
	}
	files, err := content.Files(resources, limit)
	if err != nil {
		return nil, err
	}
	if err := content.CheckArchives(files, limit); err != nil {
		return nil, err
	}
	opts := bd.Spec.Options
	extra, err := valuesFrom(ctx, acc.kube, opts)
	if err != nil {
		return nil, err
	}
	r, err := render.New(files, opts, name, extra)
	if err != nil {
		return nil, err
	}
	r.PostRenderer.ClusterScoped = clusterScoped(cfg)
	values := r.Values
	if err := d.invalidateDiscovery(cfg); err != nil {
		return nil, err
	}
	hooked, err := r.PostRenderer.WithHooks(cfg)
	if err != nil {
		return nil, err
	}

	last, err := cfg.Releases.Last(name)
	switch {
	case errors.Is(err, driver.ErrReleaseNotFound):
		return d.install(ctx, hooked, acc.kube, bd, ns, name, r, values)
	case err != nil:
		return nil, fmt.Errorf("reading release %s/%s: %w", ns, name, err)
	}
	if last.Info.Status.IsPending() {
		// Only this agent deploys here, and it is not busy with this release: an earlier
		// agent was stopped mid-operation. Mark it failed so Helm lets us go on.
		log.WithField("status", last.Info.Status).Warn("Release left pending by an interrupted operation; marking it failed")
		last.SetStatus(release.StatusFailed, "interrupted: the agent stopped during this operation")
		if err := cfg.Releases.Update(last); err != nil {
			return nil, fmt.Errorf("recovering release %s/%s from %s: %w", ns, name, last.Info.Status, err)
		}
	}
	if d.isAgent(bd) {
		values = agentValues(last.Config, values, d.Verifier != nil)
		values["agentNamespace"] = ns
	}
	helm := helmOptions(opts)
	up := action.NewUpgrade(hooked)
	up.Namespace = ns
	up.Timeout = d.timeout(bd)
	up.Force = helm.Force || force
	up.TakeOwnership = helm.TakeOwnership
	up.Atomic = helm.Atomic
	up.WaitForJobs = helm.WaitForJobs
	up.Wait = helm.WaitForJobs
	up.DisableOpenAPIValidation = false
	up.SkipSchemaValidation = helm.SkipSchemaValidation
	up.EnableDNS = !helm.DisableDNS
	up.MaxHistory = maxHistory(helm)
	up.Labels = releaseLabels(bd)
	up.PostRenderer = r.PostRenderer
	if err := d.remember(bd, ns, name, false); err != nil {
		return nil, err
	}
	rel, err := up.RunWithContext(ctx, name, r.Chart, values)
	if err != nil {
		return nil, fmt.Errorf("upgrading release %s/%s: %w", ns, name, err)
	}
	return rel, nil
}

func (d *Deployer) install(ctx context.Context, cfg *action.Configuration, kube kubernetes.Interface, bd *fleet.BundleDeployment, ns, name string, r *render.Release, values map[string]interface{}) (*release.Release, error) {
	helm := helmOptions(bd.Spec.Options)
	in := action.NewInstall(cfg)
	in.ReleaseName = name
	in.Namespace = ns
	// ensureNamespace made it: Helm's creation would ask for the right to create
	// namespaces even when the namespace exists, which a Bundle's serviceAccount
	// may lack.
	in.CreateNamespace = false
	in.Timeout = d.timeout(bd)
	in.TakeOwnership = helm.TakeOwnership
	in.Atomic = helm.Atomic
	in.WaitForJobs = helm.WaitForJobs
	in.Wait = helm.WaitForJobs
	in.SkipSchemaValidation = helm.SkipSchemaValidation
	in.EnableDNS = !helm.DisableDNS
	in.Labels = releaseLabels(bd)
	in.PostRenderer = r.PostRenderer
	created, err := ensureNamespace(ctx, kube, ns, bd.Spec.Options)
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", ns, err)
	}
	// Recorded before the release is made, so that it is never one the agent does not
	// know how to remove.
	if err := d.remember(bd, ns, name, created); err != nil {
		return nil, err
	}
	rel, err := in.RunWithContext(ctx, r.Chart, values)
	if err != nil {
		return nil, fmt.Errorf("installing release %s/%s: %w", ns, name, err)
	}
	return rel, nil
}

// ensureNamespace creates the release's namespace with the Bundle's namespace labels
// and annotations, or adds them to an existing one, with kube (the Bundle's access);
// it says whether it created the namespace (which deleteNamespace may then delete).
func ensureNamespace(ctx context.Context, kube kubernetes.Interface, ns string, opts fleet.BundleDeploymentOptions) (created bool, err error) {
	client := kube.CoreV1().Namespaces()
	existing, err := client.Get(ctx, ns, metav1.GetOptions{})
	if apierrors.IsForbidden(err) && len(opts.NamespaceLabels) == 0 && len(opts.NamespaceAnnotations) == 0 {
		// A serviceAccount that may not read the namespace may still deploy into it.
		return false, nil
	}
	if apierrors.IsNotFound(err) {
		_, err = client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
			Name: ns, Labels: opts.NamespaceLabels, Annotations: opts.NamespaceAnnotations,
		}}, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return false, nil
		}
		return err == nil, err
	}
	if err != nil || (len(opts.NamespaceLabels) == 0 && len(opts.NamespaceAnnotations) == 0) {
		return false, err
	}
	updated := existing.DeepCopy()
	if updated.Labels == nil {
		updated.Labels = map[string]string{}
	}
	if updated.Annotations == nil {
		updated.Annotations = map[string]string{}
	}
	for k, v := range opts.NamespaceLabels {
		updated.Labels[k] = v
	}
	for k, v := range opts.NamespaceAnnotations {
		updated.Annotations[k] = v
	}
	if equality.Semantic.DeepEqual(updated.ObjectMeta, existing.ObjectMeta) {
		return false, nil
	}
	_, err = client.Update(ctx, updated, metav1.UpdateOptions{})
	return false, err
}

func helmOptions(opts fleet.BundleDeploymentOptions) fleet.HelmOptions {
	if opts.Helm == nil {
		return fleet.HelmOptions{}
	}
	return *opts.Helm
}

func maxHistory(h fleet.HelmOptions) int {
	if h.MaxHistory > 0 {
		return h.MaxHistory
	}
	return 5
}

func (d *Deployer) timeout(bd *fleet.BundleDeployment) time.Duration {
	if h := bd.Spec.Options.Helm; h != nil && h.TimeoutSeconds > 0 {
		return time.Duration(h.TimeoutSeconds) * time.Second
	}
	return 5 * time.Minute
}

// registrationKeys are the agent chart's values that only an installation needs. The
// agent bundle's upgrades drop them, so no bootstrap Secret is rendered again.
var registrationKeys = []string{"token", "tokenName", "apiServerURL", "apiServerCA", "clusterNamespace", "systemRegistrationNamespace"}

// downstreamKeys are values only the cluster's owner sets, at helm install or
// upgrade: the agent bundle, which comes from the hub, keeps them as they are.
var downstreamKeys = []string{"trustedKeys"}

// codeKeys are values that choose what code the agent runs, and with which rights
// on the node. With trusted keys, they too are the owner's: otherwise whoever may
// write the Cluster on the hub (its agent settings) would choose the agent's image.
var codeKeys = []string{"image", "privateRepoURL", "env", "hostNetwork"}

// agentValues keeps what the user gave the agent's release at install time (labels,
// check-in interval, image, ...) except the registration values, under the agent
// bundle's values; the owner's keys (downstreamKeys, and codeKeys when the agent
// trusts keys) the bundle does not change.
func agentValues(previous, bundle map[string]interface{}, trusting bool) map[string]interface{} {
	ownerKeys := downstreamKeys
	if trusting {
		ownerKeys = append(slices.Clone(downstreamKeys), codeKeys...)
	}
	kept := map[string]interface{}{}
	for k, v := range previous {
		kept[k] = v
	}
	for _, k := range registrationKeys {
		delete(kept, k)
	}
	out := kept
	for k, v := range bundle {
		if !slices.Contains(ownerKeys, k) {
			out[k] = v
		}
	}
	return out
}

// valuesFrom reads helm.valuesFrom from the downstream cluster, with kube.
func valuesFrom(ctx context.Context, kube kubernetes.Interface, opts fleet.BundleDeploymentOptions) ([]map[string]interface{}, error) {
	if opts.Helm == nil {
		return nil, nil
	}
	var out []map[string]interface{}
	for _, from := range opts.Helm.ValuesFrom {
		var (
			raw  []byte
			what string
		)
		switch {
		case from.ConfigMapKeyRef != nil:
			ref := from.ConfigMapKeyRef
			ns := defaultString(ref.Namespace, opts.DefaultNamespace)
			what = fmt.Sprintf("ConfigMap %s/%s key %s", ns, ref.Name, defaultString(ref.Key, "values.yaml"))
			cm, err := kube.CoreV1().ConfigMaps(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("helm.valuesFrom %s: %w", what, err)
			}
			raw = []byte(cm.Data[defaultString(ref.Key, "values.yaml")])
		case from.SecretKeyRef != nil:
			ref := from.SecretKeyRef
			ns := defaultString(ref.Namespace, opts.DefaultNamespace)
			what = fmt.Sprintf("Secret %s/%s key %s", ns, ref.Name, defaultString(ref.Key, "values.yaml"))
			s, err := kube.CoreV1().Secrets(ns).Get(ctx, ref.Name, metav1.GetOptions{})
			if err != nil {
				return nil, fmt.Errorf("helm.valuesFrom %s: %w", what, err)
			}
			raw = s.Data[defaultString(ref.Key, "values.yaml")]
		default:
			continue
		}
		v := map[string]interface{}{}
		if err := yaml.Unmarshal(raw, &v); err != nil {
			return nil, fmt.Errorf("helm.valuesFrom %s: %w", what, err)
		}
		out = append(out, v)
	}
	return out, nil
}

func defaultString(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// clusterScoped says, from the downstream cluster's API, whether objects of a kind
// are cluster-scoped.
func clusterScoped(cfg *action.Configuration) func(schema.GroupVersionKind) (bool, error) {
	return func(gvk schema.GroupVersionKind) (bool, error) {
		if cfg.RESTClientGetter == nil {
			return false, nil
		}
		mapper, err := cfg.RESTClientGetter.ToRESTMapper()
		if err != nil {
			return false, err
		}
		mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			return false, fmt.Errorf("%s: %w", gvk, err)
		}
		return mapping.Scope.Name() == meta.RESTScopeNameRoot, nil
	}
}

// invalidateDiscovery forgets cached API resources: a bundle may have added CRDs.
func (d *Deployer) invalidateDiscovery(cfg *action.Configuration) error {
	if cfg.RESTClientGetter == nil {
		return nil
	}
	dc, err := cfg.RESTClientGetter.ToDiscoveryClient()
	if err != nil {
		return err
	}
	dc.Invalidate()
	return nil
}

// uninstall removes the releases the agent made for the BundleDeployment named name
// (see remove).
func (d *Deployer) uninstall(name string) error {
	made, err := d.ledger.find(func(m made) bool { return m.BundleDeployment == name })
	if err != nil {
		return err
	}
	return d.remove(made)
}

// listReleases lists the releases of every namespace whose labels match selector.
func (d *Deployer) listReleases(selector string) ([]*release.Release, error) {
	cfg, err := d.config("")
	if err != nil {
		return nil, err
	}
	list := action.NewList(cfg)
	list.AllNamespaces = true
	list.All = true
	list.StateMask = action.ListAll
	list.Selector = selector
	return list.Run()
}

// legacyReleases lists, for a ledger made anew, the releases labelled for a
// BundleDeployment of the cluster: those agents made before they kept a ledger. A
// release's labels are Helm's records, which a Bundle's serviceAccount may write, so
// only the BundleDeployment's own name and options count, and the account is the one
// its BundleDeployment names now. A release whose BundleDeployment is gone is left as
// it is, unmanaged: nothing trusted says how to remove it.
func (d *Deployer) legacyReleases() ([]made, error) {
	releases, err := d.listReleases(names.BundleDeploymentLabel)
	if err != nil {
		return nil, err
	}
	current, err := d.Deployments.Cache().List("", labels.Everything())
	if err != nil {
		return nil, err
	}
	byName := map[string]*fleet.BundleDeployment{}
	for _, bd := range current {
		byName[bd.Name] = bd
	}
	var out []made
	for _, rel := range releases {
		name := rel.Labels[names.BundleDeploymentLabel]
		bd := byName[name]
		if bd == nil || d.isAgent(bd) {
			if rel.Name == names.AgentRelease && rel.Namespace == d.AgentNamespace {
				continue
			}
			d.Log.WithFields(logrus.Fields{"release": rel.Namespace + "/" + rel.Name, "bundleDeployment": name}).
				Warn("Leaving a release labelled for a BundleDeployment the agent does not have; remove it with helm uninstall if it is not wanted")
			continue
		}
		ns, releaseName := d.release(bd)
		if ns != rel.Namespace || releaseName != rel.Name {
			continue
		}
		out = append(out, made{Namespace: ns, Release: releaseName, BundleDeployment: bd.Name, ServiceAccount: d.serviceAccount(bd),
			KeepResources: bd.Spec.Options.KeepResources, DeleteNamespace: bd.Spec.Options.DeleteNamespace, Hub: d.HubURL})
	}
	return out, nil
}

// remember records in the ledger the release ns/name made for bd, and whether the
// agent created its namespace for it now.
func (d *Deployer) remember(bd *fleet.BundleDeployment, ns, name string, createdNamespace bool) error {
	if d.isAgent(bd) {
		return nil
	}
	err := d.ledger.record(made{
		Namespace: ns, Release: name, BundleDeployment: bd.Name, ServiceAccount: d.serviceAccount(bd),
		KeepResources: bd.Spec.Options.KeepResources, DeleteNamespace: bd.Spec.Options.DeleteNamespace, CreatedNamespace: createdNamespace,
		Hub: d.HubURL,
	})
	if err != nil {
		return fmt.Errorf("recording release %s/%s: %w", ns, name, err)
	}
	return nil
}

// remove removes releases the agent made, as the ledger says each is removed, with
// the rights each was deployed with: uninstalled, or forgotten with its objects kept
// (keepResources), then its namespace deleted (deleteNamespace). Each is forgotten by
// the ledger once removed; one that could not be is tried again.
func (d *Deployer) remove(releases []made) error {
	var errs []error
	for _, m := range releases {
		if m.Release == names.AgentRelease && m.Namespace == d.AgentNamespace {
			continue
		}
		var err error
		if m.KeepResources {
			err = d.forgetRelease(m)
		} else if err = d.uninstallRelease(m); err == nil && m.DeleteNamespace && m.CreatedNamespace {
			err = d.deleteNamespace(m)
		}
		if err == nil {
			err = d.ledger.forget(m)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// onRelease runs op with the access of the release m, unless the agent is stopping;
// a stopping agent waits for it.
func (d *Deployer) onRelease(m made, op func(acc access) error) error {
	if !d.ops.begin() {
		return errStopping
	}
	defer d.ops.end()
	acc, err := d.access(m.Namespace, m.ServiceAccount)
	if err != nil {
		return err
	}
	return op(acc)
}

func (d *Deployer) uninstallRelease(m made) error {
	return d.onRelease(m, func(acc access) error {
		un := action.NewUninstall(acc.helm)
		un.Timeout = 5 * time.Minute
		if _, err := un.Run(m.Release); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
			return fmt.Errorf("uninstalling release %s/%s: %w", m.Namespace, m.Release, err)
		}
		d.Log.WithField("release", m.Namespace+"/"+m.Release).Info("Uninstalled the release of a removed BundleDeployment")
		return nil
	})
}

// forgetRelease deletes every revision of a release from Helm's storage and leaves
// its objects where they are (keepResources): no longer Helm's, nor Flotilla's.
func (d *Deployer) forgetRelease(m made) error {
	return d.onRelease(m, func(acc access) error {
		history, err := acc.helm.Releases.History(m.Release)
		if errors.Is(err, driver.ErrReleaseNotFound) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading release %s/%s: %w", m.Namespace, m.Release, err)
		}
		for _, rel := range history {
			if _, err := acc.helm.Releases.Delete(rel.Name, rel.Version); err != nil && !errors.Is(err, driver.ErrReleaseNotFound) {
				return fmt.Errorf("forgetting release %s/%s: %w", m.Namespace, m.Release, err)
			}
		}
		d.Log.WithField("release", m.Namespace+"/"+m.Release).Info("Forgot the release of a removed BundleDeployment and kept its objects (keepResources)")
		return nil
	})
}

// Cleanup removes the releases the agent made for this hub's BundleDeployments that
// no longer exist (removed while the agent was not running). Call it once the cache
// has synced.
func (d *Deployer) Cleanup() error {
	current, err := d.Deployments.Cache().List("", labels.Everything())
	if err != nil {
		return err
	}
	exists := map[string]bool{}
	for _, bd := range current {
		exists[bd.Name] = true
	}
	orphans, err := d.ledger.find(func(m made) bool { return !exists[m.BundleDeployment] && ofHub(m, d.HubURL) })
	if err != nil {
		return fmt.Errorf("reading the agent's releases: %w", err)
	}
	return d.remove(orphans)
}

// ofHub says whether m was made for the BundleDeployments of the hub at hub.
func ofHub(m made, hub string) bool {
	return m.Hub == "" || m.Hub == hub
}

// deleteNamespace deletes the namespace of the removed release m, which the agent
// created for it (deleteNamespace), with the rights m was deployed with, unless
// another release the agent made lives there.
func (d *Deployer) deleteNamespace(m made) error {
	log := d.Log.WithFields(logrus.Fields{"release": m.Namespace + "/" + m.Release, "namespace": m.Namespace})
	if m.Namespace == d.AgentNamespace {
		return nil
	}
	others, err := d.ledger.find(func(o made) bool { return o.Namespace == m.Namespace && o.Release != m.Release })
	if err != nil {
		return err
	}
	if len(others) > 0 {
		log.WithField("other", others[0].Release).Info("deleteNamespace: keeping the namespace, which another release uses")
		return nil
	}
	return d.onRelease(m, func(acc access) error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		err := acc.kube.CoreV1().Namespaces().Delete(ctx, m.Namespace, metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting namespace %s (deleteNamespace): %w", m.Namespace, err)
		}
		log.Info("Deleted the namespace created for the removed BundleDeployment (deleteNamespace)")
		return nil
	})
}

// dropFailedAttempt removes from the history of release name the revision a failed
// operation added after before (the release as it stood), so that a failed drift
// correction leaves the history as it was (correctDrift.keepFailHistory keeps it).
func dropFailedAttempt(cfg *action.Configuration, name string, before *release.Release) error {
	last, err := cfg.Releases.Last(name)
	if errors.Is(err, driver.ErrReleaseNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	if last.Info.Status != release.StatusFailed || (before != nil && last.Version <= before.Version) {
		return nil
	}
	_, err = cfg.Releases.Delete(last.Name, last.Version)
	return err
}
