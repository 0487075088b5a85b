package bundlereader

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/names"
	"github.com/flotilla/flotilla/pkg/target"
)

// Options are what the caller of a read adds to what the folders say: `hub apply`'s
// flags, or a GitRepo's fields.
type Options struct {
	// Labels are added to every Bundle.
	Labels map[string]string
	// Targets and TargetRestrictions are appended to every Bundle's, unless its
	// fleet.yaml has overrideTargets.
	Targets            []fleet.BundleTarget
	TargetRestrictions []fleet.BundleTargetRestriction
	// TargetNamespace, ServiceAccount, Paused, KeepResources, SyncGeneration and
	// CorrectDrift, when set, override every Bundle's.
	TargetNamespace string
	ServiceAccount  string
	Paused          bool
	KeepResources   bool
	SyncGeneration  int64
	CorrectDrift    *fleet.CorrectDrift
	// Compress stores every file as base64+gz. Files that are not UTF-8 always are,
	// and so is every file of a Bundle that would otherwise take 1,000,000 bytes.
	Compress bool
	// Auth is how charts are downloaded.
	Auth Auth
	// HTTPClient, if set, makes the downloads (its transport, with Auth's TLS settings).
	HTTPClient *http.Client
	// MaxSize bounds what one Bundle's files, its downloaded charts included, may
	// take; 0 means content.DefaultMaxSize.
	MaxSize int64
	// FleetFile, if set, is the file of the folder read instead of its fleet.yaml
	// (a GitRepo's bundles[].options); it is not one of the Bundle's files.
	FleetFile string
}

// compressAt is the size of a Bundle's JSON from which every file is compressed,
// as Fleet does.
const compressAt = 1000000

// Read makes the Bundle of the folder dir, named name unless its fleet.yaml names it.
// A folder with no files to deploy gives a Bundle without resources.
func Read(ctx context.Context, name, dir string, opts Options) (*fleet.Bundle, error) {
	if opts.MaxSize <= 0 {
		opts.MaxSize = content.DefaultMaxSize
	}
	fy, err := readFleetYAML(dir, opts.FleetFile)
	if err != nil {
		return nil, err
	}
	files, err := readFolder(dir, opts.MaxSize)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", dir, err)
	}
	if opts.FleetFile != "" {
		delete(files, filepath.ToSlash(filepath.Clean(opts.FleetFile)))
	}

	spec := *fy.BundleSpec.DeepCopy()
	spec.Targets = append(spec.Targets, fy.TargetCustomizations...)
	nameTargets(spec.Targets)
	propagateChart(&spec)
	slashRepos(&spec)
	if err := mergeValuesFiles(&spec, files); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	f := newFetcher(files, opts)
	if err := addCharts(ctx, &spec, files, f); err != nil {
		return nil, fmt.Errorf("%s: %w", dir, err)
	}
	if spec.Helm == nil || !spec.Helm.DisableDependencyUpdate {
		if err := addDependencies(ctx, files, f); err != nil {
			return nil, fmt.Errorf("%s: %w", dir, err)
		}
	}

	b := &fleet.Bundle{
		TypeMeta:   typeMeta,
		ObjectMeta: fy.objectMeta(name),
		Spec:       spec,
	}
	for k, v := range opts.Labels {
		if b.Labels == nil {
			b.Labels = map[string]string{}
		}
		b.Labels[k] = v
	}
	applyOptions(b, fy, opts)

	if b.Spec.Resources, err = resources(files, opts.Compress); err != nil {
		return nil, err
	}
	if !opts.Compress {
		if raw, err := json.Marshal(b); err != nil {
			return nil, err
		} else if len(raw) >= compressAt {
			if b.Spec.Resources, err = resources(files, true); err != nil {
				return nil, err
			}
		}
	}
	return b, nil
}

var typeMeta = fleet.Bundle{}.TypeMeta

func init() {
	typeMeta.APIVersion = fleet.SchemeGroupVersion.String()
	typeMeta.Kind = "Bundle"
}

// nameTargets names unnamed targets after their place: target000, target001, ...
func nameTargets(targets []fleet.BundleTarget) {
	for i := range targets {
		if targets[i].Name == "" {
			targets[i].Name = fmt.Sprintf("target%03d", i)
		}
	}
}

// propagateChart gives the targets that have Helm options the Bundle's chart, repo
// and version where they set none: an agent looks for the chart of the options it
// is given, and a target's options replace the Bundle's.
func propagateChart(spec *fleet.BundleSpec) {
	if spec.Helm == nil {
		return
	}
	for i := range spec.Targets {
		h := spec.Targets[i].Helm
		if h == nil {
			continue
		}
		if h.Chart == "" {
			h.Chart = spec.Helm.Chart
		}
		if h.Repo == "" {
			h.Repo = spec.Helm.Repo
		}
		if h.Version == "" {
			h.Version = spec.Helm.Version
		}
	}
}

