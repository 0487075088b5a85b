package render

import (
	"context"
	"fmt"
	"path"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/storage"
	"helm.sh/helm/v3/pkg/storage/driver"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/target"
)

// Release is what Helm installs for one Bundle on one cluster.
type Release struct {
	Chart        *chart.Chart
	Values       map[string]interface{}
	PostRenderer *PostRenderer
}

// New makes the Release of files (a Bundle's, decoded) for options, named name;
// extra are values read from the cluster (helm.valuesFrom).
func New(files map[string][]byte, options fleet.BundleDeploymentOptions, name string, extra []map[string]interface{}) (*Release, error) {
	if err := checkChart(files, options); err != nil {
		return nil, err
	}
	c, err := Chart(files, options, name)
	if err != nil {
		return nil, err
	}
	if err := checkCRDs(c, options.TargetNamespace); err != nil {
		return nil, err
	}
	values, err := Values(files, options, extra)
	if err != nil {
		return nil, err
	}
	return &Release{Chart: c, Values: values, PostRenderer: &PostRenderer{Files: files, Options: options, Chart: c}}, nil
}

// checkChart refuses options naming a chart the files do not hold, rather than
// deploying the files as something else.
func checkChart(files map[string][]byte, options fleet.BundleDeploymentOptions) error {
	h := options.Helm
	if h == nil || (h.Chart == "" && h.Repo == "") || StyleOf(files, options).ChartDir != "" {
		return nil
	}
	if h.Repo != "" || strings.Contains(h.Chart, "://") {
		return fmt.Errorf("the chart of helm.chart %q, helm.repo %q, helm.version %q is not among the Bundle's files (under .chart/): charts are downloaded when the Bundle is made; make it with hub apply or fleet apply", h.Chart, h.Repo, h.Version)
	}
	return fmt.Errorf("helm.chart %q: no Chart.yaml in the Bundle's resources under %q", h.Chart, strings.Trim(path.Clean(h.Chart), "/"))
}

// Values are the release's values: helm.valuesFiles from the Bundle's files, then
// extra (values read from the downstream cluster), then helm.values, later ones
// winning key by key.
func Values(files map[string][]byte, options fleet.BundleDeploymentOptions, extra []map[string]interface{}) (map[string]interface{}, error) {
	out := map[string]interface{}{}
	helm := options.Helm
	if helm == nil {
		return out, nil
	}
	for _, name := range helm.ValuesFiles {
		data, ok := files[strings.TrimPrefix(path.Clean("/"+name), "/")]
		if !ok {
			return nil, fmt.Errorf("helm.valuesFiles: %q is not among the Bundle's resources", name)
		}
		v := map[string]interface{}{}
		if err := yaml.Unmarshal(data, &v); err != nil {
			return nil, fmt.Errorf("helm.valuesFiles: %s: %w", name, err)
		}
		out = target.MergeValues(out, v)
	}
	for _, v := range extra {
		out = target.MergeValues(out, v)
	}
	if helm.Values != nil {
		out = target.MergeValues(out, helm.Values.DeepCopy().Data)
	}
	return out, nil
}

// KubeVersion is the Kubernetes version templates see when there is no cluster to ask.
var KubeVersion = chartutil.KubeVersion{Version: "v1.37.2", Major: "1", Minor: "37"}

// Template renders r as the release name in namespace, without a cluster, as
// `helm template` does: the manifests a cluster would get.
func Template(ctx context.Context, r *Release, namespace, name string) (string, error) {
	cfg := &action.Configuration{Releases: storage.Init(driver.NewMemory()), Capabilities: chartutil.DefaultCapabilities}
	in := action.NewInstall(cfg)
	in.DryRun, in.ClientOnly, in.Replace = true, true, true
	in.ReleaseName, in.Namespace = name, namespace
	in.KubeVersion = &KubeVersion
	if r.PostRenderer != nil {
		// A nil *PostRenderer in the interface would be called.
		in.PostRenderer = r.PostRenderer
	}
	rel, err := in.RunWithContext(ctx, r.Chart, r.Values)
	if err != nil {
		return "", err
	}
	return rel.Manifest, nil
}

// ReleaseNamespace is where the release of options goes: targetNamespace, else
// defaultNamespace, else "default".
func ReleaseNamespace(options fleet.BundleDeploymentOptions) string {
	switch {
	case options.TargetNamespace != "":
		return options.TargetNamespace
	case options.DefaultNamespace != "":
		return options.DefaultNamespace
	}
	return "default"
}

// ReleaseName is the release's name: helm.releaseName, else the Bundle's name cut to
// a release name's length.
func ReleaseName(options fleet.BundleDeploymentOptions, bundle string) string {
	if options.Helm != nil && options.Helm.ReleaseName != "" {
		return options.Helm.ReleaseName
	}
	return names.ReleaseName(bundle)
}
