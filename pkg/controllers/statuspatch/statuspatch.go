// Package statuspatch writes the status a controller computed as a JSON merge patch of
// only what changed, instead of an update of the whole object: no resourceVersion, so
// no conflict with the agent's own status patches or with a cache that is a moment
// behind, and no retry with backoff; fields the controller did not change are left as
// the API server has them.
package statuspatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
)

// Debounce is how long a summary of other objects (a Bundle's of its
// BundleDeployments, a Cluster's of its BundleDeployments, a ClusterGroup's of its
// Clusters) waits after a change of one of them before it is recomputed: the changes of
// that second are written as one status patch, not one each. A fleet's heartbeats and
// a rollout's status reports come in bursts.
const Debounce = time.Second

// For is the merge patch {"status": ...} that turns before into after; nil when they
// are the same.
func For(before, after any) ([]byte, error) {
	from, err := json.Marshal(map[string]any{"status": before})
	if err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	to, err := json.Marshal(map[string]any{"status": after})
	if err != nil {
		return nil, fmt.Errorf("encoding the status: %w", err)
	}
	patch, err := jsonpatch.CreateMergePatch(from, to)
	if err != nil {
		return nil, fmt.Errorf("computing the status patch: %w", err)
	}
	if bytes.Equal(patch, []byte("{}")) {
		return nil, nil
	}
	return patch, nil
}
