package bundlereader

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
)

// FleetYAML is the fleet.yaml of a folder: a BundleSpec, plus what only the folder
// says (the Bundle's name and labels, customisations that become targets, targets
// that replace the caller's).
type FleetYAML struct {
	// Name overrides the Bundle name derived from the folder's path.
	Name string `json:"name,omitempty"`
	// Labels are added to the Bundle.
	Labels map[string]string `json:"labels,omitempty"`
	fleet.BundleSpec
	// TargetCustomizations are appended to the targets: each gives the clusters it
	// matches their own options.
	TargetCustomizations []fleet.BundleTarget `json:"targetCustomizations,omitempty"`
	// OverrideTargets, when set, are the Bundle's targets and its target
	// restrictions, instead of those the caller gives.
	OverrideTargets []fleet.BundleTargetRestriction `json:"overrideTargets,omitempty"`
}

// fleetYAMLNames are the names a folder's fleet.yaml may have, in the order they are
// looked for.
var fleetYAMLNames = []string{"fleet.yaml", "fleet.yml"}

// maxFleetYAML bounds a fleet.yaml: far above any real one.
const maxFleetYAML = 1 << 20

// hasFleetYAML says whether dir holds a fleet.yaml.
func hasFleetYAML(dir string) bool {
	_, err := fleetYAMLPath(dir)
	return err == nil
}

// fileIn is the file name in dir, which must be there once links are followed.
func fileIn(dir, name string) (string, error) {
	clean := filepath.Clean(name)
	if filepath.IsAbs(clean) || clean == "." || clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("options file %q is not a file in its folder", name)
	}
	root, err := filepath.EvalSymlinks(dir)
	if err != nil {
		return "", err
	}
	real, err := filepath.EvalSymlinks(filepath.Join(dir, clean))
	if err != nil {
		return "", fmt.Errorf("options file %q: %w", name, err)
	}
	if !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return "", fmt.Errorf("options file %q leaves its folder", name)
	}
	return real, nil
}

func fleetYAMLPath(dir string) (string, error) {
	for _, name := range fleetYAMLNames {
		p := filepath.Join(dir, name)
		if fi, err := os.Lstat(p); err == nil && fi.Mode().IsRegular() {
			return p, nil
		}
	}
	return "", os.ErrNotExist
}

// readFleetYAML reads dir's fleet.yaml, or the file named instead (relative to
// dir, which it may not leave); a folder without one reads as empty.
func readFleetYAML(dir, instead string) (*FleetYAML, error) {
	p, err := fleetYAMLPath(dir)
	if instead != "" {
		p, err = fileIn(dir, instead)
		if err != nil {
			return nil, err
		}
	}
	if errors.Is(err, os.ErrNotExist) {
		return &FleetYAML{}, nil
	}
	data, err := readBounded(p, maxFleetYAML)
	if err != nil {
		return nil, err
	}
	fy, err := ParseFleetYAML(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p, err)
	}
	return fy, nil
}

// ParseFleetYAML parses a fleet.yaml. A field Flotilla does not know is an error
// naming it, not silently dropped: a Bundle that lost an option would deploy
// something else than its author wrote.
func ParseFleetYAML(data []byte) (*FleetYAML, error) {
	fy := &FleetYAML{}
	if len(bytes.TrimSpace(data)) == 0 {
		return fy, nil
	}
	js, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, err
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return fy, nil
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	if err := dec.Decode(fy); err != nil {
		return nil, fmt.Errorf("%w (see docs/fleet-yaml.md for the fields Flotilla reads)", err)
	}
	if fy.ValuesHash != "" || fy.ContentsID != "" || len(fy.Resources) > 0 {
		return nil, fmt.Errorf("fleet.yaml may not set resources, contentsId or valuesHash: a Bundle's resources are the folder's files")
	}
	return fy, nil
}

// objectMeta is the Bundle's metadata a fleet.yaml gives.
func (fy *FleetYAML) objectMeta(name string) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{Name: name}
	if fy.Name != "" {
		meta.Name = fy.Name
	}
	if len(fy.Labels) > 0 {
		meta.Labels = map[string]string{}
		for k, v := range fy.Labels {
			meta.Labels[k] = v
		}
	}
	return meta
}
