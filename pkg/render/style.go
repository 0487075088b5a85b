package render

import (
	"path"
	"strings"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlereader"
)

// Style is how a Bundle's files are deployed for some options.
type Style struct {
	// ChartDir is the folder of the chart among the files ("." for the top), or ""
	// when the files are not a chart.
	ChartDir string
	// Kustomization is the kustomization.yaml to build, or "".
	Kustomization string
}

// RawYAML says whether the files are plain manifests: neither a chart nor a
// kustomization.
func (s Style) RawYAML() bool { return s.ChartDir == "" && s.Kustomization == "" }

// StyleOf finds, among files, the chart and the kustomization that options name, as
// Fleet's agent finds them:
//   - the chart: Chart.yaml in the folder helm.chart (or helm.repo) names, the top
//     folder when neither is set; else one downloaded for these options, in
//     .chart/<sha256 of chart:repo:version>/ (directly, or in the folder of its name);
//   - the kustomization: kustomization.yaml in kustomize.dir, the top by default.
func StyleOf(files map[string][]byte, options fleet.BundleDeploymentOptions) Style {
	var s Style
	chartYAML := "Chart.yaml"
	external := ""
	if h := options.Helm; h != nil {
		dir := h.Chart
		if dir == "" {
			dir = h.Repo
		}
		chartYAML = joinClean(dir, "Chart.yaml")
		external = bundlereader.ChartFolder(h) + "/"
	}
	kustomization := "kustomization.yaml"
	if k := options.Kustomize; k != nil && k.Dir != "" {
		kustomization = joinClean(k.Dir, "kustomization.yaml")
	}
	for _, name := range sortedNames(files) {
		switch {
		case name == chartYAML:
			s.ChartDir = path.Dir(name)
		case s.ChartDir == "" && isExternalChartYAML(external, name):
			s.ChartDir = path.Dir(name)
		case name == kustomization:
			s.Kustomization = name
		}
	}
	return s
}

func joinClean(dir, file string) string {
	return strings.TrimPrefix(path.Join(dir, file), "/")
}

// isExternalChartYAML: name is the Chart.yaml of a chart downloaded into the folder
// external, at its top or one folder down.
func isExternalChartYAML(external, name string) bool {
	rest, ok := strings.CutPrefix(name, external)
	if external == "" || !ok {
		return false
	}
	parts := strings.Split(rest, "/")
	return (len(parts) == 1 && parts[0] == "Chart.yaml") || (len(parts) == 2 && parts[1] == "Chart.yaml")
}
