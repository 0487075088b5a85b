package deployer

import (
	"context"
	"fmt"

	"helm.sh/helm/v3/pkg/action"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/helmclient"
	"github.com/flotilla/flotilla/pkg/names"
)

// access is how the agent reaches the downstream cluster for a release: with its own
// rights, or as the ServiceAccount a Bundle names.
type access struct {
	helm *action.Configuration
	kube kubernetes.Interface
}

// serviceAccount is the ServiceAccount bd deploys as ("" for the agent itself). The
// agent bundle always deploys as the agent: it is the agent.
func (d *Deployer) serviceAccount(bd *fleet.BundleDeployment) string {
	if d.isAgent(bd) {
		return ""
	}
	return bd.Spec.Options.ServiceAccount
}

// access is the access for releases in namespace ("" for all), as serviceAccount
// (in the agent's namespace) or, when it is "", as the agent.
func (d *Deployer) access(namespace, serviceAccount string) (access, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	key := namespace + "\x00" + serviceAccount
	if a, ok := d.configs[key]; ok {
		return a, nil
	}
	cfg, kube := d.Downstream, d.DownstreamKube
	if serviceAccount != "" {
		cfg = impersonating(d.Downstream, d.AgentNamespace, serviceAccount)
		var err error
		if kube, err = kubernetes.NewForConfig(cfg); err != nil {
			return access{}, err
		}
	}
	helm, err := helmclient.Configuration(cfg, namespace, d.Log)
	if err != nil {
		return access{}, err
	}
	a := access{helm: helm, kube: kube}
	d.configs[key] = a
	return a, nil
}

// config is the Helm configuration of the agent itself for releases in namespace.
func (d *Deployer) config(namespace string) (*action.Configuration, error) {
	a, err := d.access(namespace, "")
	return a.helm, err
}

// impersonating is cfg acting as the ServiceAccount namespace/name: its user name and
// the groups every ServiceAccount has, so that bindings to either apply as they would
// to a Pod running as it.
func impersonating(cfg *rest.Config, namespace, name string) *rest.Config {
	out := rest.CopyConfig(cfg)
	out.Impersonate = rest.ImpersonationConfig{
		UserName: fmt.Sprintf("system:serviceaccount:%s:%s", namespace, name),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return out
}

// checkServiceAccount fails, saying what to do, when the ServiceAccount a Bundle
// names does not exist in the agent's namespace: impersonating it would work, with
// no rights, and fail later with a less helpful message.
func (d *Deployer) checkServiceAccount(ctx context.Context, name string) error {
	if name == "" {
		return nil
	}
	if name == names.AgentRelease {
		// The agent's own: impersonating it is deploying with the agent's rights.
		return fmt.Errorf("serviceAccount %s is the agent's own ServiceAccount, whose rights a Bundle may not borrow: name one with the rights the Bundle needs", name)
	}
	_, err := d.DownstreamKube.CoreV1().ServiceAccounts(d.AgentNamespace).Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return fmt.Errorf("serviceAccount %s: there is no ServiceAccount %s/%s in this cluster; create it in the agent's namespace, with the rights the Bundle needs", name, d.AgentNamespace, name)
	case err != nil:
		return fmt.Errorf("serviceAccount %s: reading ServiceAccount %s/%s: %w", name, d.AgentNamespace, name, err)
	}
	return nil
}
