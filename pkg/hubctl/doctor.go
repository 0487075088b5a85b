package hubctl

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	clustercontroller "github.com/flotilla/flotilla/pkg/controllers/cluster"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// maxClockLead is how far ahead of the hub's clock an agent's check-in times may be
// before doctor says the agent's clock is off: the hub's certificates are valid from
// a minute before their issue.
const maxClockLead = time.Minute

// inCluster is how a hub admin runs the agent's own checks in the cluster.
const inCluster = "run `agent preflight` in the cluster (kubectl -n " + names.SystemNamespace + " exec deploy/fleet-agent -- /agent preflight)"

// Diagnose looks, from the hub, at the cluster named name in workspace namespace
// and returns what is wrong with it, in the checks: cluster, approval,
// registration, import, identity, agent, clock, versions and bundles. hubVersion is
// the version agents should run; now is the hub's time.
func Diagnose(ctx context.Context, kube kubernetes.Interface, client versioned.Interface, namespace, name, hubVersion string, now time.Time) ([]registration.Problem, error) {
	d := &doctor{kube: kube, client: client}
	cluster, err := client.FleetV1alpha1().Clusters(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return d.missing(ctx, namespace, name)
	} else if err != nil {
		return nil, fmt.Errorf("reading Cluster %s/%s: %w", namespace, name, err)
	}
	if err := d.registration(ctx, cluster); err != nil {
		return nil, err
	}
	d.imported(ctx, cluster)
	if err := d.identity(ctx, cluster); err != nil {
		return nil, err
	}
	d.agent(cluster, hubVersion, now)
	if err := d.bundles(ctx, cluster); err != nil {
		return nil, err
	}
	return d.problems, nil
}

type doctor struct {
	kube     kubernetes.Interface
	client   versioned.Interface
	problems []registration.Problem
}

func (d *doctor) add(check, format string, args ...any) {
	d.problems = append(d.problems, registration.Problem{Check: check, Message: fmt.Sprintf(format, args...)})
}

// missing says why there is no Cluster name: it waits for approval, its requests
// were refused, or nothing asked for it.
func (d *doctor) missing(ctx context.Context, namespace, name string) ([]registration.Problem, error) {
	pending, err := ListPending(ctx, d.client, namespace)
	if err != nil {
		return nil, err
	}
	for _, p := range pending {
		if p.Cluster == name {
			d.add("approval", "the cluster waits for a hub admin's approval (token %s, since %s): hub cluster approve %s -n %s, or refuse",
				p.Token, p.Since.UTC().Format(time.RFC3339), name, namespace)
			return d.problems, nil
		}
	}
	refused, err := d.lastRefusal(ctx, namespace, func(r *fleet.ClusterRegistrationRequest) bool {
		return names.ClusterForClientID(r.Spec.ClientID) == name
	})
	if err != nil {
		return nil, err
	}
	if refused != "" {
		d.add("registration", "there is no Cluster %s/%s: %s", namespace, name, refused)
		return d.problems, nil
	}
	d.add("cluster", "there is no Cluster %s/%s, and no registration request for it is kept (hub cluster list shows the registered clusters)", namespace, name)
	return d.problems, nil
}

// lastRefusal describes the newest refused request of namespace that mine matches,
// or is empty.
func (d *doctor) lastRefusal(ctx context.Context, namespace string, mine func(*fleet.ClusterRegistrationRequest) bool) (string, error) {
	requests, err := d.client.FleetV1alpha1().ClusterRegistrationRequests(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return "", fmt.Errorf("listing ClusterRegistrationRequests: %w", err)
	}
	var last *fleet.ClusterRegistrationRequest
	var refused *registration.RefusedError
	for i := range requests.Items {
		r := &requests.Items[i]
		c := registration.Refusal(r)
		if !mine(r) || r.Status.Granted || c == nil {
			continue
		}
		if last == nil || r.CreationTimestamp.After(last.CreationTimestamp.Time) {
			last, refused = r, c
		}
	}
	if last == nil {
		return "", nil
	}
	return fmt.Sprintf("its last registration request (%s, %s) was refused (%s): %s",
		last.Name, last.CreationTimestamp.UTC().Format(time.RFC3339), refused.Reason, refused.Message), nil
}

// registration reports a refused request of the cluster's clientID newer than its
// last check-in: an agent trying to register again and failing.
func (d *doctor) registration(ctx context.Context, cluster *fleet.Cluster) error {
	if cluster.Spec.ClientID == "" {
		return nil
	}
	seen := cluster.Status.Agent.LastSeen.Time
	refused, err := d.lastRefusal(ctx, cluster.Namespace, func(r *fleet.ClusterRegistrationRequest) bool {
		return r.Spec.ClientID == cluster.Spec.ClientID && r.CreationTimestamp.After(seen)
	})
	if refused != "" {
		d.add("registration", "%s", refused)
	}
	return err
}

