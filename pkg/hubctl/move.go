package hubctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// HubClients are the clients of one hub, and its address as given to the command.
type HubClients struct {
	Kube  kubernetes.Interface
	Fleet versioned.Interface
	URL   string
}

// MoveOptions are the options of `hub cluster move`.
type MoveOptions struct {
	// Namespace and Name are the Cluster on the hub it leaves; ToNamespace its
	// workspace on the new hub (default: Namespace).
	Namespace, Name, ToNamespace string
	// Wait bounds the wait for the agent to check in with the new hub.
	Wait time.Duration
}

// moveTokenTTL is how long the token that moves a cluster lasts: an agent that
// cannot reach the new hub yet keeps trying with it that long.
const moveTokenTTL = 24 * time.Hour

// Move moves a Cluster from one hub to another without reinstalling its agent: it
// creates the Cluster on the new hub, bound to the same agent key, with a token bound
// to it that only that key can use; hands the token's values to the agent through
// its agent bundle on the old hub; waits for the agent to check in with the new hub;
// then deletes the Cluster from the old hub, which the agent no longer listens to.
func Move(ctx context.Context, from, to HubClients, opts MoveOptions, out io.Writer) error {
	if opts.ToNamespace == "" {
		opts.ToNamespace = opts.Namespace
	}
	cluster, err := from.Fleet.FleetV1alpha1().Clusters(opts.Namespace).Get(ctx, opts.Name, metav1.GetOptions{})
	if err != nil {
		return fmt.Errorf("reading Cluster %s/%s on the hub it leaves: %w", opts.Namespace, opts.Name, err)
	}
	if cluster.Spec.ClientID == "" || cluster.Annotations[names.AgentKeyAnnotation] == "" {
		return fmt.Errorf("Cluster %s/%s has no clientID or agent key recorded, so its agent cannot prove itself to another hub: register it there with a token instead", opts.Namespace, opts.Name)
	}
	if cluster.Status.Agent.LastSeen.IsZero() {
		return fmt.Errorf("the agent of Cluster %s/%s has never checked in: there is nothing to move", opts.Namespace, opts.Name)
	}

	moved, err := ensureMovedCluster(ctx, to, cluster, opts.ToNamespace)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Created Cluster %s/%s on %s, bound to the agent's key\n", moved.Namespace, moved.Name, to.URL)
	values, err := moveToken(ctx, to, moved, from.URL)
	if err != nil {
		return err
	}
	annotation, err := json.Marshal(values)
	if err != nil {
		return err
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{names.MoveToAnnotation: string(annotation)}}})
	if err != nil {
		return err
	}
	if _, err := from.Fleet.FleetV1alpha1().Clusters(opts.Namespace).Patch(ctx, opts.Name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
		return fmt.Errorf("handing the new hub's values to the agent of Cluster %s/%s: %w", opts.Namespace, opts.Name, err)
	}
	fmt.Fprintf(out, "Handed the new hub's registration values to the agent through its agent bundle; waiting for it to check in with %s\n", to.URL)

	err = wait.PollUntilContextTimeout(ctx, time.Second, opts.Wait, true, func(ctx context.Context) (bool, error) {
		c, err := to.Fleet.FleetV1alpha1().Clusters(moved.Namespace).Get(ctx, moved.Name, metav1.GetOptions{})
		return err == nil && !c.Status.Agent.LastSeen.IsZero(), nil
	})
	if err != nil {
		return fmt.Errorf("the agent has not checked in with the new hub within %s; the move goes on when it can (the old hub keeps the Cluster until then): "+
			"run `hub cluster doctor %s -n %s` against each hub, and `agent preflight` in the cluster, then run this command again",
			opts.Wait, opts.Name, opts.Namespace)
	}
	fmt.Fprintf(out, "The agent checked in with %s\n", to.URL)
	if err := to.Fleet.FleetV1alpha1().ClusterRegistrationTokens(moved.Namespace).Delete(ctx, moveTokenName(moved.Name), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		fmt.Fprintf(out, "Could not delete the used move token %s/%s (it expires by itself): %v\n", moved.Namespace, moveTokenName(moved.Name), err)
	}
	uid := cluster.UID
	err = from.Fleet.FleetV1alpha1().Clusters(opts.Namespace).Delete(ctx, opts.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("the cluster moved, but deleting Cluster %s/%s from the hub it left failed (delete it by hand): %w", opts.Namespace, opts.Name, err)
	}
	fmt.Fprintf(out, "Moved: deleted Cluster %s/%s from %s\n", opts.Namespace, opts.Name, from.URL)
	return nil
}

