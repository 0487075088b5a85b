package render

import (
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// rawPrefix is where, in a chart made of plain manifests, the manifests are kept as
// files: they are added after Helm renders, never taken for templates.
const rawPrefix = "raw-yaml/"

// Chart is the chart Helm installs for files and options: the chart among the files,
// or a chart named name made of the plain manifests (after the YAML overlays of
// options), or, for a kustomization, a chart with nothing to render (kustomize runs
// after Helm: see PostRenderer).
func Chart(files map[string][]byte, options fleet.BundleDeploymentOptions, name string) (*chart.Chart, error) {
	style := StyleOf(files, options)
	if style.ChartDir != "" {
		return load(filesUnder(files, style.ChartDir))
	}
	c := &chart.Chart{Metadata: &chart.Metadata{
		APIVersion:  chart.APIVersionV2,
		Name:        name,
		Version:     "0.0.0",
		Description: "The manifests of a Bundle, deployed by the Flotilla agent",
	}}
	if !style.RawYAML() {
		return c, nil
	}
	var overlays []string
	if options.YAML != nil {
		overlays = options.YAML.Overlays
	}
	files, err := applyOverlays(files, overlays)
	if err != nil {
		return nil, err
	}
	for _, name := range manifests(files) {
		if strings.HasPrefix(name, "templates/") {
			c.Templates = append(c.Templates, &chart.File{Name: name, Data: files[name]})
		} else {
			c.Files = append(c.Files, &chart.File{Name: rawPrefix + name, Data: files[name]})
		}
	}
	return c, nil
}

// manifests are the names of the plain manifests among files, sorted: YAML and JSON
// files, except fleet.yaml and the files of folders holding a fleet.yaml or a chart
// of their own, and except overlays.
func manifests(files map[string][]byte) []string {
	var skip []string
	for name := range files {
		base := path.Base(name)
		if (isFleetYAML(base) && name != base) || strings.HasSuffix(name, "/Chart.yaml") {
			skip = append(skip, path.Dir(name)+"/")
		}
	}
	var out []string
outer:
	for _, name := range sortedNames(files) {
		if isFleetYAML(name) || strings.HasPrefix(name, overlaysDir) {
			continue
		}
		switch path.Ext(name) {
		case ".yaml", ".yml", ".json":
		default:
			continue
		}
		for _, prefix := range skip {
			if strings.HasPrefix(name, prefix) {
				continue outer
			}
		}
		out = append(out, name)
	}
	return out
}

func isFleetYAML(name string) bool { return name == "fleet.yaml" || name == "fleet.yml" }

func filesUnder(files map[string][]byte, dir string) map[string][]byte {
	if dir == "." || dir == "" {
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
	for _, name := range sortedNames(files) {
		buffered = append(buffered, &loader.BufferedFile{Name: name, Data: files[name]})
	}
	c, err := loader.LoadFiles(buffered)
	if err != nil {
		return nil, fmt.Errorf("loading the Bundle's chart: %w", err)
	}
	return c, nil
}

func sortedNames(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
