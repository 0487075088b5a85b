package render

import (
	"fmt"
	"path"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/kustomize/api/krusty"
	"sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

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

// kustomizationFields are the fields of a kustomization that name files or folders
// (bases included), each a list of strings, or of objects whose "path" names one.
var kustomizationFields = []string{
	"resources", "bases", "components", "crds", "patchesStrategicMerge",
	"patches", "patchesJson6902", "configurations", "generators",
	"transformers", "validators", "replacements",
}

// generatorFields name files inside each configMapGenerator and secretGenerator.
var generatorFields = []string{"files", "envs", "env"}

// checkReferences checks that everything the kustomization in dir refers to is a file
// or folder inside the in-memory filesystem (the Bundle), and does so for the
// kustomizations of the folders it refers to.
func checkReferences(fs filesys.FileSystem, dir string, seen map[string]bool) error {
	if seen[dir] {
		return nil
	}
	seen[dir] = true
	var file string
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		if fs.Exists(path.Join(dir, name)) {
			file = path.Join(dir, name)
			break
		}
	}
	if file == "" {
		return nil
	}
	data, err := fs.ReadFile(file)
	if err != nil {
		return err
	}
	k := map[string]interface{}{}
	if err := yaml.Unmarshal(data, &k); err != nil {
		return fmt.Errorf("%s: %w", strings.TrimPrefix(file, "/"), err)
	}
	if _, ok := k["helmCharts"]; ok {
		return fmt.Errorf("%s: helmCharts is not supported: put the chart in fleet.yaml's helm instead", strings.TrimPrefix(file, "/"))
	}
	var refs []string
	for _, field := range kustomizationFields {
		refs = append(refs, pathsOf(k[field])...)
	}
	if openapi, ok := k["openapi"].(map[string]interface{}); ok {
		if p, ok := openapi["path"].(string); ok {
			refs = append(refs, p)
		}
	}
	for _, gen := range []string{"configMapGenerator", "secretGenerator"} {
		list, _ := k[gen].([]interface{})
		for _, g := range list {
			m, _ := g.(map[string]interface{})
			for _, field := range generatorFields {
				for _, ref := range pathsOf(m[field]) {
					// files: [key=path]
					if _, p, ok := strings.Cut(ref, "="); ok {
						ref = p
					}
					refs = append(refs, ref)
				}
			}
		}
	}
	for _, ref := range refs {
		target := path.Join(dir, ref)
		if strings.Contains(ref, "://") || strings.HasPrefix(ref, "/") || !strings.HasPrefix(target+"/", "/") || !fs.Exists(target) {
			return fmt.Errorf("%s refers to %q, which is not a file of the Bundle: kustomize reads only the Bundle's own files (no URLs, no Git repositories)", strings.TrimPrefix(file, "/"), ref)
		}
		if fs.IsDir(target) {
			if err := checkReferences(fs, target, seen); err != nil {
				return err
			}
		}
	}
	return nil
}

// pathsOf lists the file references in v: strings that are not inline YAML, and the
// "path" of objects.
func pathsOf(v interface{}) []string {
	list, _ := v.([]interface{})
	var out []string
	for _, e := range list {
		switch x := e.(type) {
		case string:
			if !strings.Contains(x, "\n") && !strings.HasPrefix(strings.TrimSpace(x), "{") {
				out = append(out, x)
			}
		case map[string]interface{}:
			if p, ok := x["path"].(string); ok {
				out = append(out, p)
			}
		}
	}
	return out
}
