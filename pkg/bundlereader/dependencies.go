package bundlereader

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"path"
	"sort"
	"strings"

	"helm.sh/helm/v3/pkg/chart"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
)

// dependencies is what a chart's Chart.yaml (or, for apiVersion v1, its
// requirements.yaml) lists under dependencies.
type dependencies struct {
	Dependencies []*chart.Dependency `json:"dependencies"`
}

// addDependencies puts into files, for every chart among them (a folder with a
// Chart.yaml, downloaded ones included), the charts it depends on that its charts/
// folder lacks, as `helm dependency update` would and as Fleet's apply does: from the
// chart repository, OCI registry or folder (file://, inside the folder) each names,
// packed into charts/<name>-<version>.tgz. Agents never download them.
func addDependencies(ctx context.Context, files map[string][]byte, f *fetcher) error {
	for _, dir := range chartDirs(files) {
		deps, err := chartDependencies(files, dir)
		if err != nil {
			return err
		}
		for _, dep := range deps {
			if dep.Repository == "" || hasDependency(files, dir, dep.Name) {
				continue
			}
			archive, version, err := fetchDependency(ctx, files, dir, dep, f)
			if err != nil {
				return fmt.Errorf("the dependency %s of the chart %s: %w", dep.Name, displayDir(dir), err)
			}
			name := path.Join(dir, "charts", fmt.Sprintf("%s-%s.tgz", dep.Name, version))
			if err := f.add(files, name, archive, "the Bundle with the dependencies of "+displayDir(dir)); err != nil {
				return err
			}
		}
	}
	return nil
}

func displayDir(dir string) string {
	if dir == "." {
		return "at the top of the folder"
	}
	return dir
}

// chartDirs are the folders among files holding a Chart.yaml, sorted.
func chartDirs(files map[string][]byte) []string {
	var dirs []string
	for name := range files {
		if path.Base(name) == "Chart.yaml" {
			dirs = append(dirs, path.Dir(name))
		}
	}
	sort.Strings(dirs)
	return dirs
}

func chartDependencies(files map[string][]byte, dir string) ([]*chart.Dependency, error) {
	var out []*chart.Dependency
	for _, file := range []string{"Chart.yaml", "requirements.yaml"} {
		data, ok := files[path.Join(dir, file)]
		if !ok {
			continue
		}
		var d dependencies
		if err := yaml.Unmarshal(data, &d); err != nil {
			return nil, fmt.Errorf("%s: %w", path.Join(dir, file), err)
		}
		for _, dep := range d.Dependencies {
			if dep != nil && dep.Name != "" {
				out = append(out, dep)
			}
		}
	}
	return out, nil
}

// hasDependency says whether the chart in dir has name in its charts/ folder, as an
// archive or unpacked.
func hasDependency(files map[string][]byte, dir, name string) bool {
	charts := path.Join(dir, "charts") + "/"
	for file := range files {
		rest, ok := strings.CutPrefix(file, charts)
		if !ok {
			continue
		}
		if rest == name+"/Chart.yaml" || (strings.HasPrefix(rest, name+"-") && strings.HasSuffix(rest, ".tgz") && !strings.Contains(rest, "/")) {
			return true
		}
	}
	return false
}

// fetchDependency gets dep's chart archive and the version it holds.
func fetchDependency(ctx context.Context, files map[string][]byte, dir string, dep *chart.Dependency, f *fetcher) ([]byte, string, error) {
	repo := dep.Repository
	switch {
	case strings.HasPrefix(repo, "file://"):
		return packFolder(files, dir, dep)
	case strings.HasPrefix(repo, "@") || strings.HasPrefix(repo, "alias:"):
		return nil, "", fmt.Errorf("repository %q is a name from someone's helm repo list: write the repository's URL", repo)
	}
	dl, err := f.downloader()
	if err != nil {
		return nil, "", err
	}
	h := &fleet.HelmOptions{Chart: dep.Name, Repo: repo, Version: dep.Version}
	var archive []byte
	if strings.HasPrefix(repo, "oci://") {
		archive, err = dl.oci(ctx, strings.TrimSuffix(repo, "/")+"/"+dep.Name, dep.Version)
	} else {
		var chartURL string
		if chartURL, err = dl.fromIndex(ctx, h); err == nil {
			archive, err = dl.get(ctx, chartURL, dl.limit)
		}
	}
	if err != nil {
		return nil, "", err
	}
	version, err := archiveVersion(archive, dl.limit)
	if err != nil {
		return nil, "", err
	}
	return archive, version, nil
}

// archiveVersion is the version in a chart archive's Chart.yaml.
func archiveVersion(archive []byte, limit int64) (string, error) {
	files, err := content.Unpack(archive, limit)
	if err != nil {
		return "", err
	}
	for name, data := range files {
		if strings.Count(name, "/") == 1 && path.Base(name) == "Chart.yaml" {
			var m chart.Metadata
			if err := yaml.Unmarshal(data, &m); err != nil {
				return "", fmt.Errorf("%s: %w", name, err)
			}
			if m.Version == "" {
				return "", fmt.Errorf("%s has no version", name)
			}
			return m.Version, nil
		}
	}
	return "", fmt.Errorf("the archive holds no Chart.yaml")
}

// packFolder packs the chart in the folder a file:// repository names, which must be
// among files (inside the folder being read).
func packFolder(files map[string][]byte, dir string, dep *chart.Dependency) ([]byte, string, error) {
	rel := strings.TrimPrefix(dep.Repository, "file://")
	src := path.Join(dir, rel)
	if path.IsAbs(rel) || src == ".." || strings.HasPrefix(src, "../") {
		return nil, "", fmt.Errorf("repository %q leaves the folder", dep.Repository)
	}
	meta, ok := files[path.Join(src, "Chart.yaml")]
	if !ok {
		return nil, "", fmt.Errorf("repository %q: no Chart.yaml in %s", dep.Repository, src)
	}
	var m chart.Metadata
	if err := yaml.Unmarshal(meta, &m); err != nil {
		return nil, "", fmt.Errorf("%s/Chart.yaml: %w", src, err)
	}
	var names []string
	for name := range files {
		if strings.HasPrefix(name, src+"/") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	tw := tar.NewWriter(zw)
	for _, name := range names {
		data := files[name]
		hd := &tar.Header{Name: dep.Name + "/" + strings.TrimPrefix(name, src+"/"), Mode: 0o644, Size: int64(len(data)), Typeflag: tar.TypeReg}
		if err := tw.WriteHeader(hd); err != nil {
			return nil, "", err
		}
		if _, err := tw.Write(data); err != nil {
			return nil, "", err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, "", err
	}
	if err := zw.Close(); err != nil {
		return nil, "", err
	}
	return buf.Bytes(), m.Version, nil
}
