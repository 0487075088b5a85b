package deployer

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/target"
)

// manifestsTemplate renders every plain manifest file as it is: the files are the
// chart's Files, read with .Files.Get, so braces in them are never taken for Helm
// template actions.
const manifestsTemplate = `{{- range $path, $_ := .Files.Glob "manifests/**" }}
---
{{ $.Files.Get $path }}
{{- end }}
`

// Chart turns a Bundle's files into a Helm chart: the chart at helm.chart, or the
// chart at the top (a Chart.yaml there), or else the YAML and JSON files as plain
// manifests of a chart named after the release.
func Chart(files map[string][]byte, options fleet.BundleDeploymentOptions, releaseName string) (*chart.Chart, error) {
	helm := options.Helm
	if helm != nil && helm.Chart != "" {
		if helm.Repo != "" || strings.Contains(helm.Chart, "://") {
			return nil, fmt.Errorf("helm.chart %q with helm.repo %q: charts are not downloaded by the agent; put the chart's files in the Bundle's resources and set helm.chart to their folder", helm.Chart, helm.Repo)
		}
		dir := strings.Trim(path.Clean(helm.Chart), "/")
		if dir == "." {
			dir = ""
		}
		sub := filesUnder(files, dir)
		if _, ok := sub["Chart.yaml"]; !ok {
			return nil, fmt.Errorf("helm.chart %q: no Chart.yaml in the Bundle's resources under %q", helm.Chart, dir)
		}
		return load(sub)
	}
	if _, ok := files["Chart.yaml"]; ok {
		return load(files)
	}
	return plainChart(files, releaseName)
}

func filesUnder(files map[string][]byte, dir string) map[string][]byte {
	if dir == "" {
		return files
	}
	out := map[string][]byte{}
	for name, data := range files {
		if rest, ok := strings.CutPrefix(name, dir+"/"); ok {
			out[rest] = data
		}
	}
	return out
}

func load(files map[string][]byte) (*chart.Chart, error) {
	var buffered []*loader.BufferedFile
	for _, name := range sortedKeys(files) {
		buffered = append(buffered, &loader.BufferedFile{Name: name, Data: files[name]})
	}
	c, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, fmt.Errorf("loading the Bundle's chart: %w", err)
	}
	return c, nil
}

func plainChart(files map[string][]byte, releaseName string) (*chart.Chart, error) {
	c := &chart.Chart{
		Metadata: &chart.Metadata{
			APIVersion:  chart.APIVersionV2,
			Name:        releaseName,
			Version:     "0.0.0",
			Description: "Plain manifests of a Bundle, deployed by the Flotilla agent",
		},
		Templates: []*chart.File{{Name: "templates/manifests.yaml", Data: []byte(manifestsTemplate)}},
	}
	for _, name := range sortedKeys(files) {
		if !isManifest(name) {
			continue
		}
		c.Files = append(c.Files, &chart.File{Name: "manifests/" + name, Data: files[name]})
	}
	if len(c.Files) == 0 {
		return nil, fmt.Errorf("the Bundle has no Chart.yaml and no .yaml, .yml or .json manifests")
	}
	return c, nil
}

func isManifest(name string) bool {
	base := path.Base(name)
	if base == "fleet.yaml" || base == "fleet.yml" || strings.HasPrefix(name, "overlays/") {
		return false
	}
	switch path.Ext(name) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
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
