package render

import (
	"bytes"
	"fmt"
	"path"
	"slices"
	"strings"

	"github.com/rancher/wrangler/v3/pkg/yaml"
	"helm.sh/helm/v3/pkg/chart"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// PostRenderer finishes what Helm renders, as Fleet's agent does: kustomize (with
// Helm's output as one more resource) when the Bundle has a kustomization, then the
// plain manifests of the chart, then targetNamespace.
type PostRenderer struct {
	Files   map[string][]byte
	Options fleet.BundleDeploymentOptions
	Chart   *chart.Chart
	// ClusterScoped, if set, says whether objects of a kind are cluster-scoped: with
	// targetNamespace, such an object is an error. Without it (hub test has no
	// cluster) nothing is refused.
	ClusterScoped func(schema.GroupVersionKind) (bool, error)
}

// Run implements Helm's postrender.PostRenderer.
func (p *PostRenderer) Run(rendered *bytes.Buffer) (*bytes.Buffer, error) {
	objs, err := yaml.ToObjects(bytes.NewReader(rendered.Bytes()))
	if err != nil {
		return nil, fmt.Errorf("reading what Helm rendered: %w", err)
	}
	if hasKustomization(p.Files) {
		var helmOutput []byte
		if len(objs) > 0 {
			helmOutput = rendered.Bytes()
		}
		dir := "."
		if p.Options.Kustomize != nil && p.Options.Kustomize.Dir != "" {
			dir = p.Options.Kustomize.Dir
		}
		built, ok, err := kustomize(p.Files, helmOutput, dir)
		if err != nil {
			return nil, err
		}
		if ok {
			objs = built
		}
	}
	raw, err := rawManifests(p.Chart)
	if err != nil {
		return nil, err
	}
	objs = append(objs, raw...)
	if ns := p.Options.TargetNamespace; ns != "" {
		if err := p.setNamespace(objs, ns); err != nil {
			return nil, err
		}
	}
	out, err := yaml.ToBytes(objs)
	if err != nil {
		return nil, err
	}
	return bytes.NewBuffer(out), nil
}

func hasKustomization(files map[string][]byte) bool {
	for name := range files {
		if slices.Contains(kustomizationFiles, path.Base(name)) {
			return true
		}
	}
	return false
}

// rawManifests are the objects of the chart's plain manifests; documents without
// apiVersion and kind (comments, values) are skipped.
func rawManifests(c *chart.Chart) ([]runtime.Object, error) {
	var out []runtime.Object
	if c == nil {
		return nil, nil
	}
	for _, f := range c.Files {
		if !strings.HasPrefix(f.Name, rawPrefix) {
			continue
		}
		objs, err := yaml.ToObjects(bytes.NewReader(f.Data))
		if err != nil {
			if runtime.IsMissingKind(err) {
				continue
			}
			return nil, fmt.Errorf("%s: %w", strings.TrimPrefix(f.Name, rawPrefix), err)
		}
		for _, obj := range objs {
			apiVersion, kind := obj.GetObjectKind().GroupVersionKind().ToAPIVersionAndKind()
			if apiVersion != "" && kind != "" {
				out = append(out, obj)
			}
		}
	}
	return out, nil
}

// setNamespace puts every object in ns; a cluster-scoped one is an error.
func (p *PostRenderer) setNamespace(objs []runtime.Object, ns string) error {
	for _, obj := range objs {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return fmt.Errorf("unexpected object %T", obj)
		}
		clusterScoped := false
		if p.ClusterScoped != nil {
			var err error
			if clusterScoped, err = p.ClusterScoped(u.GroupVersionKind()); err != nil {
				return err
			}
		}
		if err := place(u, ns, clusterScoped, ""); err != nil {
			return err
		}
	}
	return nil
}

// place puts u in ns (targetNamespace), which a cluster-scoped object cannot be;
// what names what u is ("hook " for a Helm hook) in the error.
func place(u *unstructured.Unstructured, ns string, clusterScoped bool, what string) error {
	if clusterScoped {
		return fmt.Errorf("%s%s %s is cluster-scoped, and the Bundle sets namespace (targetNamespace) %s, which puts every object in that namespace: use defaultNamespace to deploy cluster-scoped objects", what, u.GetKind(), u.GetName(), ns)
	}
	u.SetNamespace(ns)
	return nil
}
