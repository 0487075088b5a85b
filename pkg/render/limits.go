package render

import (
	jsonpatch "github.com/evanphx/json-patch"
	jsonpatchv4 "gopkg.in/evanphx/json-patch.v4"
)

// maxPatchGrowth bounds how much JSON patches' copy operations may grow one object:
// overlays' patches (wrangler's) and kustomize's are written by a Bundle's author, and
// forty copies of a field into itself would double it forty times. (In the hub, the
// embedded API server lowers the limit to its own, which is smaller.)
const maxPatchGrowth = 16 << 20

func init() {
	jsonpatch.AccumulatedCopySizeLimit = maxPatchGrowth
	jsonpatchv4.AccumulatedCopySizeLimit = maxPatchGrowth
}
