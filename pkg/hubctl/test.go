package hubctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/bundlereader"
	"github.com/flotilla/flotilla/pkg/content"
	"github.com/flotilla/flotilla/pkg/render"
	"github.com/flotilla/flotilla/pkg/target"
)

// TestOptions are the options of `hub test`.
type TestOptions struct {
	// Dir is the folder to read (default "."); BundleFile, if set, a Bundle's YAML
	// to use instead.
	Dir        string
	BundleFile string
	// The cluster to render for: its name, labels, and the cluster group it is in
	// with that group's labels.
	ClusterName   string
	ClusterLabels map[string]string
	Group         string
	GroupLabels   map[string]string
	// Target, if set, is the name of the target to render, whatever matches.
	Target string
	// Quiet prints only which target matched.
	Quiet bool
	// Read is how the folder is read (charts downloaded, ...).
	Read bundlereader.Options
}

// TestBundleName is the name `hub test` (as `fleet test`) gives the Bundle of a folder.
const TestBundleName = "test"

// Test prints to out the manifests the cluster opts describes would get from the
// folder (or Bundle), rendered as the agent renders them; which target matched goes
// to log.
func Test(ctx context.Context, opts TestOptions, out, log io.Writer) error {
	b, err := testBundle(ctx, opts)
	if err != nil {
		return err
	}
	name, options, err := testTarget(b, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(log, "# Matched: %s\n", name)
	if opts.Quiet {
		return nil
	}
	limit := opts.Read.MaxSize
	if limit <= 0 {
		limit = content.DefaultMaxSize
	}
	files, err := content.Files(b.Spec.Resources, limit)
	if err != nil {
		return err
	}
	r, err := render.New(files, options, render.ReleaseName(options, b.Name), nil)
	if err != nil {
		return err
	}
	manifest, err := render.Template(ctx, r, render.ReleaseNamespace(options), render.ReleaseName(options, b.Name))
	if err != nil {
		return err
	}
	_, err = io.WriteString(out, manifest)
	return err
}

func testBundle(ctx context.Context, opts TestOptions) (*fleet.Bundle, error) {
	if opts.BundleFile != "" {
		data, err := os.ReadFile(opts.BundleFile)
		if err != nil {
			return nil, err
		}
		b := &fleet.Bundle{}
		if err := yaml.UnmarshalStrict(data, b); err != nil {
			return nil, fmt.Errorf("%s: %w", opts.BundleFile, err)
		}
		return b, nil
	}
	dir := opts.Dir
	if dir == "" {
		dir = "."
	}
	return bundlereader.Read(ctx, TestBundleName, dir, opts.Read)
}

// testTarget is the target that gives the cluster opts describes its options, by
// the rules the hub follows, and those options.
func testTarget(b *fleet.Bundle, opts TestOptions) (string, fleet.BundleDeploymentOptions, error) {
	if opts.Target != "" {
		for i, t := range b.Spec.Targets {
			if target.TargetName(i, t.Name) == opts.Target {
				return opts.Target, target.Merge(b.Spec.BundleDeploymentOptions, t.BundleDeploymentOptions), nil
			}
		}
		return "", fleet.BundleDeploymentOptions{}, fmt.Errorf("the Bundle has no target %q", opts.Target)
	}
	name := opts.ClusterName
	if name == "" {
		name = "test"
	}
	group := opts.Group
	if group == "" {
		group = "default"
	}
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: b.Namespace, Labels: opts.ClusterLabels}}
	groups := []*fleet.ClusterGroup{{
		ObjectMeta: metav1.ObjectMeta{Name: group, Namespace: b.Namespace, Labels: opts.GroupLabels},
		Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{}},
	}}
	matched, err := target.Clusters(b, []*fleet.Cluster{cluster}, groups)
	if err != nil {
		return "", fleet.BundleDeploymentOptions{}, err
	}
	if len(matched) == 0 {
		return "", fleet.BundleDeploymentOptions{}, errors.New("no target of the Bundle matches this cluster")
	}
	options, err := target.Template(matched[0].Options, cluster)
	if err != nil {
		return "", fleet.BundleDeploymentOptions{}, err
	}
	return matched[0].TargetName, options, nil
}
