package render

import (
	"fmt"
	"path"
	"regexp"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// kustomizationFiles are the names kustomize reads a folder's kustomization from.
var kustomizationFiles = []string{"kustomization.yaml", "kustomization.yml", "Kustomization"}

// helmOutputFile is the file holding Helm's output that kustomize reads as a resource.
const helmOutputFile = "fleet-manifests.yaml"

// kustomize builds dir's kustomization.yaml over the Bundle's files, in memory, with
// helmOutput (when not empty) as its first resource. It returns false when dir has no
// kustomization.yaml.
//
// A Bundle's files come from its author, and kustomize would fetch a resource named
// by URL and clone a base named by Git URL: every file a kustomization refers to must
// be among the Bundle's files (checked first); plugins and Helm inflation are off.
func kustomize(files map[string][]byte, helmOutput []byte, dir string) ([]runtime.Object, bool, error) {
	dir = path.Clean(dir)
	fs := filesys.MakeFsInMemory()
	for _, name := range sortedNames(files) {
		if err := fs.WriteFile("/"+name, files[name]); err != nil {
			return nil, false, err
		}
	}
	root := path.Join("/", dir)
	kustomization := path.Join(root, "kustomization.yaml")
	if !fs.Exists(kustomization) {
		return nil, false, nil
	}
	if err := fs.WriteFile(path.Join(root, helmOutputFile), helmOutput); err != nil {
		return nil, false, err
	}
	if len(helmOutput) > 0 {
		if err := addResource(fs, kustomization, helmOutputFile); err != nil {
			return nil, false, err
		}
	}
	if err := checkReferences(fs, root, map[string]bool{}); err != nil {
		return nil, false, err
	}
	k := krusty.MakeKustomizer(&krusty.Options{
		LoadRestrictions: types.LoadRestrictionsRootOnly,
		PluginConfig:     types.DisabledPluginConfig(),
	})
	resources, err := k.Run(fs, root)
	if err != nil {
		return nil, false, fmt.Errorf("kustomize %s: %w", dir, err)
	}
	var out []runtime.Object
	for _, r := range resources.Resources() {
		m, err := r.Map()
		if err != nil {
			return nil, false, err
		}
		out = append(out, &unstructured.Unstructured{Object: m})
	}
	return out, true, nil
}

// addResource puts file first among the resources of the kustomization at p.
func addResource(fs filesys.FileSystem, p, file string) error {
	data, err := fs.ReadFile(p)
	if err != nil {
		return err
	}
	k := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("%s: %w", strings.TrimPrefix(p, "/"), err)
	}
	resources, _ := k["resources"].([]interface{})
	for _, r := range resources {
		if r == file {
			return nil
		}
	}
	k["resources"] = append([]interface{}{file}, resources...)
	data, err = yaml.Marshal(k)
	if err != nil {
		return err
	}
	return fs.WriteFile(p, data)
}

