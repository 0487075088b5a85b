// Package hubctl is what the hub's user commands do: `hub token create` makes a
// ClusterRegistrationToken and prints how to install an agent with it, `hub cluster
// list` prints the Clusters of every workspace, and `hub cluster pending|approve|
// refuse` answer the clusters waiting for a hub admin's approval.
package hubctl

import (
	"context"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/registration"
)

// TokenOptions are the options of `hub token create`.
type TokenOptions struct {
	Namespace string
	Name      string
	// TTL, if not zero, ends the token after this long.
	TTL time.Duration
	// Output, if set, is where the values.yaml is written.
	Output string
	// Chart is the agent chart the printed command installs.
	Chart string
	// Wait bounds the wait for the hub to write the token's values.
	Wait time.Duration
	// RequireApproval makes new clusters wait for a hub admin's approval.
	RequireApproval bool
	// MaxRegistrations, if not zero, is how many clusters the token may register.
	MaxRegistrations int32
}

// CreateToken creates the token (and its namespace) unless it exists, waits for the
// hub to write its values Secret, and prints the helm install command to out.
func CreateToken(ctx context.Context, kube kubernetes.Interface, client versioned.Interface, opts TokenOptions, out io.Writer) error {
	if _, err := kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: opts.Namespace}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", opts.Namespace, err)
	}
	token := &fleet.ClusterRegistrationToken{
		ObjectMeta: metav1.ObjectMeta{Name: opts.Name, Namespace: opts.Namespace},
		Spec:       fleet.ClusterRegistrationTokenSpec{RequireApproval: opts.RequireApproval},
	}
	if opts.MaxRegistrations > 0 {
		token.Spec.MaxRegistrations = &opts.MaxRegistrations
	}
	if opts.TTL > 0 {
		token.Spec.TTL = &metav1.Duration{Duration: opts.TTL}
	}
	tokens := client.FleetV1alpha1().ClusterRegistrationTokens(opts.Namespace)
	if _, err := tokens.Create(ctx, token, metav1.CreateOptions{}); apierrors.IsAlreadyExists(err) {
		fmt.Fprintf(os.Stderr, "ClusterRegistrationToken %s/%s exists; using it\n", opts.Namespace, opts.Name)
	} else if err != nil {
		return fmt.Errorf("creating ClusterRegistrationToken %s/%s: %w", opts.Namespace, opts.Name, err)
	}

	values, err := tokenValues(ctx, kube, client, opts.Namespace, opts.Name, opts.Wait)
	if err != nil {
		return err
	}

	valuesFile := opts.Output
	if valuesFile != "" {
		if err := os.WriteFile(valuesFile, values, 0o600); err != nil {
			return fmt.Errorf("writing %s: %w", valuesFile, err)
		}
		fmt.Fprintf(out, "# Wrote %s. In the cluster to register, run:\n", valuesFile)
	} else {
		valuesFile = "values.yaml"
		fmt.Fprintf(out, "# Fetch the token's values, then, in the cluster to register, install the agent:\n")
		fmt.Fprintf(out, "kubectl -n %s get secret %s -o 'jsonpath={.data.%s}' | base64 --decode > %s\n",
			opts.Namespace, opts.Name, registration.ValuesKey, valuesFile)
	}
	fmt.Fprintf(out, "helm -n %s install --create-namespace --values %s %s %s\n", names.SystemNamespace, valuesFile, names.AgentRelease, opts.Chart)
	return nil
}

// tokenValues waits, for at most timeout, for the hub to write the values.yaml of
// token namespace/name, and returns it.
func tokenValues(ctx context.Context, kube kubernetes.Interface, client versioned.Interface, namespace, name string, timeout time.Duration) ([]byte, error) {
	var values []byte
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		t, err := client.FleetV1alpha1().ClusterRegistrationTokens(namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil || t.Status.SecretName == "" {
			return false, nil
		}
		s, err := kube.CoreV1().Secrets(namespace).Get(ctx, t.Status.SecretName, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		values = s.Data[registration.ValuesKey]
		return len(values) > 0, nil
	})
	if err != nil {
		return nil, fmt.Errorf("the hub has not written the values of ClusterRegistrationToken %s/%s within %s: is the hub running against this cluster?", namespace, name, timeout)
	}
	return values, nil
}

// ListClusters prints the Clusters of namespace (every namespace when empty) with the
// columns of `kubectl get clusters.fleet.cattle.io`.
func ListClusters(ctx context.Context, client versioned.Interface, namespace string, out io.Writer) error {
	list, err := client.FleetV1alpha1().Clusters(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return fmt.Errorf("listing Clusters: %w", err)
	}
	clusters := list.Items
	sort.Slice(clusters, func(i, j int) bool {
		if clusters[i].Namespace != clusters[j].Namespace {
			return clusters[i].Namespace < clusters[j].Namespace
		}
		return clusters[i].Name < clusters[j].Name
	})
	w := tabwriter.NewWriter(out, 0, 8, 3, ' ', 0)
	fmt.Fprintln(w, "NAMESPACE\tNAME\tBUNDLES-READY\tNODES-READY\tSAMPLE-NODE\tLAST-SEEN\tSTATUS")
	for _, c := range clusters {
		lastSeen := ""
		if !c.Status.Agent.LastSeen.IsZero() {
			lastSeen = c.Status.Agent.LastSeen.UTC().Format(time.RFC3339)
		}
		status := ""
		for _, cond := range c.Status.Conditions {
			if cond.Type == fleet.ConditionReady {
				status = cond.Message
			}
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Namespace, c.Name, c.Status.Display.ReadyBundles, c.Status.Display.ReadyNodes,
			c.Status.Display.SampleNode, lastSeen, strings.ReplaceAll(status, "\n", " "))
	}
	return w.Flush()
}