// slashRepos ends the URLs of chart repositories with a slash, as Fleet v0.9's
// `fleet apply` wrote them into Bundles (the chart's folder is named after them).
func slashRepos(spec *fleet.BundleSpec) {
	for _, h := range allHelm(spec) {
		if h != nil && h.Repo != "" && !strings.HasPrefix(h.Repo, "oci://") && !strings.HasSuffix(h.Repo, "/") {
			h.Repo += "/"
		}
	}
}

// allHelm lists the Helm options of the Bundle and of each target, nil where unset.
func allHelm(spec *fleet.BundleSpec) []*fleet.HelmOptions {
	helms := []*fleet.HelmOptions{spec.Helm}
	for i := range spec.Targets {
		helms = append(helms, spec.Targets[i].Helm)
	}
	return helms
}

// mergeValuesFiles merges the files named in helm.valuesFiles (of the Bundle and of
// each target) into its helm.values, the files winning; the files must be among
// the folder's.
func mergeValuesFiles(spec *fleet.BundleSpec, files map[string][]byte) error {
	for _, h := range allHelm(spec) {
		if h == nil || len(h.ValuesFiles) == 0 {
			continue
		}
		values := map[string]interface{}{}
		if h.Values != nil {
			values = h.Values.DeepCopy().Data
		}
		for _, name := range h.ValuesFiles {
			data, ok := files[path.Clean(name)]
			if !ok || path.IsAbs(name) {
				return fmt.Errorf("helm.valuesFiles: %q is not a file of the folder", name)
			}
			v := map[string]interface{}{}
			if err := yaml.Unmarshal(data, &v); err != nil {
				return fmt.Errorf("helm.valuesFiles: %s: %w", name, err)
			}
			values = target.MergeValues(values, v)
		}
		if len(values) > 0 {
			h.Values = &fleet.GenericMap{Data: values}
		}
	}
	return nil
}

// fetcher downloads for one Bundle: one downloader (so one count of downloads, and
// each repository index read once) and one budget, what --max-bundle-size leaves
// after the folder's files.
type fetcher struct {
	opts   Options
	budget int64
	d      *downloader
}

func newFetcher(files map[string][]byte, opts Options) *fetcher {
	f := &fetcher{opts: opts, budget: opts.MaxSize}
	for name, data := range files {
		f.budget -= int64(len(name) + len(data))
	}
	return f
}

// downloader is the Bundle's downloader, allowed what the budget has left.
func (f *fetcher) downloader() (*downloader, error) {
	if f.d == nil {
		d, err := newDownloader(f.opts.Auth, f.opts.HTTPClient, f.opts.MaxSize)
		if err != nil {
			return nil, err
		}
		f.d = d
	}
	f.d.limit = max(f.budget, 0)
	return f.d, nil
}

// add puts data into files as name, taking it off the budget; what names what is
// being added, for the error.
func (f *fetcher) add(files map[string][]byte, name string, data []byte, what string) error {
	if f.budget -= int64(len(name) + len(data)); f.budget < 0 {
		return &content.TooLargeError{What: what, Limit: f.opts.MaxSize}
	}
	files[name] = data
	return nil
}

// addCharts downloads the charts the Bundle's and its targets' Helm options name,
// each once, into files under ChartFolder.
func addCharts(ctx context.Context, spec *fleet.BundleSpec, files map[string][]byte, f *fetcher) error {
	for _, h := range allHelm(spec) {
		remote, err := isRemote(h, files)
		if err != nil {
			return err
		}
		if !remote {
			continue
		}
		folder := ChartFolder(h)
		if hasPrefix(files, folder+"/") {
			continue
		}
		d, err := f.downloader()
		if err != nil {
			return err
		}
		chart, err := d.chart(ctx, h)
		if err != nil {
			return err
		}
		for name, data := range chart {
			if strings.HasPrefix(path.Base(name), ".") || strings.Contains(name, "/.") || strings.HasPrefix(name, ".") {
				continue
			}
			if err := f.add(files, folder+"/"+name, data, "the Bundle with "+describe(h)); err != nil {
				return err
			}
		}
	}
	return nil
}

func hasPrefix(files map[string][]byte, prefix string) bool {
	for name := range files {
		if strings.HasPrefix(name, prefix) {
			return true
		}
	}
	return false
}

