package hubctl

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// Pending is a cluster waiting for a hub admin's approval: a registration request
// (Flotilla's ClusterRegistrationRequest or Fleet's ClusterRegistration) the hub
// holds.
type Pending struct {
	Namespace, Cluster string
	// Kind and Request name the request.
	Kind, Request string
	ClientID      string
	Token         string
	// Labels are the labels the Cluster will have.
	Labels map[string]string
	Since  time.Time
}

// ListPending lists the requests held for approval in namespace (every namespace
// when empty), oldest first.
func ListPending(ctx context.Context, client versioned.Interface, namespace string) ([]Pending, error) {
	requests, err := client.FleetV1alpha1().ClusterRegistrationRequests(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ClusterRegistrationRequests: %w", err)
	}
	fleetRegistrations, err := client.FleetV1alpha1().ClusterRegistrations(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing ClusterRegistrations: %w", err)
	}
	var pending []Pending
	add := func(kind string, meta metav1.ObjectMeta, clientID string, labels map[string]string, status fleet.ClusterRegistrationRequestStatus) {
		req := &fleet.ClusterRegistrationRequest{Status: status}
		if !registration.AwaitingApproval(req) {
			return
		}
		since := meta.CreationTimestamp.Time
		if c := conditions.Get(status.Conditions, fleet.ConditionReady); c != nil {
			if t, err := time.Parse(time.RFC3339, c.LastTransitionTime); err == nil {
				since = t
			}
		}
		pending = append(pending, Pending{
			Namespace: meta.Namespace, Cluster: status.ClusterName, Kind: kind, Request: meta.Name, ClientID: clientID,
			Token: meta.Labels[names.RegistrationTokenLabel], Labels: labels, Since: since,
		})
	}
	for _, r := range requests.Items {
		add("ClusterRegistrationRequest", r.ObjectMeta, r.Spec.ClientID, r.Spec.ClusterLabels, r.Status)
	}
	for _, r := range fleetRegistrations.Items {
		add("ClusterRegistration", r.ObjectMeta, r.Spec.ClientID, r.Spec.ClusterLabels, r.Status)
	}
	sort.Slice(pending, func(i, j int) bool {
		if !pending[i].Since.Equal(pending[j].Since) {
			return pending[i].Since.Before(pending[j].Since)
		}
		return pending[i].Namespace+"/"+pending[i].Request < pending[j].Namespace+"/"+pending[j].Request
	})
	return pending, nil
}

// PrintPending prints the clusters waiting for approval in namespace (every
// namespace when empty).
func PrintPending(ctx context.Context, client versioned.Interface, namespace string, out io.Writer) error {
	pending, err := ListPending(ctx, client, namespace)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tCLUSTER\tTOKEN\tCLIENT-ID\tLABELS\tWAITING-SINCE\tREQUEST")
	for _, p := range pending {
		labels := make([]string, 0, len(p.Labels))
		for k, v := range p.Labels {
			labels = append(labels, k+"="+v)
		}
		sort.Strings(labels)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s/%s\n", p.Namespace, p.Cluster, p.Token, p.ClientID, strings.Join(labels, ","),
			p.Since.UTC().Format(time.RFC3339), p.Kind, p.Request)
	}
	return w.Flush()
}

// Answer approves (or refuses) the cluster named cluster waiting for approval in
// namespace (every namespace when empty; the name must then be waiting in one
// only), by setting names.ApprovalAnnotation on each of its held requests.
func Answer(ctx context.Context, client versioned.Interface, namespace, cluster string, approve bool, out io.Writer) error {
	pending, err := ListPending(ctx, client, namespace)
	if err != nil {
		return err
	}
	var mine []Pending
	workspaces := map[string]bool{}
	for _, p := range pending {
		if p.Cluster == cluster {
			mine = append(mine, p)
			workspaces[p.Namespace] = true
		}
	}
	switch {
	case len(mine) == 0 && namespace == "":
		return fmt.Errorf("no cluster named %s is waiting for approval; `hub cluster pending` lists those that are", cluster)
	case len(mine) == 0:
		return fmt.Errorf("no cluster named %s is waiting for approval in namespace %s; `hub cluster pending` lists those that are", cluster, namespace)
	case len(workspaces) > 1:
		return fmt.Errorf("clusters named %s are waiting for approval in %d workspaces; choose one with -n", cluster, len(workspaces))
	}
	answer, verb := names.ApprovalRefused, "Refused"
	if approve {
		answer, verb = names.ApprovalApproved, "Approved"
	}
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": map[string]string{names.ApprovalAnnotation: answer}}})
	if err != nil {
		return err
	}
	for _, p := range mine {
		var err error
		if p.Kind == "ClusterRegistration" {
			_, err = client.FleetV1alpha1().ClusterRegistrations(p.Namespace).Patch(ctx, p.Request, types.MergePatchType, patch, metav1.PatchOptions{})
		} else {
			_, err = client.FleetV1alpha1().ClusterRegistrationRequests(p.Namespace).Patch(ctx, p.Request, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		if err != nil {
			return fmt.Errorf("answering %s %s/%s: %w", p.Kind, p.Namespace, p.Request, err)
		}
		fmt.Fprintf(out, "%s cluster %s/%s (%s %s, token %s)\n", verb, p.Namespace, cluster, p.Kind, p.Request, p.Token)
	}
	return nil
}
