package hubctl

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlereader"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/generated/clientset/versioned"
	"github.com/flotilla/flotilla/pkg/names"
)

// RepoLabel names, on a Bundle, the NAME of the `hub apply` (or GitRepo) that made
// it; such Bundles that the folders no longer give are deleted by the next apply.
const RepoLabel = "fleet.cattle.io/repo-name"

// CommitLabel records the commit a Bundle was made from.
const CommitLabel = "fleet.cattle.io/commit"

// ApplyOptions are the options of `hub apply`.
type ApplyOptions struct {
	// Name is the prefix of the Bundles' names.
	Name string
	// Dirs are the folders (or globs of folders) to read; default ".".
	Dirs []string
	// Bundles, if set, are read instead of Dirs: each folder is one Bundle, with
	// no search below it (a GitRepo's bundles).
	Bundles []BundleDir
	// BaseDir, if set, is where Dirs are: Bundles are named after their folders'
	// paths below it (a GitRepo's checkout).
	BaseDir string
	// Owner, if set, becomes the controller owner of every Bundle, which is deleted
	// with it (a GitRepo).
	Owner *metav1.OwnerReference
	// Namespace is the workspace the Bundles go to.
	Namespace string
	// Output, if set, receives the Bundles as YAML instead of the hub.
	Output io.Writer
	// Read is what every Bundle gets besides what its folder says.
	Read bundlereader.Options
	// MaxTotalSize, if set, bounds what all the Bundles read take together (their
	// files and downloaded charts, as stored), as Read.MaxSize bounds one: the
	// memory of one GitRepo's sync.
	MaxTotalSize int64
	// Log receives one line per Bundle written.
	Log io.Writer
}

// BundleDir is a folder read as one Bundle.
type BundleDir struct {
	// Dir is the folder, below BaseDir.
	Dir string
	// FleetFile, if set, is read instead of the folder's fleet.yaml, and ends the
	// Bundle's name (without its extension).
	FleetFile string
}

// ReadBundles makes the Bundles of the folders opts names, in the order they are found.
func ReadBundles(ctx context.Context, opts ApplyOptions) ([]*fleet.Bundle, error) {
	if len(opts.Bundles) > 0 {
		return readBundleDirs(ctx, opts)
	}
	dirs := opts.Dirs
	if len(dirs) == 0 {
		dirs = []string{"."}
	}
	var bundles []*fleet.Bundle
	total := newTotal(opts)
	for _, pattern := range dirs {
		if opts.BaseDir != "" {
			pattern = filepath.Join(opts.BaseDir, pattern)
		}
		matches, err := globDirs(pattern)
		if err != nil {
			return nil, err
		}
		for _, root := range matches {
			folders, err := bundlereader.FindFrom(opts.Name, opts.BaseDir, root)
			if err != nil {
				return nil, err
			}
			for _, f := range folders {
				b, err := total.read(ctx, opts, f.Name, f.Path, opts.Read)
				if err != nil {
					return nil, err
				}
				if b != nil {
					bundles = append(bundles, b)
				}
			}
		}
	}
	if len(bundles) == 0 {
		return nil, fmt.Errorf("no resources to deploy in %s", strings.Join(dirs, ", "))
	}
	return bundles, nil
}

func readBundleDirs(ctx context.Context, opts ApplyOptions) ([]*fleet.Bundle, error) {
	var bundles []*fleet.Bundle
	total := newTotal(opts)
	for _, d := range opts.Bundles {
		named := filepath.ToSlash(filepath.Clean(d.Dir))
		if d.FleetFile != "" {
			named = path.Join(named, strings.TrimSuffix(d.FleetFile, filepath.Ext(d.FleetFile)))
		}
		read := opts.Read
		read.FleetFile = d.FleetFile
		b, err := total.read(ctx, opts, names.BundleForPath(opts.Name, named), filepath.Join(opts.BaseDir, d.Dir), read)
		if err != nil {
			return nil, err
		}
		if b != nil {
			bundles = append(bundles, b)
		}
	}
	if len(bundles) == 0 {
		return nil, fmt.Errorf("no resources to deploy in the bundles' folders")
	}
	return bundles, nil
}