// applyOptions sets the targets and what the caller overrides.
func applyOptions(b *fleet.Bundle, fy *FleetYAML, opts Options) {
	if fy.OverrideTargets != nil {
		b.Spec.Targets, b.Spec.TargetRestrictions = nil, nil
		for _, t := range fy.OverrideTargets {
			b.Spec.Targets = append(b.Spec.Targets, fleet.BundleTarget{
				Name:                 t.Name,
				ClusterName:          t.ClusterName,
				ClusterSelector:      t.ClusterSelector,
				ClusterGroup:         t.ClusterGroup,
				ClusterGroupSelector: t.ClusterGroupSelector,
			})
			b.Spec.TargetRestrictions = append(b.Spec.TargetRestrictions, t)
		}
	} else {
		b.Spec.Targets = append(b.Spec.Targets, opts.Targets...)
		b.Spec.TargetRestrictions = append(b.Spec.TargetRestrictions, opts.TargetRestrictions...)
	}
	if len(b.Spec.Targets) == 0 {
		b.Spec.Targets = []fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}}
	}
	if opts.TargetNamespace != "" {
		b.Spec.TargetNamespace = opts.TargetNamespace
		for i := range b.Spec.Targets {
			b.Spec.Targets[i].TargetNamespace = opts.TargetNamespace
		}
	}
	if opts.ServiceAccount != "" {
		// Every target's too: a fleet.yaml's targetCustomizations may not deploy as
		// another service account than the one its GitRepo (or restriction) says.
		b.Spec.ServiceAccount = opts.ServiceAccount
		for i := range b.Spec.Targets {
			b.Spec.Targets[i].ServiceAccount = opts.ServiceAccount
		}
	}
	if opts.Paused {
		b.Spec.Paused = true
	}
	if opts.KeepResources {
		b.Spec.KeepResources = true
	}
	if opts.SyncGeneration != 0 {
		b.Spec.ForceSyncGeneration = opts.SyncGeneration
	}
	if opts.CorrectDrift != nil && opts.CorrectDrift.Enabled {
		b.Spec.CorrectDrift = opts.CorrectDrift.DeepCopy()
	}
}

// resources are files as a Bundle holds them, sorted by name: text as it is, other
// bytes (and everything when compress is set) as base64+gz.
func resources(files map[string][]byte, compress bool) ([]fleet.BundleResource, error) {
	out := make([]fleet.BundleResource, 0, len(files))
	for name, data := range files {
		r := fleet.BundleResource{Name: name}
		if compress || !utf8.Valid(data) {
			encoded, err := content.Base64Gzip(data)
			if err != nil {
				return nil, err
			}
			r.Content, r.Encoding = encoded, "base64+gz"
		} else {
			r.Content = string(data)
		}
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Folder is one folder that becomes a Bundle: its path and the Bundle's name.
type Folder struct {
	Path string
	Name string
}

// Find lists the folders under root that become Bundles named after name, as
// `fleet apply` finds them: root itself when it has a fleet.yaml, or files to
// deploy not under a folder with its own; and every folder below with a
// fleet.yaml. Hidden folders are not looked into. root is relative to where the
// names are derived from (the command's working directory).
func Find(name, root string) ([]Folder, error) {
	return FindFrom(name, "", root)
}

// FindFrom is Find with the names derived from the folders' paths relative to base
// (a checkout of a GitRepo), or as they are when base is "".
func FindFrom(name, base, root string) ([]Folder, error) {
	var out []Folder
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			return nil
		}
		isRoot := p == root
		if !isRoot && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		found := hasFleetYAML(p)
		if isRoot && !found {
			if found, err = hasLooseManifests(p); err != nil {
				return err
			}
		}
		if found {
			named := p
			if base != "" {
				rel, err := filepath.Rel(base, p)
				if err != nil {
					return err
				}
				named = rel
			}
			out = append(out, Folder{Path: p, Name: names.BundleForPath(name, filepath.ToSlash(named))})
		}
		return nil
	})
	return out, err
}

// hasLooseManifests says whether dir, or a folder below it without a fleet.yaml,
// holds a .yaml or .yml file.
func hasLooseManifests(dir string) (bool, error) {
	if hasFleetYAML(dir) {
		return false, nil
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.IsDir() {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if found, err := hasLooseManifests(filepath.Join(dir, e.Name())); err != nil || found {
				return found, err
			}
			continue
		}
		if ext := filepath.Ext(e.Name()); ext == ".yaml" || ext == ".yml" {
			return true, nil
		}
	}
	return false, nil
}