// checkReferences checks, for the kustomization in dir and those of the folders it
// refers to, that everything kustomize would read is one of the Bundle's files: the
// kustomization is decoded as kustomize decodes it (field names in any case,
// deprecated fields folded in), and each reference must be a plain relative path
// inside the Bundle. kustomize takes anything else for a URL to fetch or a Git
// repository to clone, and runs inline generator configurations as plugins.
func checkReferences(fs filesys.FileSystem, dir string, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	var file string
	for _, name := range kustomizationFiles {
		if fs.Exists(path.Join(dir, name)) {
			file = path.Join(dir, name)
			break
		}
	}
	if file == "" {
		return nil
	}
	display := strings.TrimPrefix(file, "/")
	data, err := fs.ReadFile(file)
	if err != nil {
		return err
	}
	var k types.Kustomization
	if err := k.Unmarshal(data); err != nil {
		return fmt.Errorf("%s: %w", display, err)
	}
	k.FixKustomization()
	if len(k.HelmCharts) > 0 || k.HelmGlobals != nil {
		return fmt.Errorf("%s: helmCharts is not supported: put the chart in fleet.yaml's helm instead", display)
	}
	refs := append([]string{}, k.Resources...)
	refs = append(refs, k.Components...)
	refs = append(refs, k.Crds...)
	refs = append(refs, k.Configurations...)
	refs = append(refs, k.Generators...)
	refs = append(refs, k.Transformers...)
	refs = append(refs, k.Validators...)
	//lint:ignore SA1019 deprecated, but kustomize still reads it: a path in it must be checked too
	for _, p := range k.PatchesStrategicMerge {
		if s := string(p); !strings.Contains(s, "\n") && !strings.HasPrefix(strings.TrimSpace(s), "{") {
			refs = append(refs, s)
		}
	}
	//lint:ignore SA1019 deprecated, but kustomize still reads it: a path in it must be checked too
	for _, p := range append(append([]types.Patch{}, k.Patches...), k.PatchesJson6902...) {
		if p.Path != "" {
			refs = append(refs, p.Path)
		}
	}
	for _, r := range k.Replacements {
		if r.Path != "" {
			refs = append(refs, r.Path)
		}
	}
	if p, ok := k.OpenAPI["path"]; ok {
		refs = append(refs, p)
	}
	for _, g := range append(append([]types.ConfigMapArgs{}, k.ConfigMapGenerator...), secretArgs(k.SecretGenerator)...) {
		for _, f := range g.FileSources {
			if _, p, ok := strings.Cut(f, "="); ok {
				f = p
			}
			refs = append(refs, f)
		}
		refs = append(refs, g.EnvSources...)
	}
	for _, ref := range refs {
		target, err := localReference(fs, dir, ref)
		if err != nil {
			return fmt.Errorf("%s refers to %q, which is not a file of the Bundle: %v; kustomize reads only the Bundle's own files (no URLs, no Git repositories, no inline generators)", display, ref, err)
		}
		if fs.IsDir(target) {
			if err := checkReferences(fs, target, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

func secretArgs(in []types.SecretArgs) []types.ConfigMapArgs {
	out := make([]types.ConfigMapArgs, 0, len(in))
	for _, s := range in {
		out = append(out, types.ConfigMapArgs{GeneratorArgs: s.GeneratorArgs})
	}
	return out
}

// plainPath is what a reference kustomize takes for a local path may hold.
var plainPath = regexp.MustCompile(`^[A-Za-z0-9._/-]+$`)

// localReference is the file or folder ref names from dir, or why it is not a local
// one: not a plain relative path, outside the Bundle, missing, or a folder whose name
// kustomize would take for a Git repository (a host name first, or .git / _git).
func localReference(fs filesys.FileSystem, dir, ref string) (string, error) {
	if !plainPath.MatchString(ref) || strings.HasPrefix(ref, "/") {
		return "", fmt.Errorf("not a plain relative path")
	}
	rel := path.Clean(path.Join(strings.TrimPrefix(dir, "/"), ref))
	if rel == ".." || strings.HasPrefix(rel, "../") {
		return "", fmt.Errorf("outside the Bundle")
	}
	target := path.Join("/", rel)
	if !fs.Exists(target) {
		return "", fmt.Errorf("no such file")
	}
	if fs.IsDir(target) {
		first := firstNamed(ref)
		for i, seg := range strings.Split(ref, "/") {
			if seg == "." || seg == ".." {
				continue
			}
			if i == first && strings.Contains(seg, ".") {
				return "", fmt.Errorf("a folder named like a host, which kustomize would clone")
			}
			if strings.HasSuffix(seg, ".git") || strings.Contains(seg, "_git") {
				return "", fmt.Errorf("a folder named like a Git repository, which kustomize would clone")
			}
		}
	}
	return target, nil
}

// firstNamed is the index of the first segment of ref that is not . or ..
func firstNamed(ref string) int {
	for i, seg := range strings.Split(ref, "/") {
		if seg != "." && seg != ".." {
			return i
		}
	}
	return -1
}