// readOne makes the Bundle of the folder dir, or none (said in the log) when it has
// nothing to deploy.
func readOne(ctx context.Context, opts ApplyOptions, name, dir string, read bundlereader.Options) (*fleet.Bundle, error) {
	b, err := bundlereader.Read(ctx, name, dir, read)
	if err != nil {
		return nil, err
	}
	if len(b.Spec.Resources) == 0 {
		fmt.Fprintf(logTo(opts.Log), "%s: no resources to deploy; no Bundle made\n", dir)
		return nil, nil
	}
	b.Namespace = opts.Namespace
	return b, nil
}

// TotalTooLargeError is Bundles that together take more than ApplyOptions.MaxTotalSize.
type TotalTooLargeError struct {
	// Bundle is the one being read when the bound was passed.
	Bundle string
	Limit  int64
}

func (e *TotalTooLargeError) Error() string {
	return fmt.Sprintf("the Bundles take more than %d bytes in all, the limit, by Bundle %s", e.Limit, e.Bundle)
}

// total is what the Bundles read so far take, against MaxTotalSize.
type total struct {
	perBundle, left int64 // left < 0: no bound
}

func newTotal(opts ApplyOptions) *total {
	t := &total{perBundle: opts.Read.MaxSize, left: -1}
	if t.perBundle <= 0 {
		t.perBundle = content.DefaultMaxSize
	}
	if opts.MaxTotalSize > 0 {
		t.left = opts.MaxTotalSize
	}
	return t
}

// read reads one Bundle, with no more than what is left of the total for it.
func (t *total) read(ctx context.Context, opts ApplyOptions, name, dir string, read bundlereader.Options) (*fleet.Bundle, error) {
	if t.left < 0 {
		return readOne(ctx, opts, name, dir, read)
	}
	read.MaxSize = t.perBundle
	bounded := t.left < read.MaxSize
	if bounded {
		read.MaxSize = t.left
	}
	tooLarge := &TotalTooLargeError{Bundle: name, Limit: opts.MaxTotalSize}
	if read.MaxSize <= 0 {
		return nil, tooLarge
	}
	b, err := readOne(ctx, opts, name, dir, read)
	var past *content.TooLargeError
	if bounded && errors.As(err, &past) {
		return nil, tooLarge
	}
	if err != nil || b == nil {
		return b, err
	}
	if t.left -= size(b); t.left < 0 {
		return nil, tooLarge
	}
	return b, nil
}

// size is what b's resources take as stored.
func size(b *fleet.Bundle) int64 {
	var n int64
	for _, r := range b.Spec.Resources {
		n += int64(len(r.Name) + len(r.Content))
	}
	return n
}

func logTo(w io.Writer) io.Writer {
	if w == nil {
		return os.Stderr
	}
	return w
}

// globDirs lists the folders pattern matches, relative ones as they are.
func globDirs(pattern string) ([]string, error) {
	matches, err := filepath.Glob(pattern)
	if err != nil {
		return nil, fmt.Errorf("path %q: %w", pattern, err)
	}
	var dirs []string
	for _, m := range matches {
		if fi, err := os.Stat(m); err == nil && fi.IsDir() {
			dirs = append(dirs, m)
		}
	}
	if len(dirs) == 0 {
		return nil, fmt.Errorf("path %q: no such folder", pattern)
	}
	return dirs, nil
}

// Apply makes the Bundles of the folders and writes them to opts.Output, or creates
// or updates them on the hub (and deletes those of an earlier apply of the same
// NAME, labelled with RepoLabel, that the folders no longer give).
func Apply(ctx context.Context, client versioned.Interface, opts ApplyOptions) error {
	bundles, err := ReadBundles(ctx, opts)
	if err != nil {
		return err
	}
	if opts.Output != nil {
		return WriteBundles(opts.Output, bundles)
	}
	return Save(ctx, client, opts, bundles)
}

// Save creates or updates bundles on the hub and deletes those of an earlier apply
// of the same NAME that are not among them.
func Save(ctx context.Context, client versioned.Interface, opts ApplyOptions, bundles []*fleet.Bundle) error {
	keep := map[string]bool{}
	for _, b := range bundles {
		if opts.Owner != nil {
			b.OwnerReferences = []metav1.OwnerReference{*opts.Owner}
		}
		if err := saveBundle(ctx, client, b, logTo(opts.Log)); err != nil {
			return err
		}
		keep[b.Name] = true
	}
	return prune(ctx, client, opts, keep)
}

