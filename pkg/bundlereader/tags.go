package bundlereader

import (
	"fmt"
	"sort"
	"strings"

	"github.com/Masterminds/semver/v3"
)

// pickTag chooses among an OCI repository's tags the one for version: the tag
// itself, else the highest semantic version in the range version gives (any when
// empty). Helm stores "+" in a chart version as "_" in its tag.
func pickTag(tags []string, version string) (string, error) {
	for _, tag := range tags {
		if version != "" && (tag == version || tag == strings.ReplaceAll(version, "+", "_")) {
			return tag, nil
		}
	}
	constraint := "*"
	if version != "" {
		constraint = version
	}
	c, err := semver.NewConstraint(constraint)
	if err != nil {
		return "", fmt.Errorf("version %q is neither a tag of the repository nor a semver range: %w", version, err)
	}
	type candidate struct {
		tag string
		v   *semver.Version
	}
	var found []candidate
	for _, tag := range tags {
		v, err := semver.NewVersion(strings.ReplaceAll(tag, "_", "+"))
		if err == nil && c.Check(v) {
			found = append(found, candidate{tag, v})
		}
	}
	if len(found) == 0 {
		return "", fmt.Errorf("no tag matches version %q (the repository has %d tags)", constraint, len(tags))
	}
	sort.Slice(found, func(i, j int) bool { return found[i].v.GreaterThan(found[j].v) })
	return found[0].tag, nil
}
