// Package statuspatch writes the status a controller computed without an update of the
// whole object: no resourceVersion, so no conflict with the agent's own status patches
// or with a cache that is a moment behind, and no retry with backoff. A status with one
// writer is sent as a JSON merge patch of only what changed (For); a status that
// several writers share is written with server-side apply, each writer as the Owner
// of its own fields and conditions.
package statuspatch

import (
	"bytes"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"

	fleet "github.com/flotilla/flotilla/pkg/apis/fleet.cattle.io/v1alpha1"
	"github.com/flotilla/flotilla/pkg/conditions"
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

// Limiter spaces the status patches of each object by at least Debounce, so that the
// changes of a busy second (a new Cluster's namespace, its agent bundle, its agent's
// first check-in and its first Ready bundle) are written as one patch. The first
// patch of an object the Limiter has not seen waits First (Debounce if zero): a new
// object's status settles in its first moments. Turning Ready is never held back.
type Limiter struct {
	next sync.Map // key → time.Time before which no patch is allowed
	// First is how long the first patch of an object waits; zero means Debounce.
	First time.Duration
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// NewObjectWait is the First of the hub's Clusters and Bundles: long enough, under
// load, for a registering agent to check in and its agent bundle to be applied, so
// that a new object's status goes from empty to Ready in one or two writes rather
// than three or four.
const NewObjectWait = 3 * time.Second

// Wait is how long to wait before patching key's status, whose Ready condition goes
// from before to after; 0 means now, and counts as the patch. A status that turns
// Ready is news a user waits for: it is patched at once.
func (l *Limiter) Wait(key string, before, after []fleet.Condition) time.Duration {
	now := time.Now()
	if l.Now != nil {
		now = l.Now()
	}
	first := l.First
	if first == 0 {
		first = Debounce
	}
	wait := first
	if next, seen := l.next.LoadOrStore(key, now.Add(first)); seen {
		wait = next.(time.Time).Sub(now)
	}
	if wait > 0 && !BecomesReady(before, after) {
		return wait
	}
	l.next.Store(key, now.Add(Debounce))
	return 0
}

// Forget drops key, for a deleted object.
func (l *Limiter) Forget(key string) { l.next.Delete(key) }

// BecomesReady says whether after turns the Ready condition True where before had not.
func BecomesReady(before, after []fleet.Condition) bool {
	return conditions.IsTrue(after, fleet.ConditionReady) && !conditions.IsTrue(before, fleet.ConditionReady)
}

// Written remembers, per object, the status a controller last patched it to and the
// resourceVersion of the object that patch was computed from. While the cache still
// shows that resourceVersion, it has not seen the patch yet, and the controller builds
// on what it wrote instead of the stale copy: a reconcile in that moment (a
// BundleDeployment's change, a requeue) does not send the same patch again. With
// 1,000 clusters registering at once the hub's cache is seconds behind, and 370 of
// the 1,000 Clusters got two or more patches setting their Ready condition, those
// read being the same Ready patch twice (make bench with --hub-arg=--debug).
// A controller's workers never handle one key at once, so a key needs no lock.
type Written[S any] struct {
	m sync.Map // key → written[S]
}

type written[S any] struct {
	from   string
	status S
}

// Base is the status to build on and compare with: the one last written, while the
// cache shows the object at the resourceVersion that write was computed from;
// otherwise cached.
func (w *Written[S]) Base(key, resourceVersion string, cached S) S {
	if v, ok := w.m.Load(key); ok {
		if e := v.(written[S]); e.from == resourceVersion {
			return e.status
		}
		w.m.Delete(key)
	}
	return cached
}

// Remember records that key, seen at resourceVersion from, was patched to status.
// The caller must not change status afterwards.
func (w *Written[S]) Remember(key, from string, status S) {
	w.m.Store(key, written[S]{from: from, status: status})
}

// Forget drops key, for a deleted object.
func (w *Written[S]) Forget(key string) { w.m.Delete(key) }
