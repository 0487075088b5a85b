// Package bundlereader turns folders as Fleet users keep them (a fleet.yaml, the
// files beside it, charts from repositories and registries) into Bundles, as Fleet's
// `fleet apply` does: the same Bundle names, the same resource layout, the same
// options. `hub apply` and `hub test` use it; so will the GitRepo controller.
//
// A folder's content comes from whoever can push to its repository: every read is
// bounded, links may not leave the folder, chart archives are unpacked in memory
// with their paths checked, and credentials go only to repositories the caller
// allows.
package bundlereader