// imported reports a manager-initiated cluster the hub cannot deploy its agent to.
func (d *doctor) imported(ctx context.Context, cluster *fleet.Cluster) {
	secret := cluster.Spec.KubeConfigSecret
	if secret == "" {
		return
	}
	if _, err := d.kube.CoreV1().Secrets(cluster.Namespace).Get(ctx, secret, metav1.GetOptions{}); apierrors.IsNotFound(err) {
		d.add("import", "spec.kubeConfigSecret %s does not exist in namespace %s", secret, cluster.Namespace)
		return
	}
	if c := conditions.Get(cluster.Status.Conditions, fleet.ConditionImported); c != nil && c.Status == corev1.ConditionFalse {
		d.add("import", "the hub cannot deploy the agent with kubeConfigSecret %s (%s): %s", secret, c.Reason, c.Message)
	}
}

// identity reports a cluster without its per-cluster namespace.
func (d *doctor) identity(ctx context.Context, cluster *fleet.Cluster) error {
	namespace := cluster.Status.Namespace
	if namespace == "" {
		if cluster.Status.Agent.LastSeen.IsZero() {
			return nil // never registered: the agent check says so
		}
		d.add("identity", "the Cluster has no per-cluster namespace in its status")
		return nil
	}
	ns, err := d.kube.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		d.add("identity", "its per-cluster namespace %s is gone, and with it the cluster's identity: register the cluster again with a token", namespace)
	case err != nil:
		return fmt.Errorf("reading namespace %s: %w", namespace, err)
	case ns.DeletionTimestamp != nil:
		d.add("identity", "its per-cluster namespace %s is being deleted, and with it the cluster's identity", namespace)
	}
	return nil
}

// agent reports an agent that never checked in or has gone offline, whose clock is
// ahead of the hub's, or that runs another version than the hub's.
func (d *doctor) agent(cluster *fleet.Cluster, hubVersion string, now time.Time) {
	agent := cluster.Status.Agent
	ready := conditions.Get(cluster.Status.Conditions, fleet.ConditionReady)
	switch {
	case agent.LastSeen.IsZero():
		d.add("agent", "the agent has never checked in: install it with a token's values.yaml (or see the import check), then %s", inCluster)
		return
	case ready != nil && ready.Status == corev1.ConditionUnknown:
		d.add("agent", "%s: %s", ready.Message, inCluster)
	case ready != nil && ready.Status == corev1.ConditionFalse && ready.Reason != clustercontroller.ReasonBundlesNotReady:
		d.add("ready", "the Cluster is not ready (%s): %s", ready.Reason, ready.Message)
	}
	if lead := agent.LastSeen.Sub(now); lead > maxClockLead {
		d.add("clock", "the agent's last check-in is dated %s ahead of the hub's clock: the cluster's clock is ahead; set the clocks right (NTP)", lead.Round(time.Second))
	}
	if hubVersion != "" && agent.AgentVersion != "" && agent.AgentVersion != hubVersion {
		d.add("versions", "the agent runs version %s and the hub %s: its agent bundle upgrades it unless the hub pins another (--agent-image-tag) or the agent bundle cannot be deployed (the bundles check)",
			agent.AgentVersion, hubVersion)
	}
}

// maxListed is how many BundleDeployments that are not ready doctor names.
const maxListed = 5

// bundles reports the cluster's BundleDeployments that are not ready.
func (d *doctor) bundles(ctx context.Context, cluster *fleet.Cluster) error {
	if cluster.Status.Namespace == "" {
		return nil
	}
	list, err := d.client.FleetV1alpha1().BundleDeployments(cluster.Status.Namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing the BundleDeployments of Cluster %s/%s: %w", cluster.Namespace, cluster.Name, err)
	}
	var notReady []string
	for _, bd := range list.Items {
		if conditions.IsTrue(bd.Status.Conditions, fleet.ConditionReady) {
			continue
		}
		what := bd.Name
		if c := conditions.Get(bd.Status.Conditions, fleet.ConditionReady); c != nil && c.Message != "" {
			what += " (" + strings.ReplaceAll(c.Message, "\n", " ") + ")"
		}
		notReady = append(notReady, what)
	}
	sort.Strings(notReady)
	total, more := len(notReady), ""
	if total == 0 {
		return nil
	}
	if total > maxListed {
		more = fmt.Sprintf(" and %d more", total-maxListed)
		notReady = notReady[:maxListed]
	}
	d.add("bundles", "%d BundleDeployments in %s are not ready: %s%s", total, cluster.Status.Namespace, strings.Join(notReady, "; "), more)
	return nil
}

// PrintDiagnosis prints one DOCTOR line per problem of the cluster, or "DOCTOR ok",
// and returns an error when there are problems.
func PrintDiagnosis(ctx context.Context, kube kubernetes.Interface, client versioned.Interface, namespace, name, hubVersion string, out io.Writer) error {
	problems, err := Diagnose(ctx, kube, client, namespace, name, hubVersion, time.Now())
	if err != nil {
		return err
	}
	for _, p := range problems {
		fmt.Fprintf(out, "DOCTOR %s: %s\n", p.Check, p.Message)
	}
	if len(problems) > 0 {
		return fmt.Errorf("found %d problems with Cluster %s/%s", len(problems), namespace, name)
	}
	fmt.Fprintf(out, "DOCTOR ok: no problem found with Cluster %s/%s\n", namespace, name)
	return nil
}
