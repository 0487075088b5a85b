package render

import (
	"fmt"
	"io"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/kube"
	"helm.sh/helm/v3/pkg/release"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/cli-runtime/pkg/resource"
)

// WithHooks is cfg for installing r: Helm does not post-render hooks, so with
// targetNamespace its KubeClient puts each hook in that namespace, and refuses a
// cluster-scoped one, as the post-renderer does every other object. Hooks are created
// through cfg's client, so they have the same rights (a Bundle's serviceAccount) as
// the rest of the release.
func (p *PostRenderer) WithHooks(cfg *action.Configuration) (*action.Configuration, error) {
	ns := p.Options.TargetNamespace
	if ns == "" {
		return cfg, nil
	}
	client, ok := cfg.KubeClient.(*kube.Client)
	if !ok {
		return nil, fmt.Errorf("helm's client is a %T, on which hooks cannot be kept in targetNamespace", cfg.KubeClient)
	}
	out := *cfg
	out.KubeClient = &hookClient{Client: client, namespace: ns}
	return &out, nil
}

// hookClient is Helm's client, with targetNamespace applied to the hooks it builds.
// Helm builds every object it creates, hooks included, with Build; the release's
// other objects have been through the post-renderer already, and objects Helm built
// for earlier releases must keep the namespace they were made in.
type hookClient struct {
	*kube.Client
	namespace string
}

// Build implements kube.Interface.
func (c *hookClient) Build(reader io.Reader, validate bool) (kube.ResourceList, error) {
	list, err := c.Client.Build(reader, validate)
	if err != nil {
		return list, err
	}
	for _, info := range list {
		if err := placeHook(info, c.namespace); err != nil {
			return nil, err
		}
	}
	return list, nil
}

// placeHook applies targetNamespace ns to info when it is a hook.
func placeHook(info *resource.Info, ns string) error {
	u, ok := info.Object.(*unstructured.Unstructured)
	if !ok {
		return fmt.Errorf("unexpected object %T", info.Object)
	}
	if _, hook := u.GetAnnotations()[release.HookAnnotation]; !hook {
		return nil
	}
	clusterScoped := info.Mapping != nil && info.Mapping.Scope.Name() == meta.RESTScopeNameRoot
	if err := place(u, ns, clusterScoped, "hook "); err != nil {
		return err
	}
	info.Namespace = ns
	return nil
}

// checkCRDs refuses a chart whose crds/ folders hold CustomResourceDefinitions under
// targetNamespace: Helm installs them before rendering, past the post-renderer, and
// they are cluster-scoped.
func checkCRDs(c *chart.Chart, ns string) error {
	crds := c.CRDObjects()
	if ns == "" || len(crds) == 0 {
		return nil
	}
	return fmt.Errorf("%s holds CustomResourceDefinitions, which are cluster-scoped, and the Bundle sets namespace (targetNamespace) %s, which puts every object in that namespace: use defaultNamespace to deploy a chart with crds/", crds[0].Filename, ns)
}
