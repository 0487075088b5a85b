package render

import (
	"encoding/json"
	"fmt"
	"path"
	"strings"

	"github.com/rancher/wrangler/v3/pkg/patch"
	"sigs.k8s.io/yaml"
)

// overlaysDir holds the YAML overlays: overlays/<name>/<file>.
const overlaysDir = "overlays/"

// applyOverlays applies the overlays named, in order, to the plain manifests among
// files: a file overlays/<name>/X replaces X; a file overlays/<name>/X_patch.yaml
// (any extension) patches X (a strategic merge patch for Kubernetes kinds, a merge
// patch otherwise, a JSON patch when it is a list). It returns new files.
func applyOverlays(files map[string][]byte, overlays []string) (map[string][]byte, error) {
	if len(overlays) == 0 {
		return files, nil
	}
	out := make(map[string][]byte, len(files))
	for k, v := range files {
		out[k] = v
	}
	for _, overlay := range overlays {
		prefix := overlaysDir + overlay + "/"
		found := false
		for _, name := range sortedNames(files) {
			rel, ok := strings.CutPrefix(name, prefix)
			if !ok {
				continue
			}
			found = true
			target, isPatch := patchTarget(rel)
			if !isPatch {
				out[rel] = files[name]
				continue
			}
			base, ok := out[target]
			if !ok {
				return nil, fmt.Errorf("yaml.overlays %s: %s patches %s, which is not among the Bundle's files", overlay, name, target)
			}
			patched, err := patchFile(base, files[name])
			if err != nil {
				return nil, fmt.Errorf("yaml.overlays %s: patching %s with %s: %w", overlay, target, name, err)
			}
			out[target] = patched
		}
		if !found {
			return nil, fmt.Errorf("yaml.overlays: no folder %s%s among the Bundle's files", overlaysDir, overlay)
		}
	}
	return out, nil
}

// patchTarget is the file a patch file patches: X.yaml for X_patch.yaml.
func patchTarget(name string) (string, bool) {
	base := path.Base(name)
	if !strings.Contains(base, "_patch.") {
		return "", false
	}
	return path.Join(path.Dir(name), strings.Replace(base, "_patch.", ".", 1)), true
}

func patchFile(base, p []byte) ([]byte, error) {
	original, err := toJSON(base)
	if err != nil {
		return nil, err
	}
	change, err := toJSON(p)
	if err != nil {
		return nil, err
	}
	return patch.Apply(original, change)
}

func toJSON(data []byte) ([]byte, error) {
	var v interface{}
	if err := yaml.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	return json.Marshal(v)
}