// WriteBundles writes bundles as YAML documents.
func WriteBundles(w io.Writer, bundles []*fleet.Bundle) error {
	for i, b := range bundles {
		data, err := bundleYAML(b)
		if err != nil {
			return err
		}
		if i > 0 {
			if _, err := io.WriteString(w, "---\n"); err != nil {
				return err
			}
		}
		if _, err := w.Write(data); err != nil {
			return err
		}
	}
	return nil
}

// bundleYAML is b as YAML, without status (which only the hub writes) or an empty
// creation time.
func bundleYAML(b *fleet.Bundle) ([]byte, error) {
	js, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	var obj map[string]interface{}
	if err := json.Unmarshal(js, &obj); err != nil {
		return nil, err
	}
	delete(obj, "status")
	if meta, ok := obj["metadata"].(map[string]interface{}); ok && meta["creationTimestamp"] == nil {
		delete(meta, "creationTimestamp")
	}
	return yaml.Marshal(obj)
}

// saveBundle creates b, or replaces the spec of the Bundle of that name and adds
// b's labels and annotations to it.
func saveBundle(ctx context.Context, client versioned.Interface, b *fleet.Bundle, log io.Writer) error {
	bundles := client.FleetV1alpha1().Bundles(b.Namespace)
	existing, err := bundles.Get(ctx, b.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := bundles.Create(ctx, b, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating Bundle %s/%s: %w", b.Namespace, b.Name, err)
		}
		fmt.Fprintf(log, "created: %s/%s\n", b.Namespace, b.Name)
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading Bundle %s/%s: %w", b.Namespace, b.Name, err)
	}
	if want := metav1.GetControllerOfNoCopy(b); want != nil {
		// A GitRepo's Bundle: only one it made itself is updated.
		if have := metav1.GetControllerOfNoCopy(existing); have == nil || have.UID != want.UID {
			return fmt.Errorf("Bundle %s/%s exists and was not made by %s %s: give the folder another name (fleet.yaml name:)", b.Namespace, b.Name, want.Kind, want.Name)
		}
	}
	if owner := existing.Labels[RepoLabel]; owner != "" && owner != b.Labels[RepoLabel] {
		return fmt.Errorf("Bundle %s/%s belongs to %s (label %s), not to this apply: give the folder another name (fleet.yaml name:) or delete that Bundle", b.Namespace, b.Name, owner, RepoLabel)
	}
	updated := existing.DeepCopy()
	updated.Spec = b.Spec
	if len(b.OwnerReferences) > 0 {
		updated.OwnerReferences = b.OwnerReferences
	}
	updated.Labels = mergeStrings(updated.Labels, b.Labels)
	updated.Annotations = mergeStrings(updated.Annotations, b.Annotations)
	if _, err := bundles.Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		return fmt.Errorf("updating Bundle %s/%s: %w", b.Namespace, b.Name, err)
	}
	fmt.Fprintf(log, "updated: %s/%s\n", b.Namespace, b.Name)
	return nil
}

func mergeStrings(into, from map[string]string) map[string]string {
	if len(from) == 0 {
		return into
	}
	if into == nil {
		into = map[string]string{}
	}
	for k, v := range from {
		into[k] = v
	}
	return into
}

// prune deletes the Bundles an earlier apply of the same NAME made (RepoLabel) that
// are not in keep.
func prune(ctx context.Context, client versioned.Interface, opts ApplyOptions, keep map[string]bool) error {
	if opts.Name == "" {
		return nil
	}
	bundles := client.FleetV1alpha1().Bundles(opts.Namespace)
	list, err := bundles.List(ctx, metav1.ListOptions{LabelSelector: labels.Set{RepoLabel: opts.Name}.String()})
	if err != nil {
		return fmt.Errorf("listing the Bundles of %s: %w", opts.Name, err)
	}
	var errs []error
	for _, b := range list.Items {
		if keep[b.Name] {
			continue
		}
		if opts.Owner != nil {
			// A GitRepo prunes only the Bundles it made.
			if have := metav1.GetControllerOfNoCopy(&b); have == nil || have.UID != opts.Owner.UID {
				continue
			}
		}
		if err := bundles.Delete(ctx, b.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			errs = append(errs, fmt.Errorf("deleting Bundle %s/%s: %w", b.Namespace, b.Name, err))
			continue
		}
		fmt.Fprintf(logTo(opts.Log), "deleted: %s/%s (no longer in the folders)\n", b.Namespace, b.Name)
	}
	return errors.Join(errs...)
}