// ensureMovedCluster creates, on the new hub, the Cluster that old becomes there, in
// workspace namespace: the same name, clientID, labels and agent key. One there
// already is used if it has the same clientID.
func ensureMovedCluster(ctx context.Context, to HubClients, old *fleet.Cluster, namespace string) (*fleet.Cluster, error) {
	if _, err := to.Kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return nil, fmt.Errorf("creating namespace %s on the new hub: %w", namespace, err)
	}
	labels := map[string]string{}
	for k, v := range old.Labels {
		if !strings.HasPrefix(k, "fleet.cattle.io/") && !strings.HasPrefix(k, "management.cattle.io/") {
			labels[k] = v
		}
	}
	want := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: old.Name, Namespace: namespace, Labels: labels,
			Annotations: map[string]string{
				names.AgentKeyAnnotation:      old.Annotations[names.AgentKeyAnnotation],
				names.AgentKeyProofAnnotation: old.Annotations[names.AgentKeyProofAnnotation],
			},
		},
		Spec: fleet.ClusterSpec{ClientID: old.Spec.ClientID},
	}
	clusters := to.Fleet.FleetV1alpha1().Clusters(namespace)
	created, err := clusters.Create(ctx, want, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		have, err := clusters.Get(ctx, old.Name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if have.Spec.ClientID != old.Spec.ClientID {
			return nil, fmt.Errorf("Cluster %s/%s on the new hub is another cluster (another clientID); choose another workspace with --to-namespace", namespace, old.Name)
		}
		return have, nil
	}
	if err != nil {
		return nil, fmt.Errorf("creating Cluster %s/%s on the new hub: %w", namespace, old.Name, err)
	}
	return created, nil
}

// moveTokenName is the name of the token that moves the Cluster named cluster.
func moveTokenName(cluster string) string { return "move-" + cluster }

// moveToken creates on the new hub the token that moves cluster there, bound to it
// and usable only with its agent's key, and returns its registration values.
func moveToken(ctx context.Context, to HubClients, cluster *fleet.Cluster, fromURL string) (registration.Values, error) {
	one := int32(1)
	token := &fleet.ClusterRegistrationToken{
		ObjectMeta: metav1.ObjectMeta{
			Name: moveTokenName(cluster.Name), Namespace: cluster.Namespace,
			Labels:      map[string]string{names.ClusterLabel: cluster.Name},
			Annotations: map[string]string{names.MovedFromAnnotation: fromURL},
		},
		Spec: fleet.ClusterRegistrationTokenSpec{TTL: &metav1.Duration{Duration: moveTokenTTL}, MaxRegistrations: &one},
	}
	if _, err := to.Fleet.FleetV1alpha1().ClusterRegistrationTokens(cluster.Namespace).Create(ctx, token, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return registration.Values{}, fmt.Errorf("creating the move token on the new hub: %w", err)
	}
	raw, err := tokenValues(ctx, to.Kube, to.Fleet, cluster.Namespace, token.Name, time.Minute)
	if err != nil {
		return registration.Values{}, err
	}
	var values registration.Values
	if err := yaml.Unmarshal(raw, &values); err != nil {
		return registration.Values{}, fmt.Errorf("the values of the move token: %w", err)
	}
	return values, values.Validate()
}
