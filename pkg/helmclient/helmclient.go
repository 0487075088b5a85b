// Package helmclient connects the Helm SDK to a cluster given as a client
// configuration, and loads charts from embedded files. The hub uses it to install the
// agent chart into a downstream cluster.
package helmclient

import (
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/sirupsen/logrus"
	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/cli-runtime/pkg/genericclioptions"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
)

// getter is a genericclioptions.RESTClientGetter for one rest.Config and namespace.
type getter struct {
	cfg       *rest.Config
	namespace string
	discovery discovery.CachedDiscoveryInterface
}

var _ genericclioptions.RESTClientGetter = (*getter)(nil)

func (g *getter) ToRESTConfig() (*rest.Config, error) { return rest.CopyConfig(g.cfg), nil }

func (g *getter) ToDiscoveryClient() (discovery.CachedDiscoveryInterface, error) {
	if g.discovery == nil {
		dc, err := discovery.NewDiscoveryClientForConfig(g.cfg)
		if err != nil {
			return nil, err
		}
		g.discovery = memory.NewMemCacheClient(dc)
	}
	return g.discovery, nil
}

func (g *getter) ToRESTMapper() (meta.RESTMapper, error) {
	dc, err := g.ToDiscoveryClient()
	if err != nil {
		return nil, err
	}
	return restmapper.NewShortcutExpander(restmapper.NewDeferredDiscoveryRESTMapper(dc), dc, nil), nil
}

func (g *getter) ToRawKubeConfigLoader() clientcmd.ClientConfig {
	// Helm reads only the default namespace from it: objects that name no namespace go
	// there. An override, because the config itself has no cluster and fails validation.
	return clientcmd.NewDefaultClientConfig(*clientcmdapi.NewConfig(), &clientcmd.ConfigOverrides{
		Context: clientcmdapi.Context{Namespace: g.namespace},
	})
}

// Configuration is a Helm action configuration for releases in namespace of the
// cluster cfg reaches, storing releases in Secrets as the helm CLI does.
func Configuration(cfg *rest.Config, namespace string, log logrus.FieldLogger) (*action.Configuration, error) {
	actionConfig := &action.Configuration{}
	debug := func(format string, args ...interface{}) { log.Debugf(format, args...) }
	if err := actionConfig.Init(&getter{cfg: cfg, namespace: namespace}, namespace, "secret", debug); err != nil {
		return nil, fmt.Errorf("helm configuration for namespace %s: %w", namespace, err)
	}
	return actionConfig, nil
}

// LoadChart loads the chart in directory dir of fsys.
func LoadChart(fsys fs.FS, dir string) (*chart.Chart, error) {
	var files []*loader.BufferedFile
	err := fs.WalkDir(fsys, dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		files = append(files, &loader.BufferedFile{Name: strings.TrimPrefix(p, path.Clean(dir)+"/"), Data: data})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("reading chart %s: %w", dir, err)
	}
	return loader.LoadFiles(files)
}
